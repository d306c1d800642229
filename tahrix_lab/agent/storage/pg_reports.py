"""The PostgreSQL engine's reports and session-case links (a part of ``PostgresStore``, kept
apart to keep each module short): per-call usage, the cost query's grouped sums (from the
``usage_daily`` rollup when it answers exactly), users, links."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from tahrix_lab.agent.storage.interface import (
    ACCESS_COLUMNS,
    LINK_COLUMNS,
    USAGE_COLUMNS,
    USAGE_SQL,
    CaseLink,
    check_role,
    link_from_row,
)
from tahrix_lab.agent.storage.usage_sql import POSTGRES, usage_sums_sql
from tahrix_lab.agent.transcript import utcnow

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
LINK_SQL = ", ".join(f'"{c}"' if c == "grant" else c for c in LINK_COLUMNS)
ACCESS_SQL = ", ".join(f'"{c}"' for c in ACCESS_COLUMNS)


class PostgresReports:
    """Mixed into ``PostgresStore``, which gives ``_run``, ``_rows`` and ``_rows_written``."""

    if TYPE_CHECKING:

        def _run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T: ...

        def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def _rows_written(self, sql: str, params: Sequence[Any]) -> None: ...

    def existing_session_ids(self, session_ids: Sequence[str]) -> set[str]:
        return {r[0] for r in self._rows("SELECT id FROM sessions WHERE id = ANY(%s)", [list(session_ids)])}

    # -- session-case links --------------------------------------------------
    def link_case(
        self, session_id: str, case_id: str, grant: dict[str, Any], created_by: str | None = None
    ) -> None:
        insert = (
            'INSERT INTO session_cases (session_id, case_id, "grant", created_by, created_at) '
            "VALUES (%s, %s, %s, %s, %s)"
        )
        row = [session_id, case_id, json.dumps(grant), created_by, utcnow()]

        def write(conn: psycopg.Connection[Any], first: bool) -> None:
            # a retry may find the row its first try wrote (the same session, the same case)
            conn.execute(insert if first else insert + " ON CONFLICT (session_id) DO NOTHING", row)

        self._run(write)

    def set_case_grant(self, session_id: str, grant: dict[str, Any]) -> None:
        self._rows_written(
            'UPDATE session_cases SET "grant" = %s, updated_at = %s WHERE session_id = %s',
            [json.dumps(grant), utcnow(), session_id],
        )

    def case_links(
        self, *, case_id: str | None = None, session_ids: Sequence[str] | None = None
    ) -> list[CaseLink]:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if case_id is not None:
            where.append("case_id = %s")
            params.append(case_id)
        if session_ids is not None:
            where.append("session_id = ANY(%s)")
            params.append(list(session_ids))
        rows = self._rows(
            f"SELECT {LINK_SQL} FROM session_cases WHERE {' AND '.join(where)} "
            'ORDER BY created_at, session_id COLLATE "C"',
            params,
        )
        return [link_from_row(r) for r in rows]

    # -- case access ---------------------------------------------------------
    def grant_case(
        self, case_id: str, user: str, role: str = "investigator", granted_by: str | None = None
    ) -> None:
        self._rows_written(  # an upsert: a retry after a dropped connection writes the same row
            f"INSERT INTO case_access ({ACCESS_SQL}) VALUES (%s, %s, %s, %s, %s) "
            'ON CONFLICT (case_id, "user") DO UPDATE SET role = EXCLUDED.role, '
            "granted_by = EXCLUDED.granted_by, granted_at = EXCLUDED.granted_at",
            [case_id, user, check_role(role), granted_by, utcnow()],
        )

    def revoke_case(self, case_id: str, user: str) -> bool:
        gone = self._rows(
            'DELETE FROM case_access WHERE case_id = %s AND "user" = %s RETURNING case_id', [case_id, user]
        )
        return bool(gone)

    def case_access(self, *, case_id: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        where, params = ["TRUE"], []
        for column, value in (("case_id", case_id), ('"user"', user)):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        rows = self._rows(
            f"SELECT {ACCESS_SQL} FROM case_access WHERE {' AND '.join(where)} "
            'ORDER BY case_id COLLATE "C", "user" COLLATE "C"',
            params,
        )
        return [dict(zip(ACCESS_COLUMNS, r, strict=True)) for r in rows]

    # -- the ledger --------------------------------------------------------
    def usage_rows(
        self,
        user: str | None = None,
        since: datetime | None = None,
        *,
        session_ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        params: list[Any] = [list(session_ids)] if session_ids is not None else []
        where = ["m.role = 'assistant'"] + (["m.session_id = ANY(%s)"] if session_ids is not None else [])
        for clause, value in (('s."user" = %s', user), ("m.created_at >= %s", since)):
            if value is not None:
                where.append(clause)
                params.append(value)
        rows = self._rows(
            f"SELECT {USAGE_SQL} WHERE {' AND '.join(where)} "
            'ORDER BY m.created_at, m.session_id COLLATE "C", m.position',
            params,
        )
        return [dict(zip(USAGE_COLUMNS, row, strict=True)) for row in rows]

    def usage_sums(
        self,
        by: Sequence[str],
        *,
        changes: Sequence[datetime] = (),
        tiers: Sequence[int] = (),
        **filters: Any,
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        sql, params, names = usage_sums_sql(
            POSTGRES, by, filters=filters, changes=changes, tiers=tiers, rollup=True
        )
        return names, self._rows(sql, params)

    def models_used(self) -> list[tuple[str, str | None]]:
        # the rollup holds a row per session, day, model and size class: far fewer than calls
        rows = self._rows("SELECT DISTINCT model_id, backend FROM usage_daily WHERE model_id IS NOT NULL")
        return [(r[0], r[1]) for r in rows]

    def users(self) -> list[str]:
        return [r[0] for r in self._rows('SELECT DISTINCT "user" COLLATE "C" FROM sessions ORDER BY 1')]
