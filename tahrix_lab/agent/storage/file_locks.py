"""Advisory file locks beside a workspace file, between the Tahrix processes that share it.

- ``HolderLock`` (``<file>.lock``): held exclusively from before a process ATTACHes the
  file until its DETACH has returned. DuckDB's own lock guards the file too, but with
  DuckDB 2.0.1 processes taking turns through it lost commits (a process attaching
  while another was still letting go, or an attach that failed on the lock, in about
  one run in three of three processes writing in turns); with this lock taken first,
  no Tahrix process ever tries the file while another holds it.
- ``Turnstile`` (``<file>.waiters``): the processes waiting for the file hold a shared
  lock on it, so a holder can see that someone waits.
- ``case_turn_taken`` (``<file>.turns``): a process's turn at one case (a load or detector
  run and its manifest step), so that two processes sharing the file do not both work on it.

``flock`` locks belong to the open file description, so they are per process here
(each process opens its own) and vanish with the process: a ``kill -9`` leaves no lock.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

try:
    import fcntl
except ImportError:  # not on Windows: DuckDB's lock and the backoff alone
    fcntl = None  # type: ignore[assignment]


class HolderLock:
    """The exclusive lock a process holds while the workspace file is attached."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._held = False
        self._guard = threading.Lock()

    def acquire(self) -> bool:
        """Take the lock if no other process holds it (never blocks)."""
        if fcntl is None:
            return True
        with self._guard:
            if self._held:
                return True
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            self._held = True
            return True

    def release(self) -> None:
        if fcntl is None:
            return
        with self._guard:
            if self._held and self._fd is not None:
                with suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._held = False


class Turnstile:
    """Processes waiting for the file hold a shared ``flock`` on ``<file>.waiters``; a process
    holding the file that sees one lets it go at once, then steps aside before taking it again
    (DuckDB's own lock has no queue: without this, a busy process would keep winning)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._probe: int | None = None
        # The probe's exclusive lock must be released on the fd it was taken on: two
        # threads opening it at once once leaked one locked fd, and every waiter hung.
        self._guard = threading.Lock()

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)

    def join(self) -> None:
        if fcntl is None:
            return
        with suppress(OSError):
            with self._guard:
                if self._fd is None:
                    self._fd = self._open()
                fd = self._fd
            fcntl.flock(fd, fcntl.LOCK_SH)

    def leave(self) -> None:
        if fcntl is not None and self._fd is not None:
            with suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def others_waiting(self) -> bool:
        if fcntl is None:
            return False
        with self._guard:  # one probe at a time, taken and released on the same fd
            try:
                if self._probe is None:
                    self._probe = self._open()
                fcntl.flock(self._probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False
            fcntl.flock(self._probe, fcntl.LOCK_UN)
            return False


_turn_files: dict[str, int] = {}  # <file>.turns → this process's one descriptor of it
_turn_files_guard = threading.Lock()


@contextmanager
def case_turn_taken(path: str, case_id: str) -> Iterator[bool]:
    """Whether this process has the case's turn for the block (False: another process has it).

    An exclusive POSIX record lock on one byte of ``<file>.turns``, at an offset hashed from
    the case id (60 bits: two cases sharing a byte is not a concern). Record locks belong to
    the process, so threads must take turns among themselves first (``case_turn`` does), and
    the file stays open for the life of the process: closing any descriptor of it would drop
    every record lock the process holds there. A ``kill -9`` drops them all."""
    if fcntl is None:
        yield True
        return
    turns = path + ".turns"
    with _turn_files_guard:
        fd = _turn_files.get(turns)
        if fd is None:
            fd = _turn_files[turns] = os.open(turns, os.O_RDWR | os.O_CREAT, 0o600)
    offset = int(hashlib.sha256(case_id.encode()).hexdigest()[:15], 16)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:  # EACCES or EAGAIN: another process holds the byte
        yield False
        return
    try:
        yield True
    finally:
        with suppress(OSError):
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


# DuckDB creates the database file and its WAL (again after every CHECKPOINT) with the
# process umask: while any database file is attached, the umask also masks group and others,
# so workspace files are 0600 whatever the umask. Counted: attaches overlap across threads.
_umask_guard = threading.Lock()
_umask_users = 0
_umask_saved = 0


def private_files_begin() -> None:
    global _umask_users, _umask_saved
    with _umask_guard:
        if _umask_users == 0:
            _umask_saved = os.umask(0o077)
            os.umask(_umask_saved | 0o077)
        _umask_users += 1


def private_files_end() -> None:
    global _umask_users
    with _umask_guard:
        _umask_users = max(0, _umask_users - 1)
        if _umask_users == 0:
            os.umask(_umask_saved)


@contextmanager
def private_files() -> Iterator[None]:
    """Files this process creates in the block are readable by their owner only (evidence copies)."""
    private_files_begin()
    try:
        yield
    finally:
        private_files_end()
