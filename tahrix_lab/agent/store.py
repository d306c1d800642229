"""TranscriptStore: the neutral transcript in DuckDB.

Each persist is its own short autocommit write — never a transaction held
open across a stream — so a crash mid-answer loses at most the message being
streamed (and the loop persists partial answers itself). One DuckDB
connection per store; every thread gets its own cursor on it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.agent.errors import ConfigurationError, StoreLockedError
from tahrix_lab.agent.migrations import Migration, apply_migrations
from tahrix_lab.agent.transcript import Message, Part, Session, Usage

DEFAULT_DB = "tahrix.duckdb"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_transcript",
        """
        CREATE TABLE sessions (
            id VARCHAR PRIMARY KEY,
            "user" VARCHAR NOT NULL,
            purpose VARCHAR NOT NULL,
            status VARCHAR NOT NULL DEFAULT 'active',
            system_prompt VARCHAR,
            created_at TIMESTAMPTZ NOT NULL,
            replay_of VARCHAR,
            title VARCHAR
        );
        CREATE TABLE messages (
            session_id VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            role VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            backend VARCHAR,
            model_id VARCHAR,
            stop_reason VARCHAR,
            raw_stop_reason VARCHAR,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            reasoning_tokens BIGINT,
            tools_offered VARCHAR[],
            latency_ms DOUBLE,
            ttft_ms DOUBLE,
            PRIMARY KEY (session_id, position)
        );
        CREATE TABLE parts (
            session_id VARCHAR NOT NULL,
            message_position INTEGER NOT NULL,
            position INTEGER NOT NULL,
            type VARCHAR NOT NULL,
            text VARCHAR,
            tool_use_id VARCHAR,
            tool_name VARCHAR,
            tool_input JSON,
            tool_result JSON,
            tool_status VARCHAR,
            media_ref VARCHAR,
            media_type VARCHAR,
            signature VARCHAR,
            PRIMARY KEY (session_id, message_position, position)
        );
        """,
    ),
)

_MESSAGE_COLUMNS = (
    "session_id, position, role, created_at, backend, model_id, stop_reason, raw_stop_reason, "
    "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, "
    "tools_offered, latency_ms, ttft_ms"
)
_PART_COLUMNS = (
    "session_id, message_position, position, type, text, tool_use_id, tool_name, tool_input, "
    "tool_result, tool_status, media_ref, media_type, signature"
)
_PART_PLACEHOLDERS = "(" + ", ".join(["?"] * 13) + ")"


def default_path() -> str:
    return os.environ.get("TAHRIX_DB") or DEFAULT_DB


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _load(value: Any) -> Any:
    return None if value is None else json.loads(value)


def connect(path: str) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file, turning a lock held by another process into a clear error."""
    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = duckdb.connect(path)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise StoreLockedError(path, str(exc)) from None
        raise ConfigurationError(f"Could not open the database {path!r}: {exc}") from None
    conn.execute("SET TimeZone = 'UTC'")  # timestamps come back in UTC whatever the machine says
    return conn


