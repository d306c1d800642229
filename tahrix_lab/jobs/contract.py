"""The chunk-log contract every job store keeps (memory, Redis), and the lease watcher.

A job is an append-only log of chunks plus a summary folded from it (``state``;
docs/service.md has the design). Rules every store keeps:

* Chunk ``n`` keeps index ``n`` for the life of the job, so a client passing
  ``since`` never misses a chunk nor sees one twice; a job Redis lost is written
  again under the same indexes (the one rule; there is no reset).
* A job ends with a terminal chunk and status (``done`` or ``error``); a stopped
  job ends ``done`` with ``stop_reason: "cancelled"`` (the seed's clients stop on it).
* ``usage`` carries the seed's ``prompt_tokens``/``completion_tokens`` beside
  ``input_tokens``/``output_tokens`` (unknown stays ``None``).
* Consecutive text deltas of one kind in one batch may arrive merged
  (``flow.chunklog.merge``); the summary is ``flow.chunklog.Fold``.
* Clients ignore chunk types they do not know.

Leases (a shared store): each live process runs one ``Watcher`` thread that
claims, once a second, the jobs whose worker stopped renewing. In a worker (a
``Holder`` given) it also renews the process's leases, stores the answers a
reaper interrupted and looks for cancel marks on quiet jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
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


async def long_poll(
    read: Callable[[bool], Awaitable[dict[str, Any] | None]],
    register: Callable[[], asyncio.Future[None]],
    unregister: Callable[[asyncio.Future[None]], None],
    wait: float,
    user: str | None,
    linger: Callable[[], float],
) -> dict[str, Any] | None:
    """Every store's ``aread``: ``read(woken=False)`` the state; while the job runs with no
    chunk from ``since`` yet, wait (parking no thread) for a write to settle a ``register``-ed
    future or for ``wait`` s to pass, then ``linger()`` s more for others, and ``read(True)``
    again. Another ``user``'s job reads as ``None``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, wait)
    fut = register() if wait > 0 else None  # before reading: a write in between still wakes it
    try:
        got = await read(False)
        if got is None or (user is not None and got.get("user") != user):
            return None
        while fut is not None and not got["chunks"] and got["status"] not in TERMINAL:
            if loop.time() >= deadline:
                break
            timer = loop.call_at(deadline, wake, fut)  # one timer: cheaper than wait_for
            try:
                await fut
            finally:
                timer.cancel()
            if loop.time() < deadline:
                unregister(fut)
                fut = register()
                if (pause := linger()) > 0:  # under load: more chunks gather into this answer
                    await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
            got = await read(True)
            if got is None:
                return None
        return got
    finally:
        if fut is not None:
            unregister(fut)


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
    """Where jobs live. The runner writes (one writer per job); the API reads. ``append`` does
    not wait for the write (a store may batch many jobs'); ``finish`` waits until the end is
    written (or the store gives up)."""

    ttl: float

    @abstractmethod
    def create(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        """Admit a job; ``CapReached`` when ``user`` has ``max_running`` jobs not ended. With
        ``enqueue`` (a shared store) also queue it for a worker; returns that queue's length."""

    async def acreate(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        return self.create(job_id, user=user, request=request, queue_position=queue_position,
                           max_running=max_running, enqueue=enqueue)  # fmt: skip

    def take(self, job_id: str, *, user: str, request: dict[str, Any]) -> None:  # noqa: B027
        """A worker of this process runs the job from now on."""

    @abstractmethod
    def set_session(self, job_id: str, session_id: str, *, message: str, history_len: int) -> None: ...

    @abstractmethod
    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        """Queue chunks for writing, in order; True once a cancel was seen."""

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
        """``read`` as a long-poll parking no thread (``long_poll``, with ``linger`` s under load)."""

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
        """End each lapsed job with an ``error`` chunk of ``message`` (kept for ``unsaved``) or,
        if it had produced nothing, hand it to ``worker_id`` (``""``: an API process leaves it
        for a worker). The ``held`` jobs (the claimer's own) are renewed first, never claimed."""
        return []

    def unsaved(self, limit: int = 50) -> list[Lapsed]:
        """Jobs a reaper ended mid-answer, each handed to one worker to store the answer."""
        return []

    def forgot(self, worker_id: str) -> bool:
        """Redis restarted empty and lost this worker: its jobs are to be written anew."""
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

    async def aopen(self) -> None:  # noqa: B027 - optional hook
        """Ready what ``aread`` uses on the current event loop, before the first request."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what ``aread`` opened on the current event loop."""


@dataclass
class JobRequest:
    """A question to answer or, with ``decision`` ({call_id, approve, reason}, ``message`` empty),
    the user's decision on a call of ``session_id`` waiting for approval and the run after it."""

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
        optional = {k: data.get(k) for k in ("case_id", "session_id", "history", "decision")}
        return cls(str(data["user"]), str(data["message"]), job_id=data.get("job_id") or new_id(), **optional)


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
        try:
            return bool(holder.held()) and self.store.forgot(holder.worker_id)
        except StoreUnavailable:
            return False

    def _claim(self) -> None:
        holder = self.holder  # None: an API process, which leaves lapsed jobs not begun to a worker
        worker_id, held = (holder.worker_id, holder.held()) if holder is not None else ("", None)
        for item in self.store.claim_lapsed(worker_id, self.lease_s, LAPSED_MESSAGE, held):
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
        try:
            wanted = self.store.cancel_requested(ids) if ids else set()
        except StoreUnavailable:
            return
        if wanted:
            holder.cancel(wanted)
