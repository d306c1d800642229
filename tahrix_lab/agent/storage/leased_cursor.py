"""The cursor of a ``duck.Database``: a DuckDB cursor that holds the workspace file while
a statement runs and its result is read (see ``duck`` for the model)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import duckdb

_TXN_BEGIN = ("BEGIN", "START")
_TXN_END = ("COMMIT", "END", "ROLLBACK", "ABORT")
# Statements whose result is a query's rows; any other's (a row count) is read at once.
_QUERIES = frozenset(
    {
        "SELECT",
        "WITH",
        "FROM",
        "VALUES",
        "TABLE",
        "SHOW",
        "DESCRIBE",
        "SUMMARIZE",
        "EXPLAIN",
        "PRAGMA",
        "CALL",
        "(",
    }
)
STALE_RESULT_S = 0.5  # an unfetched result outside any lease is buffered after this


class Leases(Protocol):
    """What a cursor needs of its ``duck.Database`` (named here so the two modules make no circle)."""

    shared: bool

    def lease(self) -> AbstractContextManager[Any]: ...
    def holds_lease(self, beyond: int = 0) -> bool: ...
    def _enter(self) -> None: ...
    def _exit(self, *, drain: bool = True, thread: int | None = None) -> None: ...
    def _ran_on(self, cur: Cursor) -> None: ...
    def _raw_cursor(self) -> duckdb.DuckDBPyConnection: ...


class Cursor:
    """A DuckDB cursor that holds the file while a statement runs and its result is read.

    Inside a lease it is the DuckDB cursor. Outside one, a statement takes a lease of
    its own, kept until its result is fetched (``fetchone``/``fetchmany`` buffer the rest),
    so a one-line ``db.cursor().execute(...).fetchall()`` holds the file only that long.
    """

    def __init__(self, db: Leases) -> None:
        self._db = db
        self._raw: duckdb.DuckDBPyConnection | None = None
        self._busy = threading.Lock()
        self._auto_owner: int | None = None  # thread whose statement holds a lease until fetched
        self._auto_since = 0.0
        self._txn_owner: int | None = None  # thread whose open transaction holds a lease
        self._in_txn = False
        self._pending = False  # the DuckDB cursor holds an unread result
        self._buffer: list[tuple[Any, ...]] | None = None
        self._description: Any = None

    @property
    def database(self) -> Leases:
        """The shared database this cursor leases its statements from."""
        return self._db

    # -- statements ----------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Cursor:
        db = self._db
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if not db.shared:
            self._raw_or_new().execute(sql, params)
            if word in _TXN_BEGIN or word in _TXN_END:
                self._in_txn = word in _TXN_BEGIN
            return self
        self._finish_auto()
        db._enter()
        entered = True
        try:
            with self._busy:
                raw = self._raw_or_new()
                self._buffer = None
                raw.execute(sql, params)
                self._description = raw.description
                self._pending = self._description is not None
                db._ran_on(self)
            if word in _TXN_BEGIN and self._txn_owner is None:
                self._txn_owner, entered = threading.get_ident(), False  # held until COMMIT/ROLLBACK
                self._in_txn = True
            elif word in _TXN_END and self._txn_owner is not None:
                db._exit(thread=self._txn_owner)
                self._txn_owner, self._in_txn = None, False
            if entered and self._pending and not db.holds_lease(beyond=1):
                if word in _QUERIES:  # held until its rows are read
                    self._auto_owner, self._auto_since = threading.get_ident(), time.monotonic()
                    entered = False
                else:
                    self._drain()
        finally:
            if entered:
                db._exit()
        return self

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Cursor:
        """Run ``query`` now (not a lazy DuckDB relation: the file is not kept for later);
        read the result with ``df()``, ``fetchall()``, ``fetchone()`` …"""
        return self.execute(query, params)

    query = sql

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Cursor:
        with self._db.lease(), self._busy:
            self._raw_or_new().executemany(sql, params)
            self._pending = False
        return self

    def register(self, name: str, obj: object) -> Cursor:
        """Make a DataFrame queryable by name on this cursor (as DuckDB's ``register``)."""
        with self._db.lease(), self._busy:
            self._raw_or_new().register(name, obj)
        return self

    def unregister(self, name: str) -> Cursor:
        with self._db.lease(), self._busy:
            self._raw_or_new().unregister(name)
        return self

    def begin(self) -> Cursor:
        return self.execute("BEGIN")

    def commit(self) -> Cursor:
        return self.execute("COMMIT")

    def rollback(self) -> Cursor:
        return self.execute("ROLLBACK")

    # -- results -------------------------------------------------------------------------
    @property
    def description(self) -> Any:
        return self._description if self._db.shared else self._raw_or_new().description

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._whole(lambda raw: raw.fetchall(), lambda rows: rows)
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self._part(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        return self._part(size)

    def df(self) -> Any:
        return self._whole(lambda raw: raw.df(), self._frame)

    fetchdf = df
    fetch_df = df

    def fetch_arrow_table(self) -> Any:
        return self._whole(lambda raw: raw.fetch_arrow_table(), self._arrow)

    arrow = fetch_arrow_table

    def fetchnumpy(self) -> Any:
        return self._whole(lambda raw: raw.fetchnumpy(), lambda rows: self._frame(rows).to_dict("series"))

    def interrupt(self) -> None:
        if self._raw is not None:
            self._raw.interrupt()

    def close(self) -> None:
        self._finish_auto()
        with self._busy:
            if self._raw is not None:
                self._raw.close()
                self._raw = None
            self._pending = False
        if self._txn_owner is not None:
            self._db._exit(thread=self._txn_owner)
            self._txn_owner = None

    # -- plumbing ------------------------------------------------------------------------
    def _raw_or_new(self) -> duckdb.DuckDBPyConnection:
        if self._raw is None:
            self._raw = self._db._raw_cursor()
        return self._raw

    def _whole(self, fetch: Any, from_buffer: Any) -> Any:
        if not self._db.shared:
            return fetch(self._raw_or_new())
        with self._busy:
            if self._buffer is not None:
                rows, self._buffer = self._buffer, []
                out = from_buffer(rows)
            elif self._raw is None:
                raise duckdb.InvalidInputException("No open result set")
            else:
                out = fetch(self._raw)
                self._pending = False
        self._finish_auto()
        return out

    def _part(self, size: int) -> list[tuple[Any, ...]]:
        if not self._db.shared:
            return self._raw_or_new().fetchmany(size)
        with self._busy:
            if self._buffer is None and self._auto_owner is not None and self._raw is not None:
                self._buffer = self._raw.fetchall()  # read it all now and let the file go
                self._pending = False
            if self._buffer is not None:
                out, self._buffer = self._buffer[:size], self._buffer[size:]
            elif self._raw is None:
                raise duckdb.InvalidInputException("No open result set")
            else:
                out = self._raw.fetchmany(size)
        self._finish_auto()
        return out

    def _frame(self, rows: list[tuple[Any, ...]]) -> Any:
        import pandas as pd

        return pd.DataFrame.from_records(rows, columns=[d[0] for d in self._description or ()])

    def _arrow(self, rows: list[tuple[Any, ...]]) -> Any:
        import pyarrow as pa

        return pa.Table.from_pandas(self._frame(rows), preserve_index=False)

    def _drain(self) -> None:
        """Read what is left of the result into memory (the owning thread's lease is ending)."""
        with self._busy:
            if self._pending and self._raw is not None and self._buffer is None:
                self._buffer = self._raw.fetchall()
            self._pending = False

    def _finish_auto(self) -> None:
        owner = self._auto_owner
        if owner is None:
            return
        with self._busy:
            if self._auto_owner is None:
                return
            if self._pending and self._raw is not None and self._buffer is None:
                self._buffer = self._raw.fetchall()
            self._pending = False
            self._auto_owner = None
        self._db._exit(thread=owner)

    def _stale(self) -> bool:
        return self._auto_owner is not None and time.monotonic() - self._auto_since > STALE_RESULT_S

    def _release_stale(self) -> None:
        if self._busy.acquire(blocking=False):  # never while its thread is using it
            self._busy.release()
            self._finish_auto()
