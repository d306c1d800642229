"""Job starts: admissions first during a burst, then starts in groups.

``BurstGate``: while POSTs arrive less than ``quiet_s`` apart, one worker
thread waits for them to pause (at most ``max_s``) and the runner wakes no
other, so the event loop answers every POST of a burst before threads take the
interpreter lock to start jobs.

``GroupStarts``: the starts waiting at one moment share one transcript
transaction.

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
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tahrix_lab.jobs.request import JobRejected

J = TypeVar("J")
R = TypeVar("R")


@dataclass
class _Slot(Generic[J, R]):
    job: J
    wake: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    result: R | None = None
    error: BaseException | None = None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class GroupStarts(Generic[J, R]):
    """``start(job)`` runs ``run_one(job)`` inside ``transaction()``, grouped with the starts
    queued beside it; returns its result or raises its error."""

    def __init__(
        self,
        run_one: Callable[[J], R],
        transaction: Callable[[], AbstractContextManager[object]],
        *,
        max_batch: int = 32,
    ) -> None:
        self.run_one = run_one
        self.transaction = transaction
        self.max_batch = max_batch
        self.groups = 0  # how many transactions were run (tests read it)
        self._lock = threading.Lock()
        self._queue: list[_Slot[J, R]] = []
        self._leading = False

    def start(self, job: J) -> R:
        slot: _Slot[J, R] = _Slot(job)
        with self._lock:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.wake.wait()
            if slot.finished:
                return slot.outcome()
        self._lead()  # this slot heads the queue: the group below includes it
        return slot.outcome()

    def _lead(self) -> None:
        with self._lock:
            group = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
        try:
            self._run(group)
        finally:
            for slot in group:
                if slot.result is None and slot.error is None:  # interrupted mid-group
                    slot.error = RuntimeError("the start was interrupted")
                slot.finished = True
                slot.wake.set()
            with self._lock:
                if self._queue:  # woken unfinished, the next waiting thread leads the next group
                    self._queue[0].wake.set()
                else:
                    self._leading = False

    def _run(self, group: list[_Slot[J, R]]) -> None:
        self.groups += 1
        try:
            with self.transaction():
                for slot in group:
                    self._one(slot, only=JobRejected)
        except Exception:
            for slot in group:  # each on its own: one failure fails only its own start
                slot.result = slot.error = None
                self._one(slot, only=Exception)

    def _one(self, slot: _Slot[J, R], *, only: type[Exception]) -> None:
        try:
            slot.result = self.run_one(slot.job)
        except only as exc:
            slot.error = exc


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
