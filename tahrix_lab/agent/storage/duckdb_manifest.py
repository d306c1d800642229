"""The DuckDB engine's case manifests (a part of ``DuckDBStore``): how each case's evidence
was made, step by step, so another host can rebuild or verify it."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.errors import CaseBusy, ManifestMoved
from tahrix_lab.agent.storage.file_locks import case_turn_taken
from tahrix_lab.agent.storage.interface import (
    MANIFEST_COLUMNS,
    check_manifest_kind,
    parsed,
)
from tahrix_lab.agent.storage.schema import json_row, quoted
from tahrix_lab.agent.transcript import utcnow

if TYPE_CHECKING:
    import duckdb

    from tahrix_lab.agent.storage.duck import Database


_TURNS: dict[tuple[str, str], threading.Lock] = {}  # (the database, case id): its turn
_TURNS_LOCK = threading.Lock()


class DuckDBManifests:
    """Mixed into ``DuckDBStore``, which gives ``cursor()`` and ``_db``."""

    if TYPE_CHECKING:
        _db: Database

        def cursor(self) -> duckdb.DuckDBPyConnection: ...

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
        with self._db.write() as cur:  # one writer at a time: the next number is ours
            found = cur.execute("SELECT step FROM case_manifests WHERE step_id = ?", [step_id]).fetchone()
            if found:
                return int(found[0])
            if number is not None:
                count = cur.execute("SELECT count(*) FROM case_manifests WHERE case_id = ?", [case_id])
                if count.fetchone() != (number,):
                    raise ManifestMoved(case_id, number)
            row = cur.execute(
                f"INSERT INTO case_manifests ({', '.join(MANIFEST_COLUMNS)}) "
                "SELECT ?, coalesce(max(step) + 1, 0), ?, ?, ?, ?, ?, ? FROM case_manifests WHERE case_id = ? "
                "RETURNING step",
                [case_id, step_id, kind, json.dumps(entry), json.dumps(fingerprint), recorded_by, utcnow(),
                 case_id],
            ).fetchone()  # fmt: skip
        assert row is not None
        return int(row[0])

    @contextmanager
    def case_turn(self, case_id: str) -> Iterator[None]:
        # The threads of this process take turns through a lock of its own; the processes that
        # share the file (each holds it only for a burst), through a lock beside it.
        path = self._db.path
        where = os.path.realpath(path) if path != ":memory:" else str(id(self._db))  # a file, by any name
        with _TURNS_LOCK:
            turn = _TURNS.setdefault((where, case_id), threading.Lock())
        if not turn.acquire(blocking=False):
            raise CaseBusy(case_id)
        try:
            if path == ":memory:":
                yield
                return
            with case_turn_taken(where, case_id) as taken:
                if not taken:
                    raise CaseBusy(case_id)
                yield
        finally:
            turn.release()

    def case_manifest(self, case_id: str) -> list[dict[str, Any]]:
        rows = self.cursor().execute(
            f"SELECT {', '.join(MANIFEST_COLUMNS)} FROM case_manifests WHERE case_id = ? ORDER BY step",
            [case_id],
        )
        out = [dict(zip(MANIFEST_COLUMNS, r, strict=True)) for r in rows.fetchall()]
        for s in out:
            s["entry"], s["fingerprint"] = parsed(s["entry"]), parsed(s["fingerprint"])
        return out

    def manifest_cases(self) -> list[str]:
        rows = self.cursor().execute("SELECT DISTINCT case_id FROM case_manifests ORDER BY 1")
        return [r[0] for r in rows.fetchall()]

    def import_manifest_steps(self, steps: Sequence[dict[str, Any]]) -> None:
        with self._db.write() as cur:
            for step in steps:
                cur.execute(
                    f"INSERT INTO case_manifests ({quoted(MANIFEST_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(MANIFEST_COLUMNS))})",
                    json_row(step, MANIFEST_COLUMNS),
                )
