"""Job starts: admissions first during a burst, then starts in groups.

``BurstGate``: while POSTs arrive less than ``quiet_s`` apart, one worker
thread waits for them to pause (at most ``max_s``) and the runner wakes no
other, so the event loop answers every POST of a burst before threads take the
interpreter lock to start jobs.

``GroupStarts``: the starts waiting at one moment share one transcript
transaction (``agent.group_commit``).

Starting a job writes to DuckDB (a new session, earlier turns, the question).
One at a time, each start pays its own transaction, and under load each
statement also waits for the GIL again afterwards: a burst of 500 jobs took
about 45 s to start on two cores. Here the first thread to arrive leads: it
takes every start queued so far (at most ``max_batch``), runs them in one
transaction and hands the lead to the next waiting thread; the others wait
without waking. The runner's transaction is the transcript store's buffered
one: the group's new sessions and messages are written as one INSERT each.
A start that is refused (``JobRejected``) is refused alone. If the
transaction itself fails, each start of the group is run again on its own,
so one bad start cannot fail its neighbours.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from tahrix_lab.agent.storage.group_commit import GroupCommit
from tahrix_lab.jobs.request import JobRejected

J = TypeVar("J")
R = TypeVar("R")


class GroupStarts(GroupCommit[J, R]):
    """``start(job)`` runs ``run_one(job)`` inside ``transaction()``, grouped with the starts
    queued beside it; a refused start (``JobRejected``) is refused alone."""

    def __init__(
        self,
        run_one: Callable[[J], R],
        transaction: Callable[[], AbstractContextManager[object]],
        *,
        max_batch: int = 32,
    ) -> None:
        super().__init__(run_one, transaction, max_batch=max_batch, alone=(JobRejected,))

    def start(self, job: J) -> R:
        return self.run(job)


class BurstGate:
    """See the module docstring. ``admitted()`` at each admission; ``wait()`` in a worker
    before it takes a job; ``watching`` tells the runner not to wake more workers."""

    def __init__(self, *, quiet_s: float = 0.005, max_s: float = 0.25) -> None:
        self.quiet_s = quiet_s
        self.max_s = max_s
        self.watching = False  # read without a lock: a stale value costs one wake-up at most
        self._last = 0.0  # monotonic time of the last admission
        self._lock = threading.Lock()  # one watcher; the other workers wait here, not waking

    def admitted(self) -> None:
        self._last = time.monotonic()

    def wait(self) -> None:
        with self._lock:
            self.watching = True
            try:
                until = time.monotonic() + self.max_s
                while (now := time.monotonic()) < until and now - self._last < self.quiet_s:
                    time.sleep(self.quiet_s)
            finally:
                self.watching = False
