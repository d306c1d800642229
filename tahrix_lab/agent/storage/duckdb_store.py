"""DuckDBStore: the record in one DuckDB file (the one-analyst default).

Each persist is its own short autocommit write — never a transaction held
open across a stream — so a crash mid-answer loses at most the message being
streamed (and the loop persists partial answers itself). The file is held
only for each statement or burst (``duck.Database``), so notebook kernels,
the CLI and the service share it; every thread gets its own cursor.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, cast

import duckdb

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage.duck import Database
from tahrix_lab.agent.storage.duckdb_annotations import DuckDBAnnotations
from tahrix_lab.agent.storage.duckdb_manifest import DuckDBManifests
from tahrix_lab.agent.storage.duckdb_reports import LINK_SQL, DuckDBReports
from tahrix_lab.agent.storage.group_commit import GroupCommit
from tahrix_lab.agent.storage.interface import (
    LINK_COLUMNS,
    CaseLink,
    LedgerRow,
    TranscriptStore,
    message_from_row,
)
from tahrix_lab.agent.storage.migrations import apply_migrations
from tahrix_lab.agent.storage.schema import INSERT_MESSAGE, MESSAGE_COLUMNS, MIGRATIONS, SESSION_COLUMNS
from tahrix_lab.agent.storage.target import default_target
from tahrix_lab.agent.transcript import Message, Session, Usage

_TURN_END_COLUMNS = "session_id, position, stop_reason, error_kind, error_message"

__all__ = ["DuckDBStore"]


def _call(write: Callable[[], None]) -> None:
    write()


class DuckDBStore(DuckDBAnnotations, DuckDBManifests, DuckDBReports, TranscriptStore, engine="duckdb"):
    """Sessions, messages and parts in one DuckDB database.

    ``path`` defaults to ``$TAHRIX_DB`` or ``tahrix.duckdb`` in the working
    directory; ``":memory:"`` keeps everything in memory (tests). Pass
    ``connection`` to share a connection another component opened (the case
    database lives in the same file): a ``duck.Database``, or a DuckDB connection
    kept open for good. Stores on one file in one process share its ``Database``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        connection: Database | duckdb.DuckDBPyConnection | None = None,
    ):
        super().__init__()
        if isinstance(connection, Database):
            self._db = connection.acquire()
            self.path = str(path) if path is not None else connection.path
        elif connection is not None:
            self.path = str(path) if path is not None else ":memory:"
            self._db = Database(self.path, connection=connection)
        else:
            self.path = str(path) if path is not None else default_target()
            self._db = Database.open(self.path)
        self._positions: dict[str, int] = {}  # next position per session, under the write lock
        # Rows held back by ``transaction(buffered=True)``: written as one INSERT per table at
        # its end (only the thread holding the write lock ever sees it set).
        self._held: tuple[list[list[Any]], list[list[Any]]] | None = None
        self._grouped: GroupCommit[Callable[[], None], None] | None = None  # group_writes()
        self._tx = threading.local()  # depth: this thread is inside transaction()
        with self._db.lease():
            apply_migrations(self._db, "transcript", MIGRATIONS)

    # -- plumbing --------------------------------------------------------
    @property
    def connection(self) -> Database:
        """The shared database (``execute``, ``cursor``, ``lease``)."""
        return self._db

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (DuckDB connections are not shared across threads)."""
        return self._db.local_cursor()

    @contextmanager
    def lease(self) -> Iterator[Database]:
        """Hold the file for a burst of statements (one attach, one consistent view)."""
        with self._db.lease() as db:
            yield db

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self, *, buffered: bool = False) -> Iterator[None]:
        """The writes of the block commit together, or none of them (then the next positions
        known here are as before). ``buffered``: new sessions and messages are written at the
        end of the block, one INSERT per table (a group of job starts: two statements instead
        of two per start); reads inside the block do not see them yet."""
        with self._db.write_lock:
            before = dict(self._positions)
            outer = self._held is not None
            if buffered and not outer:
                self._held = ([], [])
            self._tx.depth = getattr(self._tx, "depth", 0) + 1
            try:
                with self._db.write() as cur:
                    yield
                    if self._held is not None and not outer:
                        self._write_held(cur, *self._held)
            except BaseException:
                self._positions = before
                raise
            finally:
                self._tx.depth -= 1
                if not outer:
                    self._held = None

    def _write_held(
        self, cur: duckdb.DuckDBPyConnection, sessions: list[list[Any]], messages: list[list[Any]]
    ) -> None:
        for table, columns, rows in (("sessions", SESSION_COLUMNS, sessions),
                                     ("messages", MESSAGE_COLUMNS, messages)):  # fmt: skip
            if rows:
                one = "(" + ", ".join(["?"] * len(rows[0])) + ")"
                cur.execute(f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([one] * len(rows)),
                            [v for row in rows for v in row])  # fmt: skip

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
        team: str | None = None,
    ) -> Session:
        s = session or Session(
            user=user, purpose=purpose, system_prompt=system_prompt, title=title, replay_of=replay_of
        )
        if team is not None:
            s.team = team
        row = [s.id, s.user, s.purpose, s.status, s.system_prompt, s.created_at, s.replay_of, s.title, s.team]
        with self._db.write() as cur:
            if self._held is not None:
                self._held[0].append(row)
            else:
                cur.execute(
                    f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row
                )
            if session is None:  # an id made here has no messages anywhere: no look needed
                self._positions[s.id] = 0
        return s

    def get_session(self, session_id: str) -> Session:
        row = (
            self.cursor()
            .execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", [session_id])
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
        with self._db.write() as cur:
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
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(where)} ORDER BY created_at DESC, id"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_session_from_row(r) for r in self.cursor().execute(sql, params).fetchall()]

    # -- messages --------------------------------------------------------
    def group_writes(self, *, max_batch: int = 32) -> None:
        """From now on, the messages and turn ends that many threads write at one moment share
        one transaction (``agent.group_commit``): a service ending hundreds of answers at once
        pays a few transactions instead of hundreds. Each call returns once its write committed."""
        if self._grouped is None:
            self._grouped = GroupCommit(_call, lambda: self.transaction(buffered=True), max_batch=max_batch)

    def _write(self, write: Callable[[], None]) -> None:
        if self._grouped is None or getattr(self._tx, "depth", 0) > 0:  # alone, or in a transaction
            write()
        else:
            self._grouped.run(write)

    def append_message(self, session_id: str, message: Message) -> Message:
        """Persist a message with its parts in one statement; sets its position."""
        self._write(lambda: self._write_message(session_id, message))
        self._notify(session_id, message)
        return message

    def _write_message(self, session_id: str, message: Message) -> None:
        usage = message.usage or Usage()
        parts = json.dumps([p.to_dict() for p in message.parts], ensure_ascii=False)
        with self._db.write_lock:
            cur = self.cursor()
            position = self._next_position(cur, session_id)
            params = [
                session_id, position, message.role, message.created_at, message.backend, message.model_id,
                message.stop_reason, message.raw_stop_reason, usage.input_tokens, usage.output_tokens,
                usage.cache_read_tokens, usage.cache_write_tokens, usage.reasoning_tokens, message.tools_offered,
                message.latency_ms, message.ttft_ms, parts,
            ]  # fmt: skip
            try:
                if self._held is not None:
                    self._held[1].append(params)
                else:
                    cur.execute(INSERT_MESSAGE, params)
            except duckdb.ConstraintException:
                # Another store object on this database wrote to the session: re-read and retry once.
                self._positions.pop(session_id, None)
                position = params[1] = self._next_position(cur, session_id)
                cur.execute(INSERT_MESSAGE, params)
            self._positions[session_id] = position + 1
        message.session_id = session_id
        message.position = position

    def _next_position(self, cur: duckdb.DuckDBPyConnection, session_id: str) -> int:
        known = self._positions.get(session_id)
        if known is not None:
            return known
        row = cur.execute(
            "SELECT coalesce(max(position) + 1, 0) FROM messages WHERE session_id = ?", [session_id]
        ).fetchone()
        return int(row[0]) if row else 0

    def load_messages(self, session_id: str) -> list[Message]:
        """Every message of a session with its parts, ordered by position."""
        rows = (
            self.cursor()
            .execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY position",
                [session_id],
            )
            .fetchall()
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
        """Record how the session's latest turn ended (after its last message)."""
        self._write(lambda: self._write_turn_end(session_id, stop_reason, error_kind, error_message))

    def _write_turn_end(
        self, session_id: str, stop_reason: str | None, error_kind: str | None, error_message: str | None
    ) -> None:
        with self._db.write_lock:
            cur = self.cursor()
            position = self._next_position(cur, session_id) - 1
            cur.execute(
                "INSERT INTO turn_ends (session_id, position, stop_reason, error_kind, error_message) "
                "VALUES (?, ?, ?, ?, ?)",
                [session_id, position, stop_reason, error_kind, error_message],
            )

    def load_turn_ends(self, session_id: str) -> list[dict[str, Any]]:
        """How each turn ended, in order: ``{position, stop_reason, error_kind, error_message}``."""
        cur = self.cursor().execute(
            "SELECT position, stop_reason, error_kind, error_message FROM turn_ends "
            "WHERE session_id = ? ORDER BY position, created_at",
            [session_id],
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def ledger_calls(self, *, after_seq: int | None, since: datetime) -> tuple[list[LedgerRow], int]:
        with self._db.lease():  # one attach for both reads
            cur = self.cursor()
            where, params = ("seq > ?", [after_seq]) if after_seq is not None else ("created_at > ?", [since])
            rows = cur.execute(
                "SELECT session_id, position, created_at, model_id, backend, input_tokens, output_tokens, "
                "cache_read_tokens, cache_write_tokens, seq FROM messages "
                f"WHERE role = 'assistant' AND {where} ORDER BY seq",
                params,
            ).fetchall()
            if after_seq is None:
                top = cur.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
                after_seq = int(top[0]) if top else 0
        return [cast(LedgerRow, tuple(r)) for r in rows], max([after_seq, *(int(r[9]) for r in rows)])

    def session_users(self, session_ids: Sequence[str]) -> dict[str, str]:
        if not session_ids:
            return {}
        rows = self.cursor().execute('SELECT id, "user" FROM sessions WHERE id IN ?', [list(session_ids)])
        return dict(rows.fetchall())

    def session_ids_starting(self, prefix: str, limit: int = 3) -> list[str]:
        rows = self.cursor().execute(
            "SELECT id FROM sessions WHERE starts_with(id, ?) ORDER BY id LIMIT ?", [prefix, limit]
        )
        return [r[0] for r in rows.fetchall()]

    def delete_session(self, session_id: str) -> None:
        with self._db.write() as cur:
            cur.execute("DELETE FROM messages WHERE session_id = ?", [session_id])
            cur.execute("DELETE FROM turn_ends WHERE session_id = ?", [session_id])
            cur.execute("DELETE FROM session_cases WHERE session_id = ?", [session_id])
            cur.execute("DELETE FROM sessions WHERE id = ?", [session_id])
            self._positions.pop(session_id, None)

    def import_sessions(
        self,
        items: Sequence[tuple[Session, Sequence[Message]]],
        links: Sequence[CaseLink] = (),
        turn_ends: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write whole sessions in one transaction: all of them or, on any error, none."""
        try:
            with self._db.write() as cur:
                for session, messages in items:
                    self.create_session(session=session)
                    for m in messages:
                        self.append_message(session.id, m)
                for link in links:
                    cur.execute(
                        f"INSERT INTO session_cases ({', '.join(LINK_SQL)}) VALUES (?, ?, ?, ?, ?, ?)",
                        [*(link.get(k) for k in LINK_COLUMNS[:2]), json.dumps(link["grant"]),
                         *(link.get(k) for k in LINK_COLUMNS[3:])],
                    )  # fmt: skip
                for end in turn_ends:
                    cur.execute(
                        f"INSERT INTO turn_ends ({_TURN_END_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                        [end.get(k) for k in _TURN_END_COLUMNS.split(", ")],
                    )
        except BaseException:
            for session, _ in items:
                self._positions.pop(session.id, None)
            raise


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
        team=row[8],
    )
