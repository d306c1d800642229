"""The chunk-log contract every job store keeps (memory, Redis).

A job is an append-only log of chunks plus a summary folded from it. State of
one job, as the service returns it::

    {"status": "streaming"|"done"|"error", "stop_reason": str|None, "content": str,
     "reasoning": str, "chunks": [...], "next": int, "tool_calls": [{"id", "name", "status"}],
     "usage": {...}, "session_id": str|None, "queue_position": int}

Rules every store keeps:

* Chunk ``n`` keeps index ``n`` for the life of the job: a client that passes
  ``since`` never misses a chunk and never sees one twice. When Redis loses a
  job (restarted empty), its writer writes the whole log again under the same
  indexes, so numbering continues and the end chunk reaches every client at its
  ``since`` (the one rule; there is no reset).
* A job ends with a terminal chunk (``done`` or ``error``) and a terminal
  status. A stopped job ends ``done`` with ``stop_reason: "cancelled"``: a
  client written to the seed's contract (which knows ``streaming|done|error``)
  stops on it.
* ``usage`` carries the seed's ``prompt_tokens``/``completion_tokens`` beside
  the neutral ``input_tokens``/``output_tokens`` (unknown stays ``None``).
* Consecutive text deltas of one kind (``content``, ``reasoning``) written in
  one batch may arrive merged into one chunk (``flow.chunklog.merge``, the one
  rule): the text is the same, in order. The summary is ``flow.chunklog.Fold``.
* Clients ignore chunk types they do not know.

Leases (a shared store): every live process runs one ``Watcher`` thread that
claims, once a second, the jobs whose worker stopped renewing: one that had
produced nothing is run again by a worker, any other ends with a calm
``error`` chunk, so a job whose worker died ends within a lease and a second
even when no worker is alive (API processes claim too). In a worker (a
``Holder`` given) it also renews the leases of the process's jobs (every
``lease_s / 3``, and at once when Redis restarted empty and forgot the worker:
that writes its jobs anew), keeps the interrupted answers of jobs a reaper
ended (``JobStore.unsaved``; an API process never opens the transcripts), and
looks for cancel marks on quiet jobs (a write reports the mark on the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part, new_id
from tahrix_lab.flow import Chunk
from tahrix_lab.flow.chunklog import in_flight

log = logging.getLogger(__name__)

JobStatus = Literal["streaming", "done", "error"]
EndStatus = Literal["done", "error", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"done", "error"})
DEFAULT_TTL_S = 180.0
DEFAULT_LEASE_S = 6.0
KEY_PREFIX = "chatjob:"
CAP_MESSAGE = "You already have {n} answers running. Wait for one to finish (or stop one), then ask again."


class StoreUnavailable(Exception):
    """The job store cannot be reached (Redis down); the API answers 503."""


@dataclass
class Lapsed:
    """A job whose worker stopped renewing its lease, as one reaper claimed it."""

    job_id: str
    request: dict[str, Any]
    session_id: str | None
    taken_over: bool  # True: it had produced nothing, and the claimer runs it now
    chunks: list[Chunk] = field(default_factory=list)  # the log, to rebuild the in-flight answer


def wake(fut: asyncio.Future[None]) -> None:
    """Settle a parked poll's future (once: a timer and a write may both try)."""
    if not fut.done():
        fut.set_result(None)


def end_status(status: EndStatus) -> JobStatus:
    """A cancelled job reads as ``done`` (with ``stop_reason: cancelled``)."""
    return "error" if status == "error" else "done"


def state(header: dict[str, Any], chunks: list[Chunk], since: int, total: int) -> dict[str, Any]:
    """The service's view of a job (``user`` is for the API's ownership check, never sent)."""
    return {
        "status": header.get("status", "streaming"),
        "stop_reason": header.get("stop_reason"),
        "content": header.get("content", ""),
        "reasoning": header.get("reasoning", ""),
        "chunks": chunks,
        "next": max(total, since),
        "tool_calls": header.get("tool_calls", []),
        "usage": header.get("usage", {}),
        "session_id": header.get("session_id") or None,
        "queue_position": int(header.get("queue_position", 0)),
        "user": header.get("user"),
    }


