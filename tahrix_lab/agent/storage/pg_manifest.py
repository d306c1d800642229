"""The PostgreSQL engine's case manifests (a part of ``PostgresStore``): how each case's
evidence was made, step by step, shared by every host of a team."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from tahrix_lab.agent.errors import CaseBusy, ManifestMoved, StoreUnavailableError
from tahrix_lab.agent.storage.interface import (
    MANIFEST_COLUMNS,
    check_manifest_kind,
    parsed,
)
from tahrix_lab.agent.storage.pg_pool import first_line
from tahrix_lab.agent.storage.schema import json_row, quoted
from tahrix_lab.agent.transcript import utcnow

if TYPE_CHECKING:
    import psycopg

    from tahrix_lab.agent.storage.pg_pool import Pool

T = TypeVar("T")
# Any fixed number: the transaction-level lock that numbers one case's steps in turn.
_STEP_LOCK = 0x7A1A_5E03
# Another: a host's turn at a case's evidence, held by its session while it loads or detects.
_TURN_LOCK = 0x7A1A_5E04
_TRY_TURN = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
_END_TURN = "SELECT pg_advisory_unlock(%s, hashtext(%s))"


class PostgresManifests:
    """Mixed into ``PostgresStore``, which gives ``_run``, ``_rows`` and ``_rows_written``."""

    if TYPE_CHECKING:
        _pool: Pool

        def _rows_written(self, sql: str, params: Sequence[Any]) -> None: ...

        def _run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T: ...

        def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def add_manifest_step(
        self,
        case_id: str,
        kind: str,
        entry: dict[str, Any],
        fingerprint: dict[str, Any],
        *,
        step_id: str,
        recorded_by: str | None = None,
        number: int | None = None,
    ) -> int:
        check_manifest_kind(kind)
        now = utcnow()

        def write(conn: psycopg.Connection[Any], _first: bool) -> int:
            # Two hosts loading into one case at once take turns for the next number; a retry
            # after a dropped connection finds the row its first try wrote.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_STEP_LOCK, case_id])
                found = conn.execute(
                    "SELECT step FROM case_manifests WHERE step_id = %s", [step_id]
                ).fetchone()
                if found:
                    return int(found[0])
                if number is not None:
                    count = conn.execute("SELECT count(*) FROM case_manifests WHERE case_id = %s", [case_id])
                    if count.fetchone() != (number,):
                        raise ManifestMoved(case_id, number)
                row = conn.execute(
                    f"INSERT INTO case_manifests ({', '.join(MANIFEST_COLUMNS)}) "
                    "SELECT %s, coalesce(max(step) + 1, 0), %s, %s, %s, %s, %s, %s FROM case_manifests "
                    "WHERE case_id = %s RETURNING step",
                    [case_id, step_id, kind, json.dumps(entry), json.dumps(fingerprint), recorded_by, now,
                     case_id],
                ).fetchone()  # fmt: skip
            assert row is not None
            return int(row[0])

        return self._run(write)

    @contextmanager
    def case_turn(self, case_id: str) -> Iterator[None]:
        # A session-level advisory lock on a connection of its own, held while the work runs. If
        # that connection dies the turn is lost: add_manifest_step's ``number`` then catches a
        # step another host recorded meanwhile.
        import psycopg

        for attempt in (1, 2):  # a pooled connection a server restart killed: once more
            with self._pool.session() as conn:
                try:
                    with self._pool.watchdog.watch(conn):
                        got = conn.execute(_TRY_TURN, [_TURN_LOCK, case_id]).fetchone()
                except psycopg.OperationalError as exc:
                    if attempt == 2:
                        raise StoreUnavailableError(
                            f"Lost the connection to the PostgreSQL record at {self._pool.server}: "
                            f"{first_line(exc)}"
                        ) from None
                    continue
                if got != (True,):
                    raise CaseBusy(case_id)
                try:
                    yield
                finally:
                    with contextlib.suppress(psycopg.Error), self._pool.watchdog.watch(conn):
                        conn.execute(_END_TURN, [_TURN_LOCK, case_id])
                return

    def case_manifest(self, case_id: str) -> list[dict[str, Any]]:
        rows = self._rows(
            f"SELECT {', '.join(MANIFEST_COLUMNS)} FROM case_manifests WHERE case_id = %s ORDER BY step",
            [case_id],
        )
        out = [dict(zip(MANIFEST_COLUMNS, r, strict=True)) for r in rows]
        for s in out:
            s["entry"], s["fingerprint"] = parsed(s["entry"]), parsed(s["fingerprint"])
        return out

    def manifest_cases(self) -> list[str]:
        return [
            r[0] for r in self._rows('SELECT DISTINCT case_id COLLATE "C" FROM case_manifests ORDER BY 1')
        ]

    def import_manifest_steps(self, steps: Sequence[dict[str, Any]]) -> None:
        for step in steps:  # inside the caller's transaction: all steps or none
            self._rows_written(
                f"INSERT INTO case_manifests ({quoted(MANIFEST_COLUMNS)}) "
                f"VALUES ({', '.join(['%s'] * len(MANIFEST_COLUMNS))})",
                json_row(step, MANIFEST_COLUMNS),
            )