class TranscriptStore:
    """Sessions, messages and parts in one DuckDB database.

    ``path`` defaults to ``$TAHRIX_DB`` or ``tahrix.duckdb`` in the working
    directory; ``":memory:"`` keeps everything in memory (tests). Pass
    ``connection`` to share a connection another component opened (the case
    database lives in the same file).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        connection: duckdb.DuckDBPyConnection | None = None,
    ):
        self.path = str(path) if path is not None else default_path()
        self._conn = connection if connection is not None else connect(self.path)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        apply_migrations(self._conn, "transcript", MIGRATIONS)

    # -- plumbing --------------------------------------------------------
    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        return self._conn

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (DuckDB connections are not shared across threads)."""
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._conn.cursor()
            self._local.cursor = cur
        return cur

    @contextmanager
    def _write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        # One short transaction per persist; the lock keeps positions dense
        # when several threads append to one session.
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> TranscriptStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions --------------------------------------------------------
    def create_session(
        self,
        *,
        user: str = "analyst",
        purpose: str = "chat",
        system_prompt: str | None = None,
        title: str | None = None,
        replay_of: str | None = None,
        session: Session | None = None,
    ) -> Session:
        s = session or Session(
            user=user, purpose=purpose, system_prompt=system_prompt, title=title, replay_of=replay_of
        )
        with self._write() as cur:
            cur.execute(
                'INSERT INTO sessions (id, "user", purpose, status, system_prompt, created_at, replay_of, title) '
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [s.id, s.user, s.purpose, s.status, s.system_prompt, s.created_at, s.replay_of, s.title],
            )
        return s

    def get_session(self, session_id: str) -> Session:
        row = (
            self.cursor()
            .execute(
                'SELECT id, "user", purpose, status, system_prompt, created_at, replay_of, title '
                "FROM sessions WHERE id = ?",
                [session_id],
            )
            .fetchone()
        )
        if row is None:
            raise ConfigurationError(f"No session with id {session_id!r} in {self.path!r}.")
        return _session_from_row(row)

    def update_session(self, session_id: str, **changes: Any) -> None:
        allowed = {"status", "title", "system_prompt"}
        unknown = set(changes) - allowed
        if unknown:
            raise ConfigurationError(
                f"Cannot change {sorted(unknown)} on a session; allowed: {sorted(allowed)}"
            )
        if not changes:
            return
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self._write() as cur:
            cur.execute(f"UPDATE sessions SET {sets} WHERE id = ?", [*changes.values(), session_id])

    def list_sessions(
        self,
        *,
        user: str | None = None,
        purpose: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        """Sessions, newest first, filtered by user, purpose and creation time."""
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        for clause, value in (
            ('"user" = ?', user),
            ("purpose = ?", purpose),
            ("created_at >= ?", since),
            ("created_at < ?", until),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = (
            'SELECT id, "user", purpose, status, system_prompt, created_at, replay_of, title FROM sessions '
            f"WHERE {' AND '.join(where)} ORDER BY created_at DESC, id"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_session_from_row(r) for r in self.cursor().execute(sql, params).fetchall()]

    # -- messages --------------------------------------------------------
    def append_message(self, session_id: str, message: Message) -> Message:
        """Persist a message and its parts in one short write; sets its position."""
        with self._write() as cur:
            row = cur.execute(
                "SELECT coalesce(max(position) + 1, 0) FROM messages WHERE session_id = ?", [session_id]
            ).fetchone()
            position = int(row[0]) if row else 0
            usage = message.usage or Usage()
            cur.execute(
                f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES ({', '.join(['?'] * 16)})",
                [
                    session_id,
                    position,
                    message.role,
                    message.created_at,
                    message.backend,
                    message.model_id,
                    message.stop_reason,
                    message.raw_stop_reason,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    usage.reasoning_tokens,
                    message.tools_offered,
                    message.latency_ms,
                    message.ttft_ms,
                ],
            )
            if message.parts:
                params: list[Any] = []
                for i, p in enumerate(message.parts):
                    params += [
                        session_id, position, i, p.type, p.text, p.tool_use_id, p.tool_name,
                        _dump(p.tool_input), _dump(p.tool_result), p.tool_status, p.media_ref,
                        p.media_type, p.signature,
                    ]  # fmt: skip
                values = ", ".join([_PART_PLACEHOLDERS] * len(message.parts))
                cur.execute(f"INSERT INTO parts ({_PART_COLUMNS}) VALUES {values}", params)
        message.session_id = session_id
        message.position = position
        return message

    def load_messages(self, session_id: str) -> list[Message]:
        """Every message of a session with its parts, ordered by position."""
        cur = self.cursor()
        rows = cur.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY position", [session_id]
        ).fetchall()
        part_rows = cur.execute(
            f"SELECT {_PART_COLUMNS} FROM parts WHERE session_id = ? ORDER BY message_position, position",
            [session_id],
        ).fetchall()
        parts: dict[int, list[Part]] = {}
        for r in part_rows:
            parts.setdefault(r[1], []).append(
                Part(
                    type=r[3],
                    text=r[4],
                    tool_use_id=r[5],
                    tool_name=r[6],
                    tool_input=_load(r[7]),
                    tool_result=_load(r[8]),
                    tool_status=r[9],
                    media_ref=r[10],
                    media_type=r[11],
                    signature=r[12],
                )
            )
        messages = []
        for r in rows:
            has_usage = any(v is not None for v in r[8:13])
            messages.append(
                Message(
                    role=r[2],
                    parts=parts.get(r[1], []),
                    session_id=r[0],
                    position=r[1],
                    created_at=r[3],
                    backend=r[4],
                    model_id=r[5],
                    stop_reason=r[6],
                    raw_stop_reason=r[7],
                    usage=Usage(*r[8:13]) if has_usage or r[2] == "assistant" else None,
                    tools_offered=list(r[13]) if r[13] is not None else None,
                    latency_ms=r[14],
                    ttft_ms=r[15],
                )
            )
        return messages

    def usage_rows(self, user: str | None = None, since: datetime | None = None) -> list[dict[str, Any]]:
        """One row per model call (assistant message): who, when, which model, tokens."""
        where: list[str] = ["m.role = 'assistant'"]
        params: list[Any] = []
        if user is not None:
            where.append('s."user" = ?')
            params.append(user)
        if since is not None:
            where.append("m.created_at >= ?")
            params.append(since)
        cur = self.cursor().execute(
            'SELECT s."user", m.session_id, s.purpose, m.position, m.created_at, m.backend, m.model_id, '
            "m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_write_tokens, m.reasoning_tokens, "
            "m.latency_ms, m.ttft_ms, m.stop_reason "
            f"FROM messages m JOIN sessions s ON s.id = m.session_id WHERE {' AND '.join(where)} "
            "ORDER BY m.created_at",
            params,
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def delete_session(self, session_id: str) -> None:
        with self._write() as cur:
            for table, key in (("parts", "session_id"), ("messages", "session_id"), ("sessions", "id")):
                cur.execute(f"DELETE FROM {table} WHERE {key} = ?", [session_id])

    def import_session(self, session: Session, messages: Sequence[Message]) -> Session:
        """Write a whole session (export/import): positions are kept as given."""
        self.create_session(session=session)
        for m in messages:
            self.append_message(session.id, m)
        return session


def _session_from_row(row: tuple[Any, ...]) -> Session:
    return Session(
        id=row[0],
        user=row[1],
        purpose=row[2],
        status=row[3],
        system_prompt=row[4],
        created_at=row[5],
        replay_of=row[6],
        title=row[7],
    )
