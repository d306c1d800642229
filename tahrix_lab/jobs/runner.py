"""The runner: starts jobs, runs ``run_agent`` for each in a bounded pool.

``submit`` does the quick part at once (session, budget check, the user's
message in the transcript, the job in the store) and queues the run; one of
``workers`` threads takes it, maps each loop tuple to a chunk with
``to_chunk`` and appends it to the job store. A job ends ``done``, ``error``
(the loop's calm message) or ``cancelled``.

Cancelling is cooperative: the API marks the job in the store; the runner
sees the mark (on the next append, or within ``watch_interval`` from a
watcher thread when the run is quiet, e.g. inside a tool) and sets the
loop's ``cancel`` event. The loop persists what was produced and stops; no
thread is ever killed.

If the job store fails mid-run (Redis down), the run still goes to the end
so the transcript in DuckDB is complete; the job then ends with status
``error`` as soon as the store is back (or the runner gives up after
``store_grace_s``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import BudgetExceeded, ConfigurationError, UserFacingError
from tahrix_lab.agent.loop import LoopEvent, run_agent
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part, Session, new_id
from tahrix_lab.flow import Chunk, to_chunk
from tahrix_lab.jobs.integration import ChatIntegration, JobIntegration
from tahrix_lab.jobs.store import JobStatus, JobStore, StoreUnavailable

log = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = (
    "The live view of this answer was interrupted because the job store was unreachable. "
    "The answer itself was saved in the conversation; reload the session to read it."
)
INTERNAL_MESSAGE = (
    "Something went wrong on our side while answering. The details are in the log for the operator."
)


@dataclass
class JobRequest:
    """One question to answer; ``job_id`` is chosen by whoever accepts the request."""

    user: str
    message: str
    case_id: str | None = None
    session_id: str | None = None
    history: list[dict[str, Any]] | None = None
    job_id: str = field(default_factory=new_id)

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "message": self.message, "case_id": self.case_id,
                "session_id": self.session_id, "history": self.history, "job_id": self.job_id}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRequest:
        return cls(
            user=str(data["user"]),
            message=str(data["message"]),
            case_id=data.get("case_id"),
            session_id=data.get("session_id"),
            history=data.get("history"),
            job_id=data.get("job_id") or new_id(),
        )


class JobRejected(Exception):
    """A job that cannot start: ``status`` is the HTTP status, ``message`` is for the user."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "field": self.field}


@dataclass
class _Job:
    job_id: str
    user: str
    session: Session
    context: Any
    cancel: threading.Event = field(default_factory=threading.Event)
    last_write: float = 0.0  # monotonic time of the last append (which reports cancels itself)


