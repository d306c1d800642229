"""Leases: one watcher thread per process that serves jobs.

Every ``interval`` it claims the jobs whose worker stopped renewing (once a
second): one that had produced nothing is run again by a worker, any other
ends with a calm ``error`` chunk. Every live process does this, API processes
too, so a job whose worker died ends within a lease and a second even when no
worker is alive. In a worker (``Holder`` given) it also renews the lease of
every job the process holds (every ``lease_s / 3``, and at once when Redis
restarted empty and forgot the worker: that writes its jobs anew), stores the
interrupted answers of jobs a reaper ended (``JobStore.unsaved``: an API
process never opens the transcripts, so it leaves that to a worker), and
looks for cancel marks on the jobs whose runs are quiet (a write reports the
mark on the others).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part
from tahrix_lab.flow.chunklog import in_flight
from tahrix_lab.jobs.contract import JobRequest, JobStore, Lapsed, StoreUnavailable

log = logging.getLogger(__name__)

LAPSED_MESSAGE = (
    "The worker that was writing this answer stopped. What had arrived is kept in the "
    "conversation; please ask again."
)
CLAIM_EVERY_S = 1.0


@dataclass
class Holder:
    """A worker's side of the watcher: the runner's jobs and what to do with them."""

    worker_id: str
    transcripts: TranscriptStore
    answered_by: tuple[str, str]  # backend name and model id, for an interrupted answer
    held: Callable[[], list[str]]  # every job queued or running here
    quiet: Callable[[float], list[str]]  # queued, or running with no write since that time
    cancel: Callable[[set[str]], None]  # these were asked to stop
    take_over: Callable[[JobRequest, str | None], None]  # run a lapsed job that had not begun


class Watcher:
    """See the module docstring. ``start()`` it; ``stop()`` at the end."""

    def __init__(
        self, store: JobStore, lease_s: float, interval: float, holder: Holder | None = None
    ) -> None:
        self.store, self.lease_s, self.interval, self.holder = store, lease_s, interval, holder
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tahrix-job-watch", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        next_renew = next_claim = 0.0
        while not self._stopping.wait(self.interval):
            now = time.monotonic()
            if self.holder is not None and (now >= next_renew or self._forgotten(self.holder)):
                self._renew(self.holder)  # after a Redis restart this writes our jobs anew at once
                next_renew = now + self.lease_s / 3
            if now >= next_claim:
                next_claim = now + CLAIM_EVERY_S
                try:
                    self._claim()
                except StoreUnavailable:
                    pass
                except Exception:
                    log.exception("claiming lapsed jobs failed; trying again in a second")
            if self.holder is not None:
                self._check_cancels(self.holder)

    def _renew(self, holder: Holder) -> None:
        with contextlib.suppress(StoreUnavailable):
            self.store.renew(holder.worker_id, holder.held(), self.lease_s)

    def _forgotten(self, holder: Holder) -> bool:
        """Redis lost this worker (it restarted empty): checked every tick while jobs run here,
        so that their polls find them again within a tick, not at the next renewal."""
        if not holder.held():
            return False
        try:
            return self.store.forgot(holder.worker_id)
        except StoreUnavailable:
            return False

    def _claim(self) -> None:
        holder = self.holder
        if holder is None:  # an API process: it ends lapsed jobs and leaves the rest to a worker
            lapsed = self.store.claim_lapsed("", self.lease_s, LAPSED_MESSAGE)
        else:
            lapsed = self.store.claim_lapsed(holder.worker_id, self.lease_s, LAPSED_MESSAGE, holder.held())
        for item in lapsed:
            if item.taken_over and holder is not None:
                log.warning("job %s: its worker stopped before it began; running it here", item.job_id)
                holder.take_over(JobRequest.from_dict(item.request), item.session_id)
            else:
                log.warning("job %s: its worker stopped mid-answer; it ended with an error", item.job_id)
        if holder is not None:
            for item in self.store.unsaved():
                self._keep_interrupted(holder, item)

    def _keep_interrupted(self, holder: Holder, item: Lapsed) -> None:
        """Store what a job ended by a reaper (here or in an API process) had streamed."""
        said = in_flight(item.chunks)
        text, thought = said.content, said.reasoning
        if item.session_id is None or not (text or thought):
            return
        parts = ([Part.of_reasoning(thought)] if thought else []) + ([Part.of_text(text)] if text else [])
        backend, model = holder.answered_by
        msg = Message(role="assistant", parts=parts, backend=backend, model_id=model,
                      stop_reason="error", raw_stop_reason="error: the worker stopped")  # fmt: skip
        try:
            holder.transcripts.append_message(item.session_id, msg)
        except Exception:
            log.exception("job %s: could not keep the interrupted answer", item.job_id)

    def _check_cancels(self, holder: Holder) -> None:
        # Only quiet jobs need a look (in a tool, waiting for the model, queued): an
        # append already reports the cancel mark, and this also refreshes their TTL.
        ids = holder.quiet(time.monotonic() - self.interval)
        if not ids:
            return
        try:
            wanted = self.store.cancel_requested(ids)
        except StoreUnavailable:
            return
        if wanted:
            holder.cancel(wanted)
