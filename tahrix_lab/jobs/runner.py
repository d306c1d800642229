"""The runner: admits jobs at once, runs ``run_agent`` for each in a bounded pool.

``asubmit`` only admits (the per-user cap, the job in the store, a place in the
queue), so a POST never waits on DuckDB. A worker thread then starts the job
(session, budget, the user's message; a refusal ends it with an ``error`` chunk
of ``kind: "refused"``) and drives the run through ``steps.StreamSteps``.
Cancelling is cooperative: the API marks the job in the store; the runner sees
the mark (reported by the writes, or by the ``contract.Watcher`` when the run
is quiet) and sets the loop's ``cancel`` event.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.approvals import pending_calls
from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.decisions import decide
from tahrix_lab.agent.errors import BudgetExceeded, ConfigurationError, UserFacingError
from tahrix_lab.agent.loop import LoopEvent, run_agent
from tahrix_lab.agent.retry import INTERNAL_ERROR_MESSAGE
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.group_commit import GroupCommit
from tahrix_lab.agent.transcript import Message, Session, new_id
from tahrix_lab.flow import Chunk, to_chunk
from tahrix_lab.jobs.contract import (
    DEFAULT_LEASE_S,
    EndStatus,
    Holder,
    JobRejected,
    JobRequest,
    JobStore,
    StoreUnavailable,
    Watcher,
)
from tahrix_lab.jobs.domain import ChatIntegration, JobIntegration, answer_events, offered
from tahrix_lab.jobs.steps import BurstGate, StreamSteps

# A start: session, the loop's context, messages before the question, the new session's messages.
Prepared = tuple[Session, Any, int | None, list[Message] | None]

log = logging.getLogger(__name__)

DEFAULT_MAX_RUNNING = 8


@dataclass
class _Job:
    req: JobRequest
    resume_session: str | None = None  # taken over after its question was stored there
    cancel: threading.Event = field(default_factory=threading.Event)  # StreamSteps.poke() wakes its waits
    last_write: float = 0.0  # monotonic time of the last append (which reports cancels itself)

    @property
    def job_id(self) -> str:
        return self.req.job_id


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
        max_running_per_user: int | None = DEFAULT_MAX_RUNNING,
        lease_s: float = DEFAULT_LEASE_S,
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
        self.max_running_per_user = max_running_per_user
        self.lease_s = lease_s
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{new_id()[:8]}"
        self._pending: dict[str, _Job] = {}  # the queue, in order (a dict: membership is cheap)
        # Starts waiting together share one transcript transaction: a burst of jobs starts in a
        # few transactions instead of hundreds of threads taking turns; a refusal is refused alone.
        self._starts: GroupCommit[_Job, Prepared] = GroupCommit(
            self._start_one, lambda: transcripts.transaction(buffered=True), alone=(JobRejected,)
        )
        transcripts.group_writes()  # the loops' answers and turn ends, from many run threads
        self._burst = BurstGate()
        self._published: dict[str, int] = {}  # queue positions as last written (absent: 0)
        self._unpublished: set[str] = set()  # queued here, their position not written yet
        self._running: dict[str, _Job] = {}
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watcher: Watcher | None = None
        self._streams = StreamSteps()

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> JobRunner:
        if self._threads:
            return self
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"tahrix-job-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        holder = Holder(self.worker_id, self.transcripts, (self.backend.name, self.model), self._held,
                        self._quiet, self._cancel_marked,
                        lambda req, session: self.enqueue(req, resume_session=session))  # fmt: skip
        self._watcher = Watcher(self.store, self.lease_s, self.watch_interval, holder).start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what runs, end what waits, and join the threads."""
        self._stopping.set()
        with self._cond:
            queued = list(self._pending.values())
            self._pending.clear()
            for job in self._running.values():
                job.cancel.set()
            self._cond.notify_all()
        self._streams.poke()
        for job in queued:
            self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
        deadline = time.monotonic() + timeout
        if self._watcher is not None:
            self._watcher.stop(timeout)
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = []
        self._streams.close(max(0.5, deadline - time.monotonic()))

    def ready(self) -> dict[str, bool]:
        """Readiness of this process's side: worker threads alive, the transcript writer answers."""
        workers = any(t.is_alive() for t in self._threads) and not self._stopping.is_set()
        try:
            self.transcripts.cursor().execute("SELECT 1").fetchall()
            writer = True
        except Exception:
            writer = False
        return {"worker": workers, "transcripts": writer}

    # -- admission ----------------------------------------------------------
    async def asubmit(self, req: JobRequest) -> dict[str, Any]:
        """Admit and queue a job on the API's event loop (parking no thread); returns ``{"job_id",
        "meta"}`` at once. Raises ``JobRejected`` (429 at the per-user cap, 503 while stopping)."""
        if self._stopping.is_set():
            raise JobRejected(503, "The job service is shutting down. Please try again in a moment.")
        with self._cond:
            position = max(0, len(self._pending) + 1 - (self.workers - len(self._running)))
        await self.store.acreate(req.job_id, user=req.user, request=req.to_dict(), queue_position=position,
                                 max_running=self.max_running_per_user)  # fmt: skip
        self.admitted()
        self.enqueue(req)
        meta = {"session_id": req.session_id, "backend": self.backend.name, "model": self.model,
                "queue_position": position}  # fmt: skip
        return {"job_id": req.job_id, "meta": meta}

    def admitted(self) -> None:
        """Note an admission (here or in an API process): starts wait while they come in a burst."""
        self._burst.admitted()

    def enqueue(self, req: JobRequest, *, resume_session: str | None = None) -> None:
        """Queue an admitted job for a worker thread (from ``submit``, the Redis intake, a takeover)."""
        with self._cond:
            if req.job_id in self._running or req.job_id in self._pending:
                return  # claimed after its lease lapsed and popped from the queue: run it once
            self.store.take(req.job_id, user=req.user, request=req.to_dict())
            self._pending[req.job_id] = _Job(req, resume_session)
            self._unpublished.add(req.job_id)  # not written by this runner yet: at the next change
            if not self._burst.watching:  # else the watcher wakes the others when it pauses
                self._cond.notify()

    def prepare(self, req: JobRequest) -> Prepared:
        """Session, budget check, the user's message stored: a ``Prepared`` (a new session's
        messages are handed to the loop, which need not read them back)."""
        session, written = self._session_for(req)
        if self.budget is not None:
            try:
                self.budget.check(req.user, store=self.transcripts)
            except BudgetExceeded as exc:
                raise JobRejected(429, exc.message) from None
        before = len(written) if written is not None else len(self.transcripts.load_messages(session.id))
        # The integration may refuse the session (a revoked case): ask before storing the question.
        context = self.integration.context_for(self.transcripts, session)
        if req.decision is not None:  # no question: the decision goes on from the call that waits
            self._check_waiting(session, str(req.decision.get("call_id")))
            return session, context, before, None
        question = self.transcripts.append_message(session.id, Message.user(req.message))
        history = [*written, question] if written is not None else None
        return session, context, before, history

    def _check_waiting(self, session: Session, call_id: str) -> None:
        if not any(c.id == call_id for c in pending_calls(self.transcripts.load_messages(session.id))):
            raise JobRejected(
                409, "No call with this id waits for approval in this conversation: it was decided already, "
                "or a new question was asked since.", "call_id",
            )  # fmt: skip

    def _session_for(self, req: JobRequest) -> tuple[Session, list[Message] | None]:
        if req.session_id is None:
            try:
                session = self.integration.start_session(self.transcripts, user=req.user, case_id=req.case_id)
            except UserFacingError as exc:
                raise JobRejected(422, exc.message, "case_id") from None
            written: list[Message] = []
            if req.history:
                written.append(self.transcripts.append_message(session.id, client_history(req.history)))
            return session, written
        if req.history:
            raise JobRejected(422, "history is only accepted when starting a new session.", "history")
        return self.own_session(req.session_id, req.user), None

    def own_session(self, session_id: str, user: str) -> Session:
        found: Session | None = None
        with contextlib.suppress(ConfigurationError):
            found = self.transcripts.get_session(session_id)
        if found is None or found.user != user or not self.may_open(user, found):
            raise JobRejected(404, "There is no conversation with this session_id.", "session_id")
        return found

    def may_open(self, user: str, session: Session) -> bool:
        """The integration's ``may_open_session`` (a case the user may no longer open: no), else yes."""
        may = offered(self.integration, "may_open_session")
        return may is None or bool(may(user, session))

    # -- running ------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
            self._burst.wait()  # admissions first (steps.BurstGate)
            with self._cond:
                if not self._pending:
                    continue
                job = self._pending.pop(next(iter(self._pending)))
                if self._pending:
                    self._cond.notify()  # the next idle worker takes the next job
                self._running[job.job_id] = job
                positions = self._positions()
            self._publish_positions(positions)
            try:
                self._run(job)
            except Exception:
                log.exception("job %s failed", job.job_id)
            finally:
                with self._cond:
                    self._running.pop(job.job_id, None)
                    positions = self._positions()
                self._publish_positions(positions)

    def _positions(self) -> dict[str, int]:
        """Under the lock: the queue positions that changed since last published, looking only at
        what can have changed (a burst of n jobs would otherwise scan and write n positions at each
        of n starts). They count up only while every worker is busy; otherwise each is 0."""
        busy = len(self._running) >= self.workers
        now = {k: i + 1 for i, k in enumerate(self._pending)} if busy else {}
        changed = {k: v for k, v in now.items() if self._published.get(k) != v}
        for k in (*self._published, *self._unpublished):
            if k not in now and k in self._pending:
                changed[k] = 0
        self._unpublished.clear()
        self._published = now
        return changed

    # -- for the watcher (contract.Holder) ----------------------------------------------
    def _held(self) -> list[str]:
        with self._cond:
            return [*self._running, *self._pending]

    def _quiet(self, since: float) -> list[str]:
        with self._cond:
            return [j.job_id for j in self._running.values() if j.last_write <= since] + list(self._pending)

    def _cancel_marked(self, wanted: set[str]) -> None:
        with self._cond:
            for job_id in wanted:
                if job_id in self._running:
                    self._running[job_id].cancel.set()
            self._streams.poke()
            dropped = [self._pending.pop(k) for k in list(self._pending) if k in wanted]
            positions = self._positions() if dropped else {}
        for job in dropped:
            self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
        self._publish_positions(positions)

    def _publish_positions(self, positions: dict[str, int]) -> None:
        with contextlib.suppress(StoreUnavailable):
            self.store.set_queue_position(positions)

    def _start_one(self, job: _Job) -> Prepared:  # inside the group's transaction
        if job.resume_session is not None:  # taken over: the question is already stored
            session = self.own_session(job.resume_session, job.req.user)
            return session, self.integration.context_for(self.transcripts, session), None, None
        return self.prepare(job.req)

    def _run(self, job: _Job) -> None:
        if job.cancel.is_set():  # cancelled while it waited
            self._end(job, "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
            return
        try:
            session, context, before, history = self._starts.run(job)
        except JobRejected as exc:
            refused = {"type": "error", "message": exc.message, "kind": "refused", "status": exc.status,
                       "field": exc.field}  # fmt: skip
            self._end(job, "error", [refused])
            return
        if before is not None:  # the question is committed: say where its session is
            with contextlib.suppress(StoreUnavailable):
                self.store.set_session(job.job_id, session.id, message=job.req.message, history_len=before)
        status: EndStatus = "done"
        last: list[Chunk] = []

        def take(event: str, payload: dict[str, Any]) -> None:  # on this thread or the streams' loop
            nonlocal status
            chunk = to_chunk(event, payload)
            if event == "done":
                status = "cancelled" if payload.get("stop_reason") == "cancelled" else "done"
            elif event == "error":
                status = "error"
            if chunk is None:
                return
            if event in ("done", "error"):
                last.append(chunk)
                return
            # Queued, not waited on: the store writes in batches and retries through outages,
            # so the run (and its transcript) goes on whatever Redis does.
            if self.store.append(job.job_id, [chunk]):
                job.cancel.set()
            job.last_write = time.monotonic()

        def events_for(backend: Backend) -> Iterator[LoopEvent]:
            common = {"backend": backend, "model": self.model, "context": context, "budget": self.budget,
                      "registry": self.integration.registry(), "cancel": job.cancel}  # fmt: skip
            if job.req.decision is not None:  # the signed-in user decides, never the model
                d = job.req.decision
                try:
                    events = decide(self.transcripts, session, str(d["call_id"]), approve=bool(d["approve"]),
                                    by=job.req.user, reason=d.get("reason"), **common)  # fmt: skip
                except UserFacingError as exc:  # decided meanwhile (a job taken over after a crash)
                    events = iter([("error", {"message": exc.message, "kind": "refused"})])
            else:
                events = run_agent(session, store=self.transcripts, history=history, **common)
            return answer_events(self.integration, session, events)

        try:
            self._streams.drive(self.backend, events_for, take, job.cancel)
        except Exception:
            log.exception("job %s failed", job.job_id)
            status = "error"
            last = [{"type": "error", "message": INTERNAL_ERROR_MESSAGE, "kind": "internal"}]
        if not last:  # a terminal chunk always ends the list: it wakes every long-poll
            last = [{"type": "done", "stop_reason": None}]
        self._end(job, status, last)

    def _end(self, job: _Job, status: EndStatus, last: list[Chunk]) -> None:
        try:
            self.store.finish(job.job_id, status, last)
        except StoreUnavailable as exc:
            log.error(
                "job %s: its end could not be written (%s); the transcript is complete", job.job_id, exc
            )


CLIENT_HISTORY = "Earlier conversation, as supplied by the client (not checked; not this assistant's words):"


def client_history(items: list[dict[str, Any]]) -> Message:
    """A client's ``history`` as ONE user message saying where it came from: a client cannot
    write an ``assistant`` turn. (The seed's chat messages say ``content``; ours say ``text``.)"""
    lines = [f"[{item.get('role')}] {item.get('text') or item.get('content') or ''}" for item in items]
    return Message.user("\n".join([CLIENT_HISTORY, *lines]))