class JobStore(ABC):
    """Where jobs live. The runner writes (one writer per job); the API reads.

    ``append`` does not wait for the write: a store may batch writes of many
    jobs. ``finish`` waits until the end is written (or the store gives up).
    """

    ttl: float

    @abstractmethod
    def create(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        """Admit a job (queued, no session yet). Raises ``CapReached`` when ``user`` already
        has ``max_running`` jobs that have not ended. With ``enqueue`` (a shared store) the
        request is also queued for a worker process; returns that queue's length."""

    async def acreate(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        """``create`` for an event loop (the in-process store answers inline)."""
        return self.create(job_id, user=user, request=request, queue_position=queue_position,
                           max_running=max_running, enqueue=enqueue)  # fmt: skip

    def take(self, job_id: str, *, user: str, request: dict[str, Any]) -> None:  # noqa: B027
        """A worker of this process runs the job from now on."""

    @abstractmethod
    def set_session(self, job_id: str, session_id: str, *, message: str, history_len: int) -> None:
        """The worker started the job's session: poll answers and the history endpoint know it."""

    @abstractmethod
    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        """Queue chunks for writing, in order; returns True once a cancel was seen."""

    @abstractmethod
    def finish(self, job_id: str, status: EndStatus, chunks: list[Chunk]) -> None:
        """Append the last chunks and set the final status, together."""

    @abstractmethod
    def read(self, job_id: str, since: int = 0) -> dict[str, Any] | None:
        """The state with chunks from ``since``; ``None`` for an unknown or expired job."""

    @abstractmethod
    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None,
        linger: float = 0.0,
    ) -> dict[str, Any] | None:  # fmt: skip
        """``read`` for an event loop, parking no thread: with ``wait`` > 0 and no chunk from
        ``since`` yet on a running job, until one exists or ``wait`` seconds pass. With ``user``,
        another user's job reads as ``None``. ``linger``: after a wake-up, wait this long for
        more chunks."""

    @abstractmethod
    def request_cancel(self, job_id: str) -> bool:
        """Mark the job for cancelling; False when it does not exist."""

    @abstractmethod
    def cancel_requested(self, job_ids: list[str]) -> set[str]:
        """Which of these jobs were asked to cancel (also refreshes their TTL)."""

    @abstractmethod
    def set_queue_position(self, positions: dict[str, int]) -> None: ...

    @abstractmethod
    def session_job(self, session_id: str) -> dict[str, Any] | None:
        """The job running in this session: ``{job_id, message, history_len}`` or ``None``."""

    # -- leases (only a shared store needs them: one process cannot outlive itself) --
    def renew(self, worker_id: str, job_ids: list[str], lease_s: float) -> None:  # noqa: B027
        """The worker still runs these jobs (and is alive)."""

    def claim_lapsed(
        self, worker_id: str, lease_s: float, message: str, held: list[str] | None = None
    ) -> list[Lapsed]:
        """Jobs whose lease lapsed: each is ended with an ``error`` chunk carrying ``message``,
        or, if it had produced nothing, handed to ``worker_id`` (``""``: an API process, which
        leaves those for a worker). The ``held`` jobs (the claimer's own) are renewed first and
        never claimed. The ended ones are kept for ``unsaved``."""
        return []

    def unsaved(self, limit: int = 50) -> list[Lapsed]:
        """Jobs a reaper ended mid-answer, each handed to one caller with its chunk log, so
        that the caller (a worker) keeps the interrupted answer in the transcript."""
        return []

    def forgot(self, worker_id: str) -> bool:
        """True when the store no longer knows this worker (Redis restarted empty): its jobs
        are to be written anew now."""
        return False

    def workers_alive(self) -> int:
        """Workers that renewed recently (a process with a runner counts itself)."""
        return 0

    def flush(self, timeout: float = 10.0) -> None:  # noqa: B027 - optional hook
        """Wait until every chunk queued so far is written (a store that batches)."""

    def ping(self) -> None:  # noqa: B027 - optional hook
        """Raise ``StoreUnavailable`` when the store cannot answer now."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what ``aread`` opened on the current event loop."""


@dataclass
class JobRequest:
    """One question to answer, or with ``decision`` ({call_id, approve, reason}) the user's decision on
    a call of ``session_id`` that waits for approval, and the run that follows it (``message`` is
    then empty); ``job_id`` is chosen by whoever accepts the request."""

    user: str
    message: str
    case_id: str | None = None
    session_id: str | None = None
    history: list[dict[str, Any]] | None = None
    job_id: str = field(default_factory=new_id)
    decision: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:  # a literal: asdict's deep copy costs every POST
        return {"user": self.user, "message": self.message, "case_id": self.case_id,
                "session_id": self.session_id, "history": self.history, "job_id": self.job_id,
                "decision": self.decision}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRequest:
        return cls(
            user=str(data["user"]),
            message=str(data["message"]),
            case_id=data.get("case_id"),
            session_id=data.get("session_id"),
            history=data.get("history"),
            job_id=data.get("job_id") or new_id(),
            decision=data.get("decision"),
        )


class JobRejected(Exception):
    """A job that cannot start: ``status`` is the HTTP status, ``message`` is for the user."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


class CapReached(JobRejected):
    """The user already runs the allowed number of jobs: a 429."""

    def __init__(self, cap: int) -> None:
        super().__init__(429, CAP_MESSAGE.format(n=cap))


# -- leases ---------------------------------------------------------------------------

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

    def _run(self) -> None:
        next_renew = next_claim = 0.0
        while not self._stopping.wait(self.interval):
            now = time.monotonic()
            holder = self.holder
            if holder is not None and (now >= next_renew or self._forgotten(holder)):
                with contextlib.suppress(StoreUnavailable):  # after a Redis restart: our jobs anew at once
                    self.store.renew(holder.worker_id, holder.held(), self.lease_s)
                next_renew = now + self.lease_s / 3
            if now >= next_claim:
                next_claim = now + CLAIM_EVERY_S
                try:
                    self._claim()
                except StoreUnavailable:
                    pass
                except Exception:
                    log.exception("claiming lapsed jobs failed; trying again in a second")
            if holder is not None:
                self._check_cancels(holder)

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
