"""The DuckDB engine's reports and session-case links (a part of ``DuckDBStore``, kept apart
to keep each module short): per-call usage, the cost query's grouped sums, users, links."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.storage.interface import (
    ACCESS_COLUMNS,
    LINK_COLUMNS,
    USAGE_COLUMNS,
    USAGE_SQL,
    CaseLink,
    check_role,
    link_from_row,
)
from tahrix_lab.agent.storage.usage_sql import DUCKDB, usage_sums_sql
from tahrix_lab.agent.transcript import utcnow

if TYPE_CHECKING:
    import duckdb

    from tahrix_lab.agent.storage.duck import Database

LINK_SQL = [f'"{c}"' if c == "grant" else c for c in LINK_COLUMNS]
ACCESS_SQL = ", ".join(f'"{c}"' for c in ACCESS_COLUMNS)


class DuckDBReports:
    """Mixed into ``DuckDBStore``, which gives ``cursor()`` and ``_db``."""

    if TYPE_CHECKING:
        _db: Database

        def cursor(self) -> duckdb.DuckDBPyConnection: ...

    def usage_rows(
        self,
        user: str | None = None,
        since: datetime | None = None,
        *,
        session_ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """One row per model call (assistant message): who, when, which model, tokens."""
        params: list[Any] = [list(session_ids)] if session_ids is not None else []
        where = ["m.role = 'assistant'"] + (
            ["list_contains(?, m.session_id)"] if session_ids is not None else []
        )
        for clause, value in (('s."user" = ?', user), ("m.created_at >= ?", since)):
            if value is not None:
                where.append(clause)
                params.append(value)
        rows = self.cursor().execute(
            f"SELECT {USAGE_SQL} WHERE {' AND '.join(where)} ORDER BY m.created_at, m.session_id, m.position",
            params,
        )
        return [dict(zip(USAGE_COLUMNS, row, strict=True)) for row in rows.fetchall()]

    def usage_sums(
        self,
        by: Sequence[str],
        *,
        changes: Sequence[datetime] = (),
        tiers: Sequence[int] = (),
        **filters: Any,
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        sql, params, names = usage_sums_sql(DUCKDB, by, filters=filters, changes=changes, tiers=tiers)
        return names, self.cursor().execute(sql, params).fetchall()

    def models_used(self) -> list[tuple[str, str | None]]:
        rows = self.cursor().execute(
            "SELECT DISTINCT model_id, backend FROM messages WHERE role = 'assistant' AND model_id IS NOT NULL"
        )
        return [(r[0], r[1]) for r in rows.fetchall()]

    def users(self) -> list[str]:
        return [
            r[0] for r in self.cursor().execute('SELECT DISTINCT "user" FROM sessions ORDER BY 1').fetchall()
        ]

    # -- session-case links ----------------------------------------------
    def link_case(
        self, session_id: str, case_id: str, grant: dict[str, Any], created_by: str | None = None
    ) -> None:
        with self._db.write() as cur:
            cur.execute(
                'INSERT INTO session_cases (session_id, case_id, "grant", created_by, created_at) '
                "VALUES (?, ?, ?, ?, ?)",
                [session_id, case_id, json.dumps(grant), created_by, utcnow()],
            )

    def set_case_grant(self, session_id: str, grant: dict[str, Any]) -> None:
        with self._db.write() as cur:
            cur.execute(
                'UPDATE session_cases SET "grant" = ?, updated_at = ? WHERE session_id = ?',
                [json.dumps(grant), utcnow(), session_id],
            )

    def case_links(
        self, *, case_id: str | None = None, session_ids: Sequence[str] | None = None
    ) -> list[CaseLink]:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if case_id is not None:
            where.append("case_id = ?")
            params.append(case_id)
        if session_ids is not None:
            where.append("list_contains(?, session_id)")
            params.append(list(session_ids))
        rows = self.cursor().execute(
            f"SELECT {', '.join(LINK_SQL)} FROM session_cases WHERE {' AND '.join(where)} "
            "ORDER BY created_at, session_id",
            params,
        )
        return [link_from_row(r) for r in rows.fetchall()]

    # -- case access ---------------------------------------------------------
    def grant_case(
        self, case_id: str, user: str, role: str = "investigator", granted_by: str | None = None
    ) -> None:
        with self._db.write() as cur:
            cur.execute(
                f"INSERT INTO case_access ({ACCESS_SQL}) VALUES (?, ?, ?, ?, ?) "
                'ON CONFLICT (case_id, "user") DO UPDATE SET role = excluded.role, '
                "granted_by = excluded.granted_by, granted_at = excluded.granted_at",
                [case_id, user, check_role(role), granted_by, utcnow()],
            )

    def revoke_case(self, case_id: str, user: str) -> bool:
        with self._db.write() as cur:
            gone = cur.execute(
                'DELETE FROM case_access WHERE case_id = ? AND "user" = ? RETURNING case_id', [case_id, user]
            ).fetchall()
        return bool(gone)

    def case_access(self, *, case_id: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        where, params = ["TRUE"], []
        for column, value in (("case_id", case_id), ('"user"', user)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = self.cursor().execute(
            f'SELECT {ACCESS_SQL} FROM case_access WHERE {" AND ".join(where)} ORDER BY case_id, "user"',
            params,
        )
        return [dict(zip(ACCESS_COLUMNS, r, strict=True)) for r in rows.fetchall()]

    def existing_session_ids(self, session_ids: Sequence[str]) -> set[str]:
        rows = self.cursor().execute(
            "SELECT id FROM sessions WHERE list_contains(?, id)", [list(session_ids)]
        )
        return {r[0] for r in rows.fetchall()}
