"""The DuckDB engine's record of what analysts write on a case (a part of ``DuckDBStore``):
annotations and audit entries, what each session has seen, and these rows moved whole."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    import duckdb

    from tahrix_lab.agent.storage.duck import Database

_AUDIT_IN = AUDIT_COLUMNS[:-1]


class DuckDBAnnotations:
    """Mixed into ``DuckDBStore``, which gives ``cursor()`` and ``_db``."""

    if TYPE_CHECKING:
        _db: Database

        def cursor(self) -> duckdb.DuckDBPyConnection: ...

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
        with self._db.write() as cur:
            done = cur.execute(
                f"INSERT INTO case_audit ({', '.join(_AUDIT_IN)}) VALUES ({', '.join('?' * len(_AUDIT_IN))}) "
                "ON CONFLICT DO NOTHING RETURNING audit_id",
                row,
            ).fetchall()
            if not done:  # written before: a retry
                return
            if kind is not None:
                cur.execute(
                    "INSERT INTO case_annotations VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (case_id, kind, key) "
                    "DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, "
                    "updated_at = excluded.updated_at",
                    [entry["case_id"], kind, key, None if value is None else json.dumps(value),
                     entry["actor"], utcnow()],
                )  # fmt: skip
            if reverts is not None:
                cur.execute(
                    "UPDATE case_audit SET reverted_by = ? WHERE audit_id = ?", [entry["audit_id"], reverts]
                )

    def annotations(self, case_id: str) -> list[dict[str, Any]]:
        rows = self.cursor().execute(
            f"SELECT {', '.join(ANNOTATION_COLUMNS)} FROM case_annotations WHERE case_id = ? ORDER BY kind, key",
            [case_id],
        )
        out = [dict(zip(ANNOTATION_COLUMNS, r, strict=True)) for r in rows.fetchall()]
        for a in out:
            a["value"] = parsed(a["value"])
        return out

    def audit_entries(self, case_id: str) -> list[dict[str, Any]]:
        rows = self.cursor().execute(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM case_audit WHERE case_id = ? ORDER BY at_time, audit_id",
            [case_id],
        )
        out = [dict(zip(AUDIT_COLUMNS, r, strict=True)) for r in rows.fetchall()]
        for e in out:
            e["before"], e["after"] = parsed(e["before"]), parsed(e["after"])
        return out

    def mark_seen(self, session_id: str, kind: str, keys: Sequence[str]) -> set[str]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return set()
        with self._db.write() as cur:
            new = cur.execute(
                "INSERT INTO session_seen SELECT ?, ?, unnest(?::VARCHAR[]), current_timestamp "
                "ON CONFLICT DO NOTHING RETURNING key",
                [session_id, kind, keys],
            ).fetchall()
        return set(keys) - {r[0] for r in new}

    def seen(self, session_id: str, kind: str) -> list[str]:
        rows = self.cursor().execute(
            "SELECT key FROM session_seen WHERE session_id = ? AND kind = ? ORDER BY first_at, key",
            [session_id, kind],
        )
        return [r[0] for r in rows.fetchall()]

    def seen_rows(self, session_ids: Sequence[str]) -> list[dict[str, Any]]:
        rows = self.cursor().execute(
            f"SELECT {', '.join(SEEN_COLUMNS)} FROM session_seen WHERE list_contains(?, session_id) "
            "ORDER BY session_id, first_at, kind, key",
            [list(session_ids)],
        )
        return [dict(zip(SEEN_COLUMNS, r, strict=True)) for r in rows.fetchall()]

    def record_cases(self) -> list[str]:
        return [r[0] for r in self.cursor().execute(RECORD_CASES + " ORDER BY 1").fetchall()]

    def import_case_rows(
        self,
        *,
        access: Sequence[dict[str, Any]] = (),
        annotations: Sequence[dict[str, Any]] = (),
        audit: Sequence[dict[str, Any]] = (),
        seen: Sequence[dict[str, Any]] = (),
    ) -> None:
        given = {"access": access, "annotations": annotations, "audit": audit, "seen": seen}
        with self._db.write() as cur:
            for name, rows in given.items():
                table, columns = CASE_ROW_TABLES[name]
                for row in rows:
                    cur.execute(
                        f"INSERT INTO {table} ({quoted(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                        "ON CONFLICT DO NOTHING",
                        json_row(row, columns),
                    )
