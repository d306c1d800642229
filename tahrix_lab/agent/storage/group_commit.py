"""Group commit: writes from many threads at one moment share one transaction.

DuckDB pays most of a small write in its transaction (a few milliseconds here),
not in the rows. When many threads write at once (a job service ending or
starting hundreds of answers), the first thread to arrive leads: it takes every
write queued so far (at most ``max_batch``), runs them in one transaction and
hands the lead to the next waiting thread; the others wait without waking.
Each caller returns once its own write committed, as if it had written alone.

A write that raises one of the ``alone`` exceptions fails alone (its neighbours
commit). If the transaction itself fails, each write of the group runs again on
its own, so one bad write cannot fail the others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

J = TypeVar("J")
R = TypeVar("R")


@dataclass
class _Slot(Generic[J, R]):
    job: J
    wake: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    done: bool = False
    result: R | None = None
    error: BaseException | None = None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # R may be None itself


class GroupCommit(Generic[J, R]):
    """``run(job)`` runs ``run_one(job)`` inside ``transaction()``, grouped with the writes
    queued beside it; returns its result or raises its error."""

    def __init__(
        self,
        run_one: Callable[[J], R],
        transaction: Callable[[], AbstractContextManager[object]],
        *,
        max_batch: int = 32,
        alone: tuple[type[Exception], ...] = (),
    ) -> None:
        self.run_one = run_one
        self.transaction = transaction
        self.max_batch = max_batch
        self.alone = alone
        self.groups = 0  # how many transactions were run (tests read it)
        self._lock = threading.Lock()
        self._queue: list[_Slot[J, R]] = []
        self._leading = False

    def run(self, job: J) -> R:
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
                if not slot.done:  # interrupted mid-group
                    slot.error = RuntimeError("the write was interrupted")
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
                    self._one(slot, only=self.alone)
        except Exception:
            for slot in group:  # each on its own: one failure fails only its own write
                slot.result, slot.error, slot.done = None, None, False
                self._one(slot, only=(Exception,))

    def _one(self, slot: _Slot[J, R], *, only: tuple[type[Exception], ...]) -> None:
        try:
            slot.result = self.run_one(slot.job)
        except only as exc:
            slot.error = exc
        slot.done = True
