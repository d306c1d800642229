"""DuckDB plumbing for every component that keeps data in the one workspace file.

DuckDB lets one process at a time open a file for writing, so no process keeps
the file (docs/workspace.md). Each process runs one in-memory DuckDB instance
and ATTACHes the file only for the span of a burst — a *lease* — then DETACHes
it (CHECKPOINT, then DETACH: the next process opens a file without a WAL to
replay). A file held by another process is retried with exponential backoff
and full jitter until ``wait`` seconds have passed, then ``StoreLockedError``
names the file and the holder.

- ``Database.open(path)`` gives the process's one ``Database`` for a file: the
  transcript store, the case database and the budget share it, so they share
  one lease count and one write lock.
- ``db.lease()`` holds the file for a block; leases nest and are shared by the
  threads of the process; the file is let go ``linger`` seconds after the last
  one ends (a burst of statements costs one attach).
- ``db.local_cursor()`` is this thread's cursor (DuckDB connections are not
  shared across threads), in UTC; ``db.cursor()`` a new one. A statement run
  outside a lease takes one for itself, held until its result is fetched.
- ``db.write()`` is one short transaction under the write lock — never a
  transaction held across a stream.

``":memory:"`` (tests) or a ``connection`` handed in keeps one connection open
for good: there is no file to share.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import duckdb

from tahrix_lab.agent.errors import ConfigurationError, StoreLockedError
from tahrix_lab.agent.storage.file_locks import HolderLock, Turnstile, private_files_begin, private_files_end
from tahrix_lab.agent.storage.leased_cursor import STALE_RESULT_S, Cursor
from tahrix_lab.agent.storage.target import engine_of, redacted

log = logging.getLogger(__name__)

ALIAS = "tahrix_ws"  # the catalog name of the attached workspace file
DEFAULT_WAIT_S = 30.0  # how long a held file is retried before StoreLockedError
DEFAULT_LINGER_S = 0.02  # how long an idle attachment is kept for the next statement
_POLL_CAP_S = 0.01  # a waiting process tries the file at least this often
_YIELD_S = 0.5  # a process that just let the file go leaves it to waiting ones this long at most
_MAX_HOLD_S = 0.25  # past this, a process with a waiter stops taking new leases on the file


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        raise ConfigurationError(f"${name} must be a number of seconds.") from None


@dataclass
class LockStats:
    """How this process fared getting the file: attaches, and the waits on a held lock."""

    attaches: int = 0
    waits: int = 0
    wait_s_total: float = 0.0
    wait_s_max: float = 0.0
    attach_s_total: float = 0.0
    detach_s_total: float = 0.0
    hold_s_total: float = 0.0  # attached, from attach to detach
    hold_s_max: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.__dict__.items()}


class Database:
    """One workspace file, attached only while a lease is held (see the module docstring)."""

    _registry: ClassVar[dict[str, Database]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        path: str = ":memory:",
        *,
        connection: duckdb.DuckDBPyConnection | None = None,
        wait: float | None = None,
        linger: float | None = None,
    ) -> None:
        if engine_of(path) != "duckdb":  # an unknown URL raised; a PostgreSQL one holds no DuckDB file
            raise ConfigurationError(
                f"{redacted(path)!r} is a PostgreSQL URL; this needs a DuckDB file (the case evidence)."
            )
        self.path = path
        self.shared = connection is None and path != ":memory:"  # False: one connection kept open
        self.wait = wait if wait is not None else _env_float("TAHRIX_DB_WAIT", DEFAULT_WAIT_S)
        self.linger = linger if linger is not None else _env_float("TAHRIX_DB_LINGER", DEFAULT_LINGER_S)
        self.stats = LockStats()
        self._base = connection if connection is not None else duckdb.connect(":memory:")
        if connection is None:
            self._base.execute("SET TimeZone = 'UTC'")
        self._mutex = threading.Condition(threading.Lock())
        self._attach_lock = threading.Lock()
        self._attached = not self.shared
        self._leases = 0
        self._depth: dict[int, int] = {}  # leases per thread
        self._thread_cursors: dict[int, list[Cursor]] = {}  # cursors a thread ran statements on
        self._idle_since = 0.0
        self._closer: threading.Thread | None = None
        self._closed = False
        self._handles = 1
        self._local = threading.local()
        self.write_lock = _LeaseLock(self)
        self._detached_at = self._attached_at = 0.0
        self._draining = False  # past MAX_HOLD with a waiter: no new leases until detached
        self._turnstile = Turnstile(path + ".waiters") if self.shared else None
        self._holder = HolderLock(path + ".lock") if self.shared else None
        if self.shared:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)

    # -- one per file per process ------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Database:
        """This process's ``Database`` for ``path`` (a new one for ``":memory:"``); close() when done."""
        path = str(path)
        if path == ":memory:":
            return cls(path)
        key = os.path.realpath(os.path.expanduser(path))
        with cls._registry_lock:
            db = cls._registry.get(key)
            if db is not None and not db._closed:
                db._handles += 1
                return db
            db = cls._registry[key] = cls(path)
            return db

    def acquire(self) -> Database:
        """Another handle on this database (each handle is closed once)."""
        with self._registry_lock:
            self._handles += 1
        return self

    def close(self) -> None:
        """Drop a handle; the last one lets the file go and closes the instance."""
        with self._registry_lock:
            self._handles -= 1
            if self._handles > 0 or self._closed:
                return
            self._closed = True
            for key, db in list(self._registry.items()):
                if db is self:
                    del self._registry[key]
        if self.shared:
            with self._attach_lock, self._mutex:
                self._leases = 0
                self._mutex.notify_all()
            self._detach()
        self._base.close()

    # -- leases --------------------------------------------------------------------------
    @contextmanager
    def lease(self) -> Iterator[Database]:
        """Hold the file for the block (nested and shared by threads)."""
        self._enter()
        try:
            yield self
        finally:
            self._exit()

    def holds_lease(self, beyond: int = 0) -> bool:
        """Whether this thread holds more than ``beyond`` leases."""
        return self._depth.get(threading.get_ident(), 0) > beyond

    def _enter(self) -> None:
        if not self.shared:
            return
        me = threading.get_ident()
        with self._mutex:
            if self._closed:
                raise ConfigurationError(f"The database {self.path!r} was closed.")
            # Threads taking turns can keep the file without a gap: past MAX_HOLD, with a
            # process waiting, new leases wait until the file was let go.
            if (
                not self._depth.get(me)
                and self._attached
                and not self._draining
                and time.monotonic() - self._attached_at > _MAX_HOLD_S
                and self._others_waiting()
            ):
                self._draining = True
            until = time.monotonic() + 1.0  # bounded: a lease holder may be waiting on us
            while self._draining and not self._depth.get(me) and time.monotonic() < until:
                self._mutex.wait(timeout=0.05)
            self._leases += 1
            self._depth[me] = self._depth.get(me, 0) + 1
            if self._attached:
                return
        try:
            with self._attach_lock:
                with self._mutex:
                    if self._attached:
                        return
                self._step_aside()
                self._attach()
                with self._mutex:
                    self._attached = True
        except BaseException:
            self._exit(drain=False)
            raise

    def _exit(self, *, drain: bool = True, thread: int | None = None) -> None:
        if not self.shared:
            return
        me = thread if thread is not None else threading.get_ident()
        with self._mutex:
            depth = self._depth.get(me, 1) - 1
            if depth > 0:
                self._depth[me] = depth
                cursors: list[Cursor] = []
            else:
                self._depth.pop(me, None)
                cursors = self._thread_cursors.pop(me, []) if drain else []
        for cur in cursors:  # an unfetched result keeps DuckDB's file open: buffer what is left
            cur._drain()
        with self._mutex:
            self._leases -= 1
            if self._leases == 0:
                self._idle_since = time.monotonic()
                self._mutex.notify_all()
        if self._leases == 0 and (self.linger <= 0 or self._draining or self._others_waiting()):
            self._detach_if_idle()
        elif self._closer is None:
            self._start_closer()

    def _ran_on(self, cur: Cursor) -> None:
        me = threading.get_ident()
        with self._mutex:
            found = self._thread_cursors.setdefault(me, [])
            if cur not in found:
                found.append(cur)

    def _others_waiting(self) -> bool:
        return self._turnstile is not None and self._turnstile.others_waiting()

    def _step_aside(self) -> None:
        """Fairness: just after letting the file go, leave it to the processes waiting for it."""
        until = self._detached_at + _YIELD_S
        while time.monotonic() < until and self._others_waiting():
            time.sleep(0.005)

    def _attach(self) -> None:
        private_files_begin()  # the file and its WAL are created 0600 (file_locks), until _detach
        try:
            self._attach_retrying()
        except BaseException:  # an interrupt mid-attach: the file is not ours, nor its holder lock
            private_files_end()
            self._release_holder()
            raise
        finally:
            if self._turnstile is not None:
                self._turnstile.leave()

    def _attach_retrying(self) -> None:
        started = time.monotonic()
        deadline = started + self.wait
        delay, waited = 0.002, False
        literal = "'" + self.path.replace("'", "''") + "'"
        while True:
            try:
                if self._holder is not None and not self._holder.acquire():
                    raise _HeldByTahrix(f"held by another Tahrix process (see {self._holder.path})")
                self._base.execute(f"ATTACH {literal} AS {ALIAS}")
                break
            except (duckdb.IOException, _HeldByTahrix) as exc:
                if isinstance(exc, duckdb.IOException):
                    self._release_holder()
                    if "lock" not in str(exc).lower():
                        raise ConfigurationError(
                            f"Could not open the database {self.path!r}: {exc}"
                        ) from None
                now = time.monotonic()
                if now >= deadline:
                    self._record_wait(now - started)
                    raise StoreLockedError(self.path, str(exc)) from None
                if not waited and self._turnstile is not None:
                    self._turnstile.join()  # holders see us and let the file go sooner
                waited = True
                time.sleep(min(delay, deadline - now) * random.uniform(0.5, 1.0))  # full jitter
                delay = min(delay * 2, _POLL_CAP_S)
            except duckdb.Error as exc:
                self._release_holder()
                raise ConfigurationError(f"Could not open the database {self.path!r}: {exc}") from None
        now = self._attached_at = time.monotonic()
        self.stats.attaches += 1
        self.stats.attach_s_total += now - started
        if waited:
            self._record_wait(now - started)

    def _release_holder(self) -> None:
        if self._holder is not None:
            self._holder.release()

    def _record_wait(self, seconds: float) -> None:
        self.stats.waits += 1
        self.stats.wait_s_total += seconds
        self.stats.wait_s_max = max(self.stats.wait_s_max, seconds)

    def _detach(self, *, checked: bool = False) -> None:
        """DETACH the file. ``checked``: the caller already marked it detached under the mutex."""
        if not checked:
            with self._mutex:
                if not self._attached:
                    self._draining = False
                    self._mutex.notify_all()
                    return
                self._attached = False
        started = time.monotonic()
        # CHECKPOINT, DETACH, and a statement that drops DETACH's result, all before the
        # holder lock goes: the next process finds the file finished (see file_locks).
        for statement in (f"CHECKPOINT {ALIAS}", f"DETACH {ALIAS}", "SELECT 1"):
            try:
                self._base.execute(statement).fetchall()
            except duckdb.Error as exc:  # committed work is in the WAL: the next attach replays it
                log.warning("%s of %s failed: %s", statement.split()[0], self.path, exc)
        private_files_end()
        self._release_holder()
        self._detached_at = time.monotonic()
        with self._mutex:
            self._draining = False
            self._mutex.notify_all()
        self.stats.detach_s_total += self._detached_at - started
        held = self._detached_at - self._attached_at
        self.stats.hold_s_total += held
        self.stats.hold_s_max = max(self.stats.hold_s_max, held)

    def _detach_if_idle(self) -> None:
        with self._attach_lock:
            with self._mutex:
                if self._leases or not self._attached:
                    return
                # In the same critical section as the check: a lease taken from now on
                # sees the file detached and waits for the attach lock (held here).
                self._attached = False
            self._detach(checked=True)

    def _start_closer(self) -> None:
        with self._mutex:
            if self._closer is not None:
                return
            self._closer = threading.Thread(target=self._close_idle, name="tahrix-db-linger", daemon=True)
        self._closer.start()

    def _close_idle(self) -> None:
        """Let the file go once no lease has been held for ``linger`` seconds."""
        while True:
            with self._mutex:
                if self._closed:
                    return
                if self._leases or not self._attached:
                    self._mutex.wait(timeout=STALE_RESULT_S)
                    due = False
                else:
                    left = self._idle_since + self.linger - time.monotonic()
                    due = left <= 0 or self._others_waiting()
                    if not due:
                        self._mutex.wait(timeout=left)
                stale = [c for cs in self._thread_cursors.values() for c in cs if c._stale()]
            for cur in stale:
                cur._release_stale()
            if due:
                self._detach_if_idle()

    # -- cursors and writes ------------------------------------------------------------
    def _raw_cursor(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB cursor on this database, in UTC (call inside a lease when shared)."""
        raw = self._base.cursor()
        if self.shared:
            raw.execute(f"USE {ALIAS}")
        raw.execute("SET TimeZone = 'UTC'")
        return raw

    # A ``Cursor`` stands in for a DuckDB cursor (the methods the project uses), so it is
    # typed as one: the code that takes a cursor needs no change.
    def local_cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor."""
        return cast(duckdb.DuckDBPyConnection, self._local_cursor())

    def _local_cursor(self) -> Cursor:
        cur: Cursor | None = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._local.cursor = Cursor(self)
        return cur

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor (close it when done), like ``DuckDBPyConnection.cursor``."""
        return cast(duckdb.DuckDBPyConnection, Cursor(self))

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyConnection:
        return self.local_cursor().execute(sql, params)

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One short transaction under the write lock (inside another one: part of it)."""
        with self.write_lock:
            cur = self._local_cursor()
            if cur._in_txn:
                yield cast(duckdb.DuckDBPyConnection, cur)
                return
            cur.execute("BEGIN")
            try:
                yield cast(duckdb.DuckDBPyConnection, cur)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")


class _HeldByTahrix(Exception):
    """Another Tahrix process holds the file (its holder lock): wait as for DuckDB's lock."""


class _LeaseLock:
    """The process's write lock; holding it holds a lease, so the file stays attached."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.RLock()

    # The lease first, then the lock: a thread waiting for the lock holds a lease, so a
    # thread waiting for a lease (the file being let go) never holds the lock.
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self._db._enter()
        try:
            got = self._lock.acquire(blocking, timeout)
        except BaseException:
            self._db._exit()
            raise
        if not got:
            self._db._exit()
        return got

    def release(self) -> None:
        try:
            self._lock.release()
        finally:
            self._db._exit()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def connect(path: str) -> Database:
    """The process's ``Database`` for ``path`` (kept for callers of the old name)."""
    return Database.open(path)


@atexit.register
def _close_all() -> None:
    """Checkpoint and let every workspace file go when the process ends."""
    for db in list(Database._registry.values()):
        db._handles = 1
        db.close()
