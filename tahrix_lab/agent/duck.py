"""DuckDB plumbing for every component that keeps data in the one database file.

- ``connect`` turns "the file is held by another process" into a clear error;
- ``Cursors`` gives each thread its own cursor (DuckDB connections are not
  shared across threads, and tools run in worker threads), each set to UTC
  (a setting is per cursor, not per database), and short write transactions
  under one lock — never a transaction held across a stream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import duckdb

from tahrix_lab.agent.errors import ConfigurationError, StoreLockedError


def connect(path: str) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file (or ``":memory:"``), naming the file when another process holds it."""
    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = duckdb.connect(path)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise StoreLockedError(path, str(exc)) from None
        raise ConfigurationError(f"Could not open the database {path!r}: {exc}") from None
    conn.execute("SET TimeZone = 'UTC'")
    return conn


class Cursors:
    """Per-thread cursors on one connection, and a lock for writes."""

    def __init__(
        self, conn: duckdb.DuckDBPyConnection, write_lock: AbstractContextManager[bool] | None = None
    ) -> None:
        self.connection = conn
        self.write_lock = write_lock if write_lock is not None else threading.Lock()
        self._local = threading.local()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor, in UTC."""
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self.connection.cursor()
            cur.execute("SET TimeZone = 'UTC'")
            self._local.cursor = cur
        return cur

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One short transaction under the write lock."""
        with self.write_lock:
            cur = self.cursor()
            cur.execute("BEGIN")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