class JobRunner:
    """See the module docstring. Call ``start()`` before submitting and ``stop()`` at the end."""

    def __init__(
        self,
        store: JobStore,
        *,
        transcripts: TranscriptStore,
        backend: Backend,
        model: str,
        integration: JobIntegration | None = None,
        budget: Budget | None = None,
        workers: int = 4,
        watch_interval: float = 0.1,
        store_grace_s: float = 60.0,
    ) -> None:
        if workers < 1:
            raise ConfigurationError("The job service needs at least one worker.")
        self.store = store
        self.transcripts = transcripts
        self.backend = backend
        self.model = model
        self.integration: JobIntegration = integration or ChatIntegration()
        self.budget = budget
        self.workers = workers
        self.watch_interval = watch_interval
        self.store_grace_s = store_grace_s
        self._pending: deque[_Job] = deque()
        self._running: dict[str, _Job] = {}
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> JobRunner:
        if self._threads:
            return self
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"tahrix-job-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        watcher = threading.Thread(target=self._watch, name="tahrix-job-watch", daemon=True)
        watcher.start()
        self._threads.append(watcher)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what runs, end what waits, and join the threads."""
        self._stopping.set()
        with self._cond:
            queued = list(self._pending)
            self._pending.clear()
            for job in self._running.values():
                job.cancel.set()
            self._cond.notify_all()
        for job in queued:
            self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = []

    @property
    def active(self) -> int:
        with self._cond:
            return len(self._running) + len(self._pending)

    # -- submitting ---------------------------------------------------------
    def submit(self, req: JobRequest) -> dict[str, Any]:
        """Start a job; returns ``{"job_id", "meta"}``. Raises ``JobRejected``."""
        session, context = self.prepare(req)
        job = _Job(req.job_id, req.user, session, context)
        with self._cond:
            free = self.workers - len(self._running)
            position = max(0, len(self._pending) + 1 - free)
            self.store.create(job.job_id, user=req.user, session_id=session.id, queue_position=position)
            self._pending.append(job)
            self._cond.notify()
        meta = {"session_id": session.id, "backend": self.backend.name, "model": self.model,
                "queue_position": position}  # fmt: skip
        return {"job_id": job.job_id, "meta": meta}

    def prepare(self, req: JobRequest) -> tuple[Session, Any]:
        """The quick start of a run: session, budget check, the user's message stored."""
        if self._stopping.is_set():
            raise JobRejected(503, "The job service is shutting down. Please try again in a moment.")
        session = self._session_for(req)
        if self.budget is not None:
            try:
                self.budget.check(req.user, store=self.transcripts)
            except BudgetExceeded as exc:
                raise JobRejected(429, exc.message) from None
        self.transcripts.append_message(session.id, Message.user(req.message))
        return session, self.integration.context_for(self.transcripts, session)

    def stream(self, req: JobRequest) -> Iterator[LoopEvent]:
        """Run one question outside the pool and the job store (the SSE endpoint)."""
        session, context = self.prepare(req)
        return run_agent(session, store=self.transcripts, backend=self.backend, model=self.model,
                         context=context, budget=self.budget, registry=self.integration.registry())  # fmt: skip

    def _session_for(self, req: JobRequest) -> Session:
        if req.session_id is None:
            try:
                session = self.integration.start_session(self.transcripts, user=req.user, case_id=req.case_id)
            except UserFacingError as exc:
                raise JobRejected(422, exc.message, "case_id") from None
            for item in req.history or []:
                role = item.get("role")
                text = str(item.get("text") or "")
                if role == "user":
                    self.transcripts.append_message(session.id, Message.user(text))
                else:
                    msg = Message(role="assistant", parts=[Part.of_text(text)], stop_reason="end_turn")
                    self.transcripts.append_message(session.id, msg)
            return session
        if req.history:
            raise JobRejected(422, "history is only accepted when starting a new session.", "history")
        found: Session | None
        try:
            found = self.transcripts.get_session(req.session_id)
        except ConfigurationError:
            found = None
        if found is None or found.user != req.user:
            raise JobRejected(404, "There is no conversation with this session_id.", "session_id")
        return found

    # -- running ------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
                job = self._pending.popleft()
                self._running[job.job_id] = job
                positions = self._positions()
            self._publish_positions(positions)
            try:
                self._run(job)
            finally:
                with self._cond:
                    self._running.pop(job.job_id, None)
                    positions = self._positions()
                self._publish_positions(positions)

    def _positions(self) -> dict[str, int]:
        busy = len(self._running) >= self.workers
        return {j.job_id: (i + 1 if busy else 0) for i, j in enumerate(self._pending)}

    def _publish_positions(self, positions: dict[str, int]) -> None:
        with contextlib.suppress(StoreUnavailable):
            self.store.set_queue_position(positions)

    def _run(self, job: _Job) -> None:
        status: JobStatus = "done"
        last: list[Chunk] = []
        broken = ended = False
        next_try = 0.0
        if job.cancel.is_set():  # cancelled while it waited
            self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
            return
        try:
            events = run_agent(
                job.session,
                store=self.transcripts,
                backend=self.backend,
                model=self.model,
                context=job.context,
                budget=self.budget,
                registry=self.integration.registry(),
                cancel=job.cancel,
            )
            for event, payload in events:
                chunk = to_chunk(event, payload)
                if event == "done":
                    status = "cancelled" if payload.get("stop_reason") == "cancelled" else "done"
                elif event == "error":
                    status = "error"
                if chunk is None:
                    continue
                if event in ("done", "error"):
                    last.append(chunk)
                    continue
                if broken:
                    # Keep running so the transcript is complete; end the live job as soon
                    # as the store is back (tried at most every half second).
                    if not ended and time.monotonic() >= next_try:
                        ended = self._try_end_after_outage(job)
                        next_try = time.monotonic() + 0.5
                    continue
                try:
                    if self.store.append(job.job_id, [chunk]):
                        job.cancel.set()
                    job.last_write = time.monotonic()
                except StoreUnavailable as exc:
                    log.error("job %s: the job store failed; finishing the run for the transcript: %s",
                              job.job_id, exc)  # fmt: skip
                    broken = True
        except Exception:
            log.exception("job %s failed", job.job_id)
            status = "error"
            last = [{"type": "error", "message": INTERNAL_MESSAGE, "kind": "internal"}]
        if not last:  # a terminal chunk always ends the list: it wakes every long-poll
            last = [{"type": "done", "stop_reason": None}]
        if broken:
            if not ended:
                self._end_after_outage(job)
        else:
            self._end(job, status, last)

    def _end(self, job: _Job, status: JobStatus, last: list[Chunk]) -> None:
        try:
            self.store.finish(job.job_id, status, last)
        except StoreUnavailable:
            self._end_after_outage(job)

    def _try_end_after_outage(self, job: _Job) -> bool:
        chunk: Chunk = {"type": "error", "message": INTERRUPTED_MESSAGE, "kind": "store"}
        try:
            self.store.end_after_outage(job.job_id, user=job.user, session_id=job.session.id, chunk=chunk)
        except StoreUnavailable:
            return False
        log.warning("job %s ended with an error after a job-store outage", job.job_id)
        return True

    def _end_after_outage(self, job: _Job) -> None:
        deadline = time.monotonic() + self.store_grace_s
        while not self._stopping.is_set():
            if self._try_end_after_outage(job):
                return
            if time.monotonic() >= deadline:
                log.error("job %s: the job store stayed unreachable; giving up on its live state", job.job_id)
                return
            time.sleep(0.5)

    # -- cancelling ---------------------------------------------------------
    def _watch(self) -> None:
        while not self._stopping.wait(self.watch_interval):
            # Only quiet jobs need a look (in a tool, waiting for the model, queued): an
            # append already reports the cancel mark, and this also refreshes their TTL.
            quiet = time.monotonic() - self.watch_interval
            with self._cond:
                ids = [j.job_id for j in self._running.values() if j.last_write <= quiet]
                ids += [j.job_id for j in self._pending]
            if not ids:
                continue
            try:
                wanted = self.store.cancel_requested(ids)
            except StoreUnavailable:
                continue
            if not wanted:
                continue
            dropped: list[_Job] = []
            with self._cond:
                for job_id in wanted:
                    if job_id in self._running:
                        self._running[job_id].cancel.set()
                keep = deque(j for j in self._pending if j.job_id not in wanted)
                dropped = [j for j in self._pending if j.job_id in wanted]
                self._pending = keep
                positions = self._positions() if dropped else {}
            for job in dropped:
                self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
            self._publish_positions(positions)
