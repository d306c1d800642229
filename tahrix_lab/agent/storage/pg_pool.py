"""One PostgreSQL connection pool per process and URL, and the one way statements run on it.

- ``Pool.get(url, ...)``: this process's pool (a forked child makes its own). Opening the
  first one probes the server with one connection and applies the record's migrations
  there: a server down at start is one calm ``StoreUnavailableError`` at once.
- Connections are autocommit, in UTC, with a statement timeout
  (``TAHRIX_PG_STATEMENT_TIMEOUT`` seconds, 30). They are not checked when taken (that
  would be one more round trip per statement): a connection a restart killed fails its
  statement, the pool drops it, and the statement is retried on another.
- ``pool.run(work)`` runs ``work(conn, first)``; a dropped connection is retried with
  backoff for ``TAHRIX_PG_RETRY`` seconds (30), ``first`` False on a retry (a write may
  have landed: writes are keyed so a retry finds it). No free connection within
  ``TAHRIX_DB_WAIT`` seconds (30; every connection busy, or the server down) is a calm
  error, as is a statement past its timeout. The pool's own reconnection attempts back off
  for at most ``RECONNECT_S`` seconds, so a server that came back is found by the next request.
- A frozen server (SIGSTOP, a stalled VM) neither answers nor cancels its own statement,
  and libpq would wait for ever: a watchdog closes the socket of a statement still
  running ``GRACE`` seconds after its timeout, which fails it like a dropped connection
  (retried, then a calm error). New connections give up after ``TAHRIX_DB_WAIT`` seconds.

Messages name the server as ``host:port/db``, never the user's password.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tahrix_lab.agent.errors import ConfigurationError, StoreUnavailableError
from tahrix_lab.agent.storage.pg_schema import MIGRATIONS, migrate
from tahrix_lab.agent.storage.target import server_of

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)
T = TypeVar("T")
GRACE = 5.0  # seconds past the statement timeout before the watchdog gives up on the server
RECONNECT_S = 3.0  # the longest the pool backs off before a request may try the server afresh


class Watchdog:
    """Closes the socket of a statement past its deadline (see the module docstring). One
    thread per pool, started on first use, looking once a second: a statement costs two
    dictionary operations, not a timer."""

    def __init__(self, server: str, seconds: float) -> None:
        self.server, self.seconds = server, seconds
        self._due: dict[int, tuple[float, int]] = {}  # ticket -> (deadline, socket fd)
        self._tickets = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        with self._lock:
            ticket = next(self._tickets)
            self._due[ticket] = (time.monotonic() + self.seconds, conn.fileno())
            if self._thread is None:
                self._thread = threading.Thread(target=self._patrol, name="tahrix-pg-watchdog", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._due.pop(ticket, None)

    def _patrol(self) -> None:
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            with self._lock:
                late = [(t, fd) for t, (due, fd) in self._due.items() if due <= now]
                for ticket, fd in late:
                    del self._due[ticket]
                    log.warning("PostgreSQL record at %s: no answer in %.0f s; closing the connection",
                                self.server, self.seconds)  # fmt: skip
                    # shutdown, not close: libpq still owns the descriptor, and its wait now
                    # ends with an error instead of never.
                    with socket.socket(fileno=os.dup(fd)) as sock, contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)


def _seconds(name: str, given: float | None, default: float) -> float:
    if given is not None:
        return given
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        raise ConfigurationError(f"${name} must be a number of seconds.") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect_once(url: str, *, timeout: float = 10.0) -> psycopg.Connection[Any]:
    """One autocommit connection (the pool's probe, ``tahrix db``); a calm error if down."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout)))
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(
            f"Cannot reach the PostgreSQL record at {server_of(url)}: {first_line(exc)}"
        ) from None


class Pool:
    """A process's pool on one URL, with the wait, retry and timeout its statements get."""

    _all: ClassVar[dict[tuple[Any, ...], Pool]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def get(
        cls,
        url: str,
        *,
        wait: float | None = None,
        size: int | None = None,
        statement_timeout: float | None = None,
        retry: float | None = None,
    ) -> Pool:
        wait = _seconds("TAHRIX_DB_WAIT", wait, 30.0)
        retry = _seconds("TAHRIX_PG_RETRY", retry, 30.0)
        statement_timeout = _seconds("TAHRIX_PG_STATEMENT_TIMEOUT", statement_timeout, 30.0)
        size = size or int(os.environ.get("TAHRIX_PG_POOL", "") or 10)
        key = (os.getpid(), url, wait, retry, statement_timeout, size)
        with cls._lock:
            pool = cls._all.get(key)
            if pool is None or pool.pool.closed:
                pool = cls._all[key] = cls(url, wait, retry, statement_timeout, size)
            return pool

    @classmethod
    def close_all(cls) -> None:
        with cls._lock:
            pools, cls._all = list(cls._all.values()), {}
        for pool in pools:
            pool.pool.close()

    def __init__(self, url: str, wait: float, retry: float, statement_timeout: float, size: int) -> None:
        from psycopg_pool import ConnectionPool

        self.server = server_of(url)
        self.wait, self.retry, self.statement_timeout = wait, retry, statement_timeout
        with connect_once(url, timeout=wait) as probe:  # down at start: one calm line
            migrate(probe, "transcript", MIGRATIONS)  # as `tahrix db migrate` would
        timeout_ms = int(statement_timeout * 1000)

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(f"SET statement_timeout = {timeout_ms}")
            conn.execute("SET TIME ZONE 'UTC'")

        self.watchdog = Watchdog(self.server, statement_timeout + GRACE)
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            # connect_timeout: a frozen server accepts the TCP connection and never answers
            kwargs={"autocommit": True, "connect_timeout": max(1, round(wait))},
            configure=configure,
            timeout=wait,
            # The pool retries a failed connection with a doubling delay for reconnect_timeout: after
            # an outage of a minute it would wait about a minute more once the server is back. A
            # short chain ends soon, and the next request starts a fresh one that connects at once.
            reconnect_timeout=RECONNECT_S,
            name=f"tahrix-record {self.server}",
            open=False,
        )
        self.pool.open(wait=False)
        self._tx = threading.local()  # this thread's connection inside transaction()

    def run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T:
        """``work(conn, first)`` on a pooled connection (see the module docstring)."""
        import psycopg
        from psycopg_pool import PoolTimeout

        held: psycopg.Connection[Any] | None = getattr(self._tx, "conn", None)
        if held is not None:  # inside transaction(): the block's connection, no retry
            with self.watchdog.watch(held):
                return work(held, True)
        deadline = time.monotonic() + self.retry
        first, delay = True, 0.05
        while True:
            try:
                with self.pool.connection(timeout=self.wait) as conn, self.watchdog.watch(conn):
                    return work(conn, first)
            except PoolTimeout:
                raise self._no_connection() from None
            except psycopg.errors.QueryCanceled:
                raise StoreUnavailableError(
                    f"The PostgreSQL record at {self.server} took longer than {self.statement_timeout:g} s "
                    "to answer. Try again shortly."
                ) from None
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise StoreUnavailableError(
                        f"Lost the connection to the PostgreSQL record at {self.server}: {first_line(exc)}"
                    ) from None
                log.warning("PostgreSQL record at %s: %s; retrying", self.server, first_line(exc))
                first = False
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _no_connection(self) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"No connection to the PostgreSQL record at {self.server} within {self.wait:g} s "
            "(the server is down, or every connection of this process is busy). Try again shortly."
        )

    @contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the block's own, for state held across other statements (a session's
        advisory lock); the pool takes it back at the end, and drops it if it died."""
        from psycopg_pool import PoolTimeout

        try:
            conn = self.pool.getconn(timeout=self.wait)
        except PoolTimeout:
            raise self._no_connection() from None
        try:
            yield conn
        finally:
            self.pool.putconn(conn)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The block's writes on one connection, committed together or not at all."""
        if getattr(self._tx, "conn", None) is not None:
            yield
            return
        with self.pool.connection(timeout=self.wait) as conn, conn.transaction():
            self._tx.conn = conn
            try:
                yield
            finally:
                self._tx.conn = None
