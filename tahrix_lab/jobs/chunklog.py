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
  one batch may arrive merged into one chunk: the text is the same, in order.
* Clients ignore chunk types they do not know.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.flow import Chunk

JobStatus = Literal["streaming", "done", "error"]
EndStatus = Literal["done", "error", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"done", "error"})
DEFAULT_TTL_S = 180.0
DEFAULT_LEASE_S = 6.0
KEY_PREFIX = "chatjob:"
CAP_MESSAGE = "You already have {n} answers running. Wait for one to finish (or stop one), then ask again."


class StoreUnavailable(Exception):
    """The job store cannot be reached (Redis down); the API answers 503."""


class CapReached(Exception):
    """The user already runs the allowed number of jobs; the API answers 429."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        super().__init__(CAP_MESSAGE.format(n=cap))


@dataclass
class Lapsed:
    """A job whose worker stopped renewing its lease, as one reaper claimed it."""

    job_id: str
    request: dict[str, Any]
    session_id: str | None
    taken_over: bool  # True: it had produced nothing, and the claimer runs it now
    chunks: list[Chunk] = field(default_factory=list)  # the log, to rebuild the in-flight answer


def merge_deltas(chunks: list[Chunk]) -> list[Chunk]:
    """Consecutive plain ``content`` (or ``reasoning``) chunks become one; order is kept."""
    out: list[Chunk] = []
    for chunk in chunks:
        kind = chunk.get("type")
        prev = out[-1] if out else None
        if (
            prev is not None
            and kind in ("content", "reasoning")
            and prev.get("type") == kind
            and len(prev) == 2
            and len(chunk) == 2
        ):
            out[-1] = {"type": kind, "text": (prev.get("text") or "") + (chunk.get("text") or "")}
        else:
            out.append(chunk)
    return out


def in_flight(chunks: list[Chunk]) -> tuple[str, str]:
    """The text and reasoning streamed after the last stored model call (the last ``usage``
    chunk): what the transcript does not hold yet when a worker dies."""
    last = max((i for i, c in enumerate(chunks) if c.get("type") == "usage"), default=-1)
    text = "".join(c.get("text") or "" for c in chunks[last + 1 :] if c.get("type") == "content")
    thought = "".join(c.get("text") or "" for c in chunks[last + 1 :] if c.get("type") == "reasoning")
    return text, thought


@dataclass
class Folder:
    """Folds chunks into the job's summary fields (content, reasoning, tool calls, usage)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    # The JSON fields as last encoded: a writer sends them with every append, and encoding
    # them again per append cost more than the append itself under load.
    encoded: dict[str, str] = field(
        default_factory=lambda: {"tool_calls": "[]", "usage": "{}", "stop_reason": "null"}
    )

    def apply(self, chunk: Chunk) -> tuple[str, str, dict[str, str]]:
        """Update the summary; return (content delta, reasoning delta, changed JSON fields)."""
        text, thought, changed = self._apply(chunk)
        self.encoded.update(changed)
        return text, thought, changed

    def _apply(self, chunk: Chunk) -> tuple[str, str, dict[str, str]]:
        kind = chunk.get("type")
        changed: dict[str, str] = {}
        if kind == "content":
            text = chunk.get("text") or ""
            self.content += text
            return text, "", changed
        if kind == "reasoning":
            text = chunk.get("text") or ""
            self.reasoning += text
            return "", text, changed
        if kind == "tool_call":
            self.tool_calls.append({"id": chunk.get("id"), "name": chunk.get("name"), "status": "running"})
            changed["tool_calls"] = json.dumps(self.tool_calls)
        elif kind == "tool_result":
            for call in self.tool_calls:
                if call["id"] == chunk.get("id"):
                    call["status"] = chunk.get("status", "ok")
            changed["tool_calls"] = json.dumps(self.tool_calls)
        elif kind == "usage":
            self._add_usage(chunk)
            changed["usage"] = json.dumps(self.usage)
        elif kind == "done":
            self.stop_reason = chunk.get("stop_reason")
            changed["stop_reason"] = json.dumps(self.stop_reason)
        elif kind == "error":
            self.stop_reason = "error"
            changed["stop_reason"] = json.dumps("error")
        return "", "", changed

    def end(self, status: EndStatus) -> dict[str, str]:
        """Tool calls still running when the job ends take its status."""
        if not any(c["status"] == "running" for c in self.tool_calls):
            return {}
        for call in self.tool_calls:
            if call["status"] == "running":
                call["status"] = "cancelled" if status == "cancelled" else "error"
        changed = {"tool_calls": json.dumps(self.tool_calls)}
        self.encoded.update(changed)
        return changed

    def fields(self) -> dict[str, str]:
        """Every summary field, as the Redis hash holds them."""
        return {"content": self.content, "reasoning": self.reasoning, **self.encoded}

    def _add_usage(self, chunk: Chunk) -> None:
        u = self.usage
        for k, v in (chunk.get("usage") or {}).items():
            if isinstance(v, int) and k not in ("prompt_tokens", "completion_tokens"):
                u[k] = u.get(k, 0) + v
        # The seed's names beside the neutral ones; an unknown count stays None, never 0.
        u["prompt_tokens"] = u.get("input_tokens")
        u["completion_tokens"] = u.get("output_tokens")
        u["calls"] = u.get("calls", 0) + 1
        cost = chunk.get("cost_usd")
        if "cost_usd" not in u:
            u["cost_usd"] = cost
        elif u["cost_usd"] is not None:
            u["cost_usd"] = None if cost is None else u["cost_usd"] + cost  # unknown stays unknown
        u["model"] = chunk.get("model")
        u["backend"] = chunk.get("backend")


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
    def read(self, job_id: str, since: int = 0, wait: float = 0.0) -> dict[str, Any] | None:
        """The state with chunks from ``since``; ``None`` for an unknown or expired job.

        With ``wait`` > 0 and no chunk at or after ``since`` yet on a running
        job, block until one exists or ``wait`` seconds pass.
        """

    @abstractmethod
    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None,
        linger: float = 0.0,
    ) -> dict[str, Any] | None:  # fmt: skip
        """``read`` for an event loop, parking no thread. With ``user``, another user's job
        reads as ``None``. ``linger``: after a wake-up, wait this long for more chunks."""

    @abstractmethod
    def owner(self, job_id: str) -> str | None: ...

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
