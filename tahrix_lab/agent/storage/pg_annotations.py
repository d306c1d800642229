"""The PostgreSQL engine's record of what analysts write on a case (a part of
``PostgresStore``): annotations and audit entries, what each session has seen, and these
rows moved whole; shared by every host of a team."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from tahrix_lab.agent.storage.interface import (
    ANNOTATION_COLUMNS,
    AUDIT_COLUMNS,
    SEEN_COLUMNS,
    check_annotation,
    parsed,
)
from tahrix_lab.agent.storage.schema import CASE_ROW_TABLES, RECORD_CASES, json_row, quoted
from tahrix_lab.agent.transcript import utcnow

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
_AUDIT_IN = AUDIT_COLUMNS[:-1]


class PostgresAnnotations:
    """Mixed into ``PostgresStore``, which gives ``_run`` and ``_rows``."""

    if TYPE_CHECKING:

        def _run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T: ...

        def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def _rows_written(self, sql: str, params: Sequence[Any]) -> None: ...

        def transaction(self, *, buffered: bool = False) -> AbstractContextManager[None]: ...

    def record_annotation(
        self,
        entry: dict[str, Any],
        kind: str | None = None,
        key: str | None = None,
        value: dict[str, Any] | None = None,
        *,
        reverts: str | None = None,
    ) -> None:
        check_annotation(kind)
        row = [json.dumps(entry[c]) if c in ("before", "after") else entry[c] for c in _AUDIT_IN]
        now = utcnow()

        def write(conn: psycopg.Connection[Any], _first: bool) -> None:
            # One transaction; a retry finds the audit row its first try wrote and stops there.
            with conn.transaction():
                done = conn.execute(
                    f"INSERT INTO case_audit ({', '.join(_AUDIT_IN)}) "
                    f"VALUES ({', '.join(['%s'] * len(_AUDIT_IN))}) ON CONFLICT DO NOTHING RETURNING audit_id",
                    row,
                ).fetchall()
                if not done:
                    return
                if kind is not None:
                    conn.execute(
                        "INSERT INTO case_annotations VALUES (%s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (case_id, kind, key) DO UPDATE SET value = excluded.value, "
                        "updated_by = excluded.updated_by, updated_at = excluded.updated_at",
                        [entry["case_id"], kind, key, None if value is None else json.dumps(value),
                         entry["actor"], now],
                    )  # fmt: skip
                if reverts is not None:
                    conn.execute(
                        "UPDATE case_audit SET reverted_by = %s WHERE audit_id = %s",
                        [entry["audit_id"], reverts],
                    )

        self._run(write)

    def annotations(self, case_id: str) -> list[dict[str, Any]]:
        rows = self._rows(
            f"SELECT {', '.join(ANNOTATION_COLUMNS)} FROM case_annotations WHERE case_id = %s "
            'ORDER BY kind COLLATE "C", key COLLATE "C"',
            [case_id],
        )
        out = [dict(zip(ANNOTATION_COLUMNS, r, strict=True)) for r in rows]
        for a in out:
            a["value"] = parsed(a["value"])
        return out

    def audit_entries(self, case_id: str) -> list[dict[str, Any]]:
        rows = self._rows(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM case_audit WHERE case_id = %s "
            'ORDER BY at_time, audit_id COLLATE "C"',
            [case_id],
        )
        out = [dict(zip(AUDIT_COLUMNS, r, strict=True)) for r in rows]
        for e in out:
            e["before"], e["after"] = parsed(e["before"]), parsed(e["after"])
        return out

    def mark_seen(self, session_id: str, kind: str, keys: Sequence[str]) -> set[str]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return set()
        # One statement, so a retry after a dropped connection inserts nothing twice (it then
        # reports its own keys as seen before: at worst a tool marks nothing as new).
        new = self._rows(
            "INSERT INTO session_seen SELECT %s, %s, unnest(%s::TEXT[]), now() "
            "ON CONFLICT DO NOTHING RETURNING key",
            [session_id, kind, keys],
        )
        return set(keys) - {r[0] for r in new}

    def seen(self, session_id: str, kind: str) -> list[str]:
        rows = self._rows(
            'SELECT key FROM session_seen WHERE session_id = %s AND kind = %s ORDER BY first_at, key COLLATE "C"',
            [session_id, kind],
        )
        return [r[0] for r in rows]

    def seen_rows(self, session_ids: Sequence[str]) -> list[dict[str, Any]]:
        rows = self._rows(
            f"SELECT {', '.join(SEEN_COLUMNS)} FROM session_seen WHERE session_id = ANY(%s) "
            'ORDER BY session_id COLLATE "C", first_at, kind COLLATE "C", key COLLATE "C"',
            [list(session_ids)],
        )
        return [dict(zip(SEEN_COLUMNS, r, strict=True)) for r in rows]

    def record_cases(self) -> list[str]:
        return [
            r[0] for r in self._rows(f'SELECT case_id FROM ({RECORD_CASES}) c ORDER BY case_id COLLATE "C"')
        ]

    def import_case_rows(
        self,
        *,
        access: Sequence[dict[str, Any]] = (),
        annotations: Sequence[dict[str, Any]] = (),
        audit: Sequence[dict[str, Any]] = (),
        seen: Sequence[dict[str, Any]] = (),
    ) -> None:
        given = {"access": access, "annotations": annotations, "audit": audit, "seen": seen}
        with self.transaction():
            for name, rows in given.items():
                table, columns = CASE_ROW_TABLES[name]
                for row in rows:
                    self._rows_written(
                        f"INSERT INTO {table} ({quoted(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) "
                        "ON CONFLICT DO NOTHING",
                        json_row(row, columns),
                    )
