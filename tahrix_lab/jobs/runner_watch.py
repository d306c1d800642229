"""The runner's watching half: cancels of quiet jobs, lease renewal, lapsed leases.

One watcher thread per runner, every ``watch_interval``: it renews the lease of
every job this process holds (every ``lease_s / 3``), claims the jobs whose
worker stopped renewing (once a second; see ``runner``'s docstring for what
happens to them) and looks for cancel marks on the jobs whose runs are quiet
(a write reports the mark on the others).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.transcript import Message, Part
from tahrix_lab.jobs.chunklog import EndStatus, JobStore, Lapsed, StoreUnavailable, in_flight
from tahrix_lab.jobs.request import JobRequest

if TYPE_CHECKING:
    from tahrix_lab.agent.store import TranscriptStore
    from tahrix_lab.jobs.stream_steps import StreamSteps

log = logging.getLogger("tahrix_lab.jobs.runner")

LAPSED_MESSAGE = (
    "The worker that was writing this answer stopped. What had arrived is kept in the "
    "conversation; please ask again."
)


class Watching:
    """Mixed into ``JobRunner``, which provides the attributes and methods declared here."""

    store: JobStore
    transcripts: TranscriptStore
    backend: Any
    model: str
    worker_id: str
    lease_s: float
    watch_interval: float
    _cond: threading.Condition
    _stopping: threading.Event
    _running: dict[str, Any]
    _pending: dict[str, Any]
    _streams: StreamSteps | None

    def enqueue(self, req: JobRequest, *, resume_session: str | None = None) -> None:
        raise NotImplementedError

    def _positions(self) -> dict[str, int]:
        raise NotImplementedError

    def _publish_positions(self, positions: dict[str, int]) -> None:
        raise NotImplementedError

    def _end(self, job: Any, status: EndStatus, last: list[Any]) -> None:
        raise NotImplementedError

    # -- watching: cancels, leases ------------------------------------------
    def _held(self) -> list[str]:
        with self._cond:
            return [*self._running, *self._pending]

    def _renew(self) -> None:
        with contextlib.suppress(StoreUnavailable):
            self.store.renew(self.worker_id, self._held(), self.lease_s)

    def _watch(self) -> None:
        next_renew = next_claim = 0.0
        while not self._stopping.wait(self.watch_interval):
            now = time.monotonic()
            if now >= next_renew:
                self._renew()
                next_renew = now + self.lease_s / 3
            if now >= next_claim:
                next_claim = now + 1.0
                try:
                    lapsed = self.store.claim_lapsed(
                        self.worker_id, self.lease_s, LAPSED_MESSAGE, self._held()
                    )
                except StoreUnavailable:
                    lapsed = []
                for item in lapsed:
                    self._after_lapse(item)
            self._check_cancels()

    def _after_lapse(self, item: Lapsed) -> None:
        if item.taken_over:
            log.warning("job %s: its worker stopped before it began; running it here", item.job_id)
            self.enqueue(JobRequest.from_dict(item.request), resume_session=item.session_id)
            return
        log.warning("job %s: its worker stopped mid-answer; it ended with an error", item.job_id)
        text, thought = in_flight(item.chunks)
        if item.session_id is None or not (text or thought):
            return
        parts = ([Part.of_reasoning(thought)] if thought else []) + ([Part.of_text(text)] if text else [])
        msg = Message(role="assistant", parts=parts, backend=self.backend.name, model_id=self.model,
                      stop_reason="error", raw_stop_reason="error: the worker stopped")  # fmt: skip
        try:
            self.transcripts.append_message(item.session_id, msg)
        except Exception:
            log.exception("job %s: could not keep the interrupted answer", item.job_id)

    def _check_cancels(self) -> None:
        # Only quiet jobs need a look (in a tool, waiting for the model, queued): an
        # append already reports the cancel mark, and this also refreshes their TTL.
        quiet = time.monotonic() - self.watch_interval
        with self._cond:
            ids = [j.job_id for j in self._running.values() if j.last_write <= quiet]
            ids += list(self._pending)
        if not ids:
            return
        try:
            wanted = self.store.cancel_requested(ids)
        except StoreUnavailable:
            return
        if not wanted:
            return
        with self._cond:
            for job_id in wanted:
                if job_id in self._running:
                    self._running[job_id].cancel.set()
            if self._streams is not None:
                self._streams.poke()
            dropped = [self._pending.pop(k) for k in list(self._pending) if k in wanted]
            positions = self._positions() if dropped else {}
        for job in dropped:
            self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
        self._publish_positions(positions)
