"""PostgresStore: the record in PostgreSQL, one record for a team.

The seed's discipline, kept on a server shared by many hosts:

- one pool per process and URL (``pg_pool``: autocommit connections checked when taken,
  a statement timeout, retries of a dropped connection, a calm error when none is free);
- each persist is one short write (one round trip); never a transaction held across a
  stream;
- every write carries a ``write_id`` made once per call: when a connection drops after the
  server committed but before the answer arrived, the retry finds the row instead of
  writing it twice;
- ``seq`` is handed out under one lock per message insert, in commit order, so the
  budget's "calls since seq N" (``ledger_calls``) never skips a call that committed late.

psycopg is imported when a PostgreSQL store is opened, so DuckDB users never load it.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage.interface import (
    LINK_COLUMNS,
    CaseLink,
    LedgerRow,
    TranscriptStore,
    message_from_row,
)
from tahrix_lab.agent.storage.pg_annotations import PostgresAnnotations
from tahrix_lab.agent.storage.pg_manifest import PostgresManifests
from tahrix_lab.agent.storage.pg_pool import Pool
from tahrix_lab.agent.storage.pg_reports import LINK_SQL, PostgresReports
from tahrix_lab.agent.storage.pg_schema import MESSAGE_COLUMNS, SEQ_LOCK, SESSION_COLUMNS
from tahrix_lab.agent.storage.target import default_target, engine_of, redacted, server_of
from tahrix_lab.agent.transcript import Message, Session, Usage

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
_TURN_END_COLUMNS = "session_id, position, stop_reason, error_kind, error_message"

__all__ = ["PostgresStore"]


class PostgresStore(
    PostgresAnnotations, PostgresManifests, PostgresReports, TranscriptStore, engine="postgresql"
):
    """Sessions, messages, parts, turn ends and the usage ledger in PostgreSQL."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        connection: Any = None,
        wait: float | None = None,
        pool_size: int | None = None,
        statement_timeout: float | None = None,
        retry: float | None = None,
    ) -> None:
        super().__init__()
        if connection is not None:
            raise ConfigurationError("A PostgreSQL store opens its own pool; do not pass connection=.")
        url = os.fspath(path) if path is not None else default_target()
        if engine_of(url) != "postgresql":
            raise ConfigurationError(f"{redacted(url)!r} is not a postgresql:// URL.")
        self.path = redacted(url)  # the URL as it may be shown: never its password
        self.server = server_of(url)
        self._pool = Pool.get(
            url, wait=wait, size=pool_size, statement_timeout=statement_timeout, retry=retry
        )

    def close(self) -> None:
        """Pools are per process and shared by the stores on one URL: nothing to close here."""

    @staticmethod
    def close_pools() -> None:
        """Close this process's pools (tests, and a process about to exit)."""
        Pool.close_all()

    def _run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T:
        return self._pool.run(work)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._run(lambda conn, _first: conn.execute(sql, params).fetchall())

    def transaction(self, *, buffered: bool = False) -> AbstractContextManager[None]:
        """The writes of the block commit together on one connection, or none of them."""
        return self._pool.transaction()

    # -- sessions ----------------------------------------------------------
    def create_session(
        self,
        *,
        user: str = "analyst",
        purpose: str = "chat",
        system_prompt: str | None = None,
        title: str | None = None,
        replay_of: str | None = None,
        session: Session | None = None,
        team: str | None = None,
    ) -> Session:
        s = session or Session(
            user=user, purpose=purpose, system_prompt=system_prompt, title=title, replay_of=replay_of
        )
        if team is not None:
            s.team = team
        row = [s.id, s.user, s.purpose, s.status, s.system_prompt, s.created_at, s.replay_of, s.title, s.team]
        insert = f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"

        def write(conn: psycopg.Connection[Any], first: bool) -> None:
            # A retry may find the row its first try wrote: that is success, not a clash.
            conn.execute(insert if first else insert + " ON CONFLICT (id) DO NOTHING", row)

        self._run(write)
        return s

    def get_session(self, session_id: str) -> Session:
        rows = self._rows(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s", [session_id])
        if not rows:
            raise ConfigurationError(f"No session with id {session_id!r} in {self.path!r}.")
        return _session(rows[0])

    def update_session(self, session_id: str, **changes: Any) -> None:
        allowed = {"status", "title", "system_prompt"}
        unknown = set(changes) - allowed
        if unknown:
            raise ConfigurationError(
                f"Cannot change {sorted(unknown)} on a session; allowed: {sorted(allowed)}"
            )
        if changes:
            sets = ", ".join(f"{k} = %s" for k in changes)
            self._rows_written(f"UPDATE sessions SET {sets} WHERE id = %s", [*changes.values(), session_id])

    def _rows_written(self, sql: str, params: Sequence[Any]) -> None:
        def write(conn: psycopg.Connection[Any], _first: bool) -> None:
            conn.execute(sql, params)

        self._run(write)

    def list_sessions(
        self,
        *,
        user: str | None = None,
        purpose: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        where, params = ["TRUE"], []
        for clause, value in (
            ('"user" = %s', user),
            ("purpose = %s", purpose),
            ("created_at >= %s", since),
            ("created_at < %s", until),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = f'SELECT {SESSION_COLUMNS} FROM sessions WHERE {" AND ".join(where)} ORDER BY created_at DESC, id COLLATE "C"'
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_session(r) for r in self._rows(sql, params)]

    def session_ids_starting(self, prefix: str, limit: int = 3) -> list[str]:
        rows = self._rows(
            'SELECT id FROM sessions WHERE starts_with(id, %s) ORDER BY id COLLATE "C" LIMIT %s',
            [prefix, limit],
        )
        return [r[0] for r in rows]

    def delete_session(self, session_id: str) -> None:
        def write(conn: psycopg.Connection[Any], _first: bool) -> None:
            with conn.transaction():
                for table, key in (
                    ("messages", "session_id"),
                    ("turn_ends", "session_id"),
                    ("session_cases", "session_id"),
                    ("usage_daily", "session_id"),
                    ("sessions", "id"),
                ):
                    conn.execute(f"DELETE FROM {table} WHERE {key} = %s", [session_id])

        self._run(write)

    # -- messages ----------------------------------------------------------
    def append_message(self, session_id: str, message: Message) -> Message:
        """One round trip: the seq lock, then the row at the session's next position."""
        usage = message.usage or Usage()
        parts = json.dumps([p.to_dict() for p in message.parts], ensure_ascii=False)
        write_id = uuid.uuid4()
        values = [
            session_id, message.role, message.created_at, message.backend, message.model_id,
            message.stop_reason, message.raw_stop_reason, usage.input_tokens, usage.output_tokens,
            usage.cache_read_tokens, usage.cache_write_tokens, usage.reasoning_tokens, message.tools_offered,
            message.latency_ms, message.ttft_ms, parts,
        ]  # fmt: skip
        # The lock and the insert are two statements of one pipelined transaction: the
        # insert's snapshot is taken once the lock is held, so it sees every row committed
        # before it and its position is free. (One statement would read max(position) from
        # a snapshot taken before the lock: under contention, half the inserts collided.)
        insert = (
            f"INSERT INTO messages (write_id, {MESSAGE_COLUMNS}) "
            "SELECT %s, %s, (SELECT coalesce(max(position) + 1, 0) FROM messages WHERE session_id = %s), "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s "
            "ON CONFLICT (write_id) DO NOTHING RETURNING position"
        )
        params = [write_id, session_id, session_id, *values[1:]]

        def landed(conn: psycopg.Connection[Any]) -> int | None:
            row = conn.execute("SELECT position FROM messages WHERE write_id = %s", [write_id]).fetchone()
            return None if row is None else int(row[0])

        def write(conn: psycopg.Connection[Any], first: bool) -> int:
            if not first and (position := landed(conn)) is not None:
                return position  # an earlier try landed before its connection dropped
            with conn.pipeline():  # one implicit transaction, committed at the pipeline's sync
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [SEQ_LOCK])
                inserted = conn.execute(insert, params)
            row = inserted.fetchone()
            if row is not None:
                return int(row[0])
            # The write id was taken: an earlier try, still running when this one began, landed.
            if (position := landed(conn)) is None:
                raise ConfigurationError(f"Could not place a message in session {session_id!r}.")
            return position

        message.position = self._run(write)
        message.session_id = session_id
        self._notify(session_id, message)
        return message

    def load_messages(self, session_id: str) -> list[Message]:
        rows = self._rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s ORDER BY position", [session_id]
        )
        return [message_from_row(r) for r in rows]

    def append_turn_end(
        self,
        session_id: str,
        *,
        stop_reason: str | None = None,
        error_kind: str | None = None,
        error_message: str | None = None,
    ) -> None:
        self._rows_written(
            "INSERT INTO turn_ends (write_id, session_id, position, stop_reason, error_kind, error_message) "
            "SELECT %s, %s, coalesce(max(position), -1), %s, %s, %s FROM messages WHERE session_id = %s "
            "ON CONFLICT (write_id) DO NOTHING",
            [uuid.uuid4(), session_id, stop_reason, error_kind, error_message, session_id],
        )

    def load_turn_ends(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT position, stop_reason, error_kind, error_message FROM turn_ends "
            "WHERE session_id = %s ORDER BY position, created_at",
            [session_id],
        )
        names = ("position", "stop_reason", "error_kind", "error_message")
        return [dict(zip(names, row, strict=True)) for row in rows]

    def import_sessions(
        self,
        items: Sequence[tuple[Session, Sequence[Message]]],
        links: Sequence[CaseLink] = (),
        turn_ends: Sequence[dict[str, Any]] = (),
    ) -> None:
        with self.transaction():
            for session, messages in items:
                self.create_session(session=session)
                for m in messages:
                    self.append_message(session.id, m)
            for link in links:
                self._rows_written(
                    f"INSERT INTO session_cases ({LINK_SQL}) VALUES (%s, %s, %s, %s, %s, %s)",
                    [*(link.get(k) for k in LINK_COLUMNS[:2]), json.dumps(link["grant"]),
                     *(link.get(k) for k in LINK_COLUMNS[3:])],
                )  # fmt: skip
            for end in turn_ends:
                self._rows_written(
                    f"INSERT INTO turn_ends (write_id, {_TURN_END_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
                    [uuid.uuid4(), *(end.get(k) for k in _TURN_END_COLUMNS.split(", "))],
                )

    def ledger_calls(self, *, after_seq: int | None, since: datetime) -> tuple[list[LedgerRow], int]:
        columns = (
            "session_id, position, created_at, model_id, backend, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, seq"
        )

        def read(conn: psycopg.Connection[Any], _first: bool) -> tuple[list[LedgerRow], int]:
            if after_seq is not None:
                rows = conn.execute(
                    f"SELECT {columns} FROM messages WHERE role = 'assistant' AND seq > %s ORDER BY seq",
                    [after_seq],
                ).fetchall()
                top = after_seq
            else:  # the seq reached first: every row at or below it has committed (SEQ_LOCK)
                found = conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
                top = int(found[0]) if found else 0
                rows = conn.execute(
                    f"SELECT {columns} FROM messages WHERE role = 'assistant' AND created_at > %s "
                    "AND seq <= %s ORDER BY seq",
                    [since, top],
                ).fetchall()
            return [cast(LedgerRow, tuple(r)) for r in rows], max([top, *(int(r[9]) for r in rows)])

        return self._run(read)

    def session_users(self, session_ids: Sequence[str]) -> dict[str, str]:
        if not session_ids:
            return {}
        rows = self._rows('SELECT id, "user" FROM sessions WHERE id = ANY(%s)', [list(session_ids)])
        return dict(rows)


def _session(row: tuple[Any, ...]) -> Session:
    names = ("id", "user", "purpose", "status", "system_prompt", "created_at", "replay_of", "title", "team")
    return Session(**dict(zip(names, row, strict=True)))
