"""Job state: an append-only list of chunks per job plus a folded summary.

``MemoryJobStore`` keeps jobs in this process (the embedded default);
``RedisJobStore`` keeps them in Redis so several processes share them.

State of one job, as the service returns it::

    {"status": "streaming"|"done"|"error"|"cancelled", "content": str, "reasoning": str,
     "chunks": [...], "next": int, "tool_calls": [{"id", "name", "status"}], "usage": {...},
     "session_id": str, "queue_position": int}

Chunks are never trimmed while a job lives: a poller that passes ``since``
never misses one. A job lives while it runs and for ``ttl`` seconds (180 by
default) after its last write, so a finished job stays readable for 180 s.

Redis layout (one job)::

    chatjob:{job_id}          hash: user, session_id, status, content, reasoning,
                              tool_calls (JSON), usage (JSON), next, queue_position, cancel
    chatjob:{job_id}:chunks   stream: entry id ``0-{n}`` holds chunk number n-1

Each append is one Lua script: the stream entry, the summary fields and the
TTLs change together, in order, or not at all. The entry id is the chunk's
index, so ``since=N`` is ``XRANGE (0-N +`` and a long-poll is
``XREAD BLOCK … 0-N``, which returns the moment a later chunk is added and
cannot miss one added between two reads (the id says where to resume).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.flow import Chunk

JobStatus = Literal["streaming", "done", "error", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"done", "error", "cancelled"})
DEFAULT_TTL_S = 180.0
KEY_PREFIX = "chatjob:"
# Longer than the longest long-poll (25 s): a blocking XREAD must not time out first.
SOCKET_TIMEOUT_S = 35.0
# Every waiting long-poll, queued submit and running job holds a connection for a while;
# redis-py's default pool (100) would refuse the 101st with "Too many connections".
MAX_CONNECTIONS = 4096


class StoreUnavailable(Exception):
    """The job store cannot be reached (Redis down); the API answers 503."""


@dataclass
class Folder:
    """Folds chunks into the job's summary fields (content, reasoning, tool calls, usage)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)

    def apply(self, chunk: Chunk) -> tuple[str, str, dict[str, str]]:
        """Update the summary; return (content delta, reasoning delta, changed JSON fields)."""
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
        return "", "", changed

    def end(self, status: str) -> dict[str, str]:
        """Tool calls still running when the job ends take its status."""
        if not any(c["status"] == "running" for c in self.tool_calls):
            return {}
        for call in self.tool_calls:
            if call["status"] == "running":
                call["status"] = "cancelled" if status == "cancelled" else "error"
        return {"tool_calls": json.dumps(self.tool_calls)}

    def _add_usage(self, chunk: Chunk) -> None:
        u = self.usage
        for k, v in (chunk.get("usage") or {}).items():
            if isinstance(v, int):
                u[k] = u.get(k, 0) + v
        u["calls"] = u.get("calls", 0) + 1
        cost = chunk.get("cost_usd")
        if "cost_usd" not in u:
            u["cost_usd"] = cost
        elif u["cost_usd"] is not None:
            u["cost_usd"] = None if cost is None else u["cost_usd"] + cost  # unknown stays unknown
        u["model"] = chunk.get("model")
        u["backend"] = chunk.get("backend")


class JobStore(ABC):
    """Where jobs live. The runner writes (one writer per job); the API reads."""

    ttl: float

    @abstractmethod
    def create(self, job_id: str, *, user: str, session_id: str, queue_position: int = 0) -> None: ...

    @abstractmethod
    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        """Append chunks in order; returns True when a cancel was requested."""

    @abstractmethod
    def finish(self, job_id: str, status: JobStatus, chunks: list[Chunk]) -> None:
        """Append the last chunks and set the final status, atomically."""

    @abstractmethod
    def read(self, job_id: str, since: int = 0, wait: float = 0.0) -> dict[str, Any] | None:
        """The state with chunks from ``since``; ``None`` for an unknown or expired job.

        With ``wait`` > 0 and no chunk at or after ``since`` yet on a running
        job, block until one exists or ``wait`` seconds pass.
        """

    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None
    ) -> dict[str, Any] | None:
        """``read`` for an event loop (the API), without parking a thread while it waits
        (both stores here override it). With ``user``, another user's job reads as
        ``None`` and is never waited on."""
        import anyio

        state = await anyio.to_thread.run_sync(self.read, job_id, since, 0.0)
        if state is None or (user is not None and state.get("user") != user):
            return None
        if state["chunks"] or state["status"] in TERMINAL or wait <= 0:
            return state
        return await anyio.to_thread.run_sync(self.read, job_id, since, wait)

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

    def end_after_outage(self, job_id: str, *, user: str, session_id: str, chunk: Chunk) -> None:
        """End a job whose live state was interrupted with status ``error`` and ``chunk``."""
        self.finish(job_id, "error", [chunk])

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what ``aread`` opened on the current event loop."""


def _state(header: dict[str, Any], chunks: list[Chunk], since: int, total: int) -> dict[str, Any]:
    return {
        "status": header.get("status", "streaming"),
        "content": header.get("content", ""),
        "reasoning": header.get("reasoning", ""),
        "chunks": chunks,
        "next": max(total, since),
        "tool_calls": header.get("tool_calls", []),
        "usage": header.get("usage", {}),
        "session_id": header.get("session_id", ""),
        "queue_position": int(header.get("queue_position", 0)),
        "user": header.get("user"),  # for the API's ownership check; not sent to clients
    }


# -- in-process ------------------------------------------------------------------


@dataclass
class _MemJob:
    user: str
    session_id: str
    folder: Folder = field(default_factory=Folder)
    chunks: list[Chunk] = field(default_factory=list)
    status: str = "streaming"
    queue_position: int = 0
    cancel: bool = False
    expires: float | None = None  # set when the job ends
    cond: threading.Condition | None = None  # long-polls of this job wait here (threads)
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(default_factory=list)

    def wake(self) -> None:
        assert self.cond is not None
        self.cond.notify_all()
        for loop, fut in self.waiters:
            loop.call_soon_threadsafe(_resolve, fut)
        self.waiters.clear()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class MemoryJobStore(JobStore):
    """Jobs in a dict under one lock; each job has its own condition on that lock, so a
    chunk wakes only the long-polls of its own job."""

    def __init__(self, ttl: float = DEFAULT_TTL_S) -> None:
        self.ttl = ttl
        self._jobs: dict[str, _MemJob] = {}
        self._cond = threading.RLock()

    def _get(self, job_id: str) -> _MemJob | None:
        job = self._jobs.get(job_id)
        if job is not None and job.expires is not None and job.expires <= time.monotonic():
            del self._jobs[job_id]
            return None
        return job

    def _purge(self) -> None:
        now = time.monotonic()
        for job_id in [k for k, j in self._jobs.items() if j.expires is not None and j.expires <= now]:
            del self._jobs[job_id]

    def create(self, job_id: str, *, user: str, session_id: str, queue_position: int = 0) -> None:
        with self._cond:
            self._purge()
            self._jobs[job_id] = _MemJob(
                user=user,
                session_id=session_id,
                queue_position=queue_position,
                cond=threading.Condition(self._cond),
            )

    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        with self._cond:
            job = self._get(job_id)
            if job is None:
                return True  # expired under us: nobody can read it, stop working on it
            for chunk in chunks:
                job.folder.apply(chunk)
                job.chunks.append(chunk)
            job.queue_position = 0
            job.wake()
            return job.cancel

    def finish(self, job_id: str, status: JobStatus, chunks: list[Chunk]) -> None:
        with self._cond:
            job = self._get(job_id)
            if job is None:
                return
            for chunk in chunks:
                job.folder.apply(chunk)
                job.chunks.append(chunk)
            job.folder.end(status)
            job.status = status
            job.queue_position = 0
            job.expires = time.monotonic() + self.ttl
            job.wake()

    def read(self, job_id: str, since: int = 0, wait: float = 0.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + max(wait, 0.0)
        with self._cond:
            while True:
                job = self._get(job_id)
                if job is None:
                    return None
                remaining = deadline - time.monotonic()
                if len(job.chunks) > since or job.status in TERMINAL or remaining <= 0:
                    break
                assert job.cond is not None
                job.cond.wait(remaining)
            return self._snapshot(job, since)

    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None
    ) -> dict[str, Any] | None:
        # The lock is only ever held briefly, so reading inline on the loop is fine;
        # waiting is a future that the writer resolves, not a parked thread.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(wait, 0.0)
        while True:
            with self._cond:
                job = self._get(job_id)
                if job is None or (user is not None and job.user != user):
                    return None
                remaining = deadline - loop.time()
                if len(job.chunks) > since or job.status in TERMINAL or remaining <= 0:
                    return self._snapshot(job, since)
                fut: asyncio.Future[None] = loop.create_future()
                job.waiters.append((loop, fut))
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(fut, remaining)
            finally:
                with self._cond:
                    if (loop, fut) in job.waiters:
                        job.waiters.remove((loop, fut))

    def _snapshot(self, job: _MemJob, since: int) -> dict[str, Any]:
        with self._cond:
            f = job.folder
            header = {
                "status": job.status,
                "content": f.content,
                "reasoning": f.reasoning,
                "tool_calls": [dict(c) for c in f.tool_calls],
                "usage": dict(f.usage),
                "session_id": job.session_id,
                "queue_position": job.queue_position,
                "user": job.user,
            }
            return _state(header, list(job.chunks[since:]), since, len(job.chunks))

    def owner(self, job_id: str) -> str | None:
        with self._cond:
            job = self._get(job_id)
            return job.user if job is not None else None

    def request_cancel(self, job_id: str) -> bool:
        with self._cond:
            job = self._get(job_id)
            if job is None:
                return False
            job.cancel = True
            return True

    def cancel_requested(self, job_ids: list[str]) -> set[str]:
        with self._cond:
            return {j for j in job_ids if (job := self._jobs.get(j)) is not None and job.cancel}

    def set_queue_position(self, positions: dict[str, int]) -> None:
        with self._cond:
            for job_id, pos in positions.items():
                job = self._jobs.get(job_id)
                if job is not None:
                    job.queue_position = pos


# -- Redis -----------------------------------------------------------------------

# KEYS: hash, stream. ARGV: ttl, status ("" keeps it), content delta, reasoning delta,
# n chunks, chunk JSON × n, then field/value pairs to set. Returns the cancel flag,
# or -1 when the job no longer exists (expired): it is not recreated.
_APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = tonumber(ARGV[5])
for i = 1, n do
  local idx = redis.call('HINCRBY', KEYS[1], 'next', 1)
  redis.call('XADD', KEYS[2], '0-' .. idx, 'c', ARGV[5 + i])
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'content', (redis.call('HGET', KEYS[1], 'content') or '') .. ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'reasoning', (redis.call('HGET', KEYS[1], 'reasoning') or '') .. ARGV[4])
end
for i = 6 + n, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'status', ARGV[2]) end
redis.call('HSET', KEYS[1], 'queue_position', 0)
local ttl = tonumber(ARGV[1])
redis.call('EXPIRE', KEYS[1], ttl)
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ttl) end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 1 end
return 0
"""

# KEYS: hash, stream. Set the cancel flag only on a job that exists.
_CANCEL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
return 1
"""


# KEYS: hash. ARGV: position, ttl. Only on a job that exists (HSET would recreate it).
_POSITION = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'queue_position', ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"""


def _redis_state(header: dict[str, Any], entries: list[Any], since: int) -> dict[str, Any] | None:
    if not header:
        return None
    for name in ("tool_calls", "usage"):
        header[name] = json.loads(header.get(name) or ("[]" if name == "tool_calls" else "{}"))
    # XRANGE gives {field: value}; through a script each entry's fields are a flat list.
    chunks = [json.loads(fields["c"] if isinstance(fields, dict) else fields[1]) for _id, fields in entries]
    return _state(header, chunks, since, int(header.get("next", 0)))


# KEYS: hash, stream. ARGV: since. The state and the chunks from `since`, in one step.
_READ = """
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return {h, {}} end
return {h, redis.call('XRANGE', KEYS[2], '(0-' .. ARGV[1], '+')}
"""


def _script_state(reply: list[Any], since: int) -> dict[str, Any] | None:
    flat, entries = reply
    header = dict(zip(flat[0::2], flat[1::2], strict=True))
    return _redis_state(header, entries, since)


@dataclass
class _Op:
    """One queued append script call and its outcome."""

    job_id: str
    keys: list[str]
    args: list[Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: int = 0
    error: StoreUnavailable | None = None


def job_key(job_id: str) -> str:
    return f"{KEY_PREFIX}{job_id}"


def redact_url(url: str) -> str:
    """The URL without a password, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


class RedisJobStore(JobStore):
    """Jobs in Redis (see the module docstring for the layout).

    ``check()`` pings at start so a wrong URL fails at once, naming the URL.
    Connection failures surface as ``StoreUnavailable``.
    """

    def __init__(self, url: str, *, ttl: float = DEFAULT_TTL_S, client: Any = None) -> None:
        import redis

        self.url = url
        self.ttl = ttl
        self._redis = redis
        self.client: Any = client or redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=2,
            socket_timeout=SOCKET_TIMEOUT_S,
            health_check_interval=10,
            max_connections=MAX_CONNECTIONS,
        )
        self._append = self.client.register_script(_APPEND)
        self._cancel = self.client.register_script(_CANCEL)
        self._position = self.client.register_script(_POSITION)
        self._folders: dict[str, Folder] = {}  # the writer's own summary of each job it writes
        self._aclient: Any = None
        self._ascript: Any = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._ops: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._writer_thread: threading.Thread | None = None

    def check(self) -> None:
        try:
            self.client.ping()
        except self._redis.RedisError as exc:
            raise StoreUnavailable(
                f"Cannot reach Redis at {redact_url(self.url)}: {exc}. Start redis-server or fix --redis-url."
            ) from None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._redis.RedisError as exc:
            raise StoreUnavailable(f"Redis at {redact_url(self.url)} is unreachable: {exc}") from exc

    def _ttl(self) -> int:
        return max(1, round(self.ttl))

    def create(self, job_id: str, *, user: str, session_id: str, queue_position: int = 0) -> None:
        key = job_key(job_id)
        with self._lock:
            self._folders[job_id] = Folder()
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={
                "user": user,
                "session_id": session_id,
                "status": "streaming",
                "content": "",
                "reasoning": "",
                "tool_calls": "[]",
                "usage": "{}",
                "next": 0,
                "queue_position": queue_position,
            },
        )
        pipe.expire(key, self._ttl())
        self._call(pipe.execute)

    def _folder(self, job_id: str) -> Folder:
        with self._lock:
            return self._folders.setdefault(job_id, Folder())

    def _write(self, job_id: str, chunks: list[Chunk], status: str, extra: dict[str, str]) -> _Op:
        folder = self._folder(job_id)
        content, reasoning, fields = "", "", dict(extra)
        for chunk in chunks:
            c, r, changed = folder.apply(chunk)
            content += c
            reasoning += r
            fields.update(changed)
        if status:
            fields.update(folder.end(status))
        args: list[Any] = [self._ttl(), status, content, reasoning, len(chunks)]
        args += [json.dumps(c, ensure_ascii=False) for c in chunks]
        for k, v in fields.items():
            args += [k, v]
        key = job_key(job_id)
        op = _Op(job_id, [key, key + ":chunks"], args)
        self._writer().put(op)
        return op

    # -- one writer thread: appends from every running job, sent in pipelined batches ----
    # Hundreds of runner threads each doing their own round trip fight over the GIL on
    # every socket call; instead each queues its call and waits, and one thread sends
    # whatever is queued as one pipeline. The FIFO keeps each job's chunks in order and
    # each script call is atomic; a caller still learns its own answer (cancel mark, error).
    def _writer(self) -> queue.SimpleQueue[_Op | None]:
        with self._lock:
            if self._writer_thread is None:
                self._writer_thread = threading.Thread(
                    target=self._drain, name="tahrix-redis-writer", daemon=True
                )
                self._writer_thread.start()
        return self._ops

    def _drain(self) -> None:
        stop = False
        while not stop:
            first = self._ops.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < 512:
                try:
                    nxt = self._ops.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            results: list[Any]
            try:
                pipe = self.client.pipeline(transaction=False)
                for op in batch:
                    self._append(keys=op.keys, args=op.args, client=pipe)
                results = pipe.execute(raise_on_error=False)
            except self._redis.RedisError as exc:
                results = [exc] * len(batch)
            for op, res in zip(batch, results, strict=True):
                if isinstance(res, Exception):
                    op.error = StoreUnavailable(f"Redis at {redact_url(self.url)} is unreachable: {res}")
                else:
                    op.result = int(res)
                op.done.set()

    def _wait(self, op: _Op) -> int:
        if not op.done.wait(SOCKET_TIMEOUT_S + 5):
            raise StoreUnavailable(f"Redis at {redact_url(self.url)} did not answer in time")
        if op.error is not None:
            raise op.error
        return op.result

    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        return self._wait(self._write(job_id, chunks, "", {})) != 0

    def finish(self, job_id: str, status: JobStatus, chunks: list[Chunk]) -> None:
        try:
            self._wait(self._write(job_id, chunks, status, {}))
        finally:
            with self._lock:
                self._folders.pop(job_id, None)

    def end_after_outage(self, job_id: str, *, user: str, session_id: str, chunk: Chunk) -> None:
        """End the job with ``error``; if its keys were lost with a Redis restart, write it anew
        so its poller reads the error instead of a 404."""
        key = job_key(job_id)
        if self._call(self.client.exists, key):
            self.finish(job_id, "error", [chunk])
            return
        status = "error"
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key, key + ":chunks")
        pipe.hset(key, mapping={"user": user, "session_id": session_id, "status": status, "next": 1,
                                "content": "", "reasoning": "", "tool_calls": "[]", "usage": "{}",
                                "queue_position": 0})  # fmt: skip
        pipe.xadd(key + ":chunks", {"c": json.dumps(chunk)}, id="0-1")
        pipe.expire(key, self._ttl())
        pipe.expire(key + ":chunks", self._ttl())
        self._call(pipe.execute)

    def exists(self, job_id: str) -> bool:
        return bool(self._call(self.client.exists, job_key(job_id)))

    def read(self, job_id: str, since: int = 0, wait: float = 0.0) -> dict[str, Any] | None:
        key = job_key(job_id)
        since = max(0, since)
        state = self._read_once(key, since)
        if state is None or state["chunks"] or state["status"] in TERMINAL or wait <= 0:
            return state
        # Block until a chunk after `since` exists; the entry id says where to resume.
        self._call(
            self.client.xread, {key + ":chunks": f"0-{since}"}, count=1, block=max(1, int(wait * 1000))
        )
        return self._read_once(key, since)

    def _read_once(self, key: str, since: int) -> dict[str, Any] | None:
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(key)
        pipe.xrange(key + ":chunks", min=f"(0-{since}", max="+")
        header, entries = self._call(pipe.execute)
        return _redis_state(header, entries, since)

    # -- the API's side: redis.asyncio, so a long-poll parks no thread --------------
    def _async_client(self) -> tuple[Any, Any]:
        import redis.asyncio

        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            self._aclient = redis.asyncio.Redis.from_url(
                self.url,
                decode_responses=True,
                socket_connect_timeout=2,
                socket_timeout=SOCKET_TIMEOUT_S,
                health_check_interval=10,
                max_connections=MAX_CONNECTIONS,
            )
            self._ascript = self._aclient.register_script(_READ)
            self._aloop = loop
        return self._aclient, self._ascript

    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None
    ) -> dict[str, Any] | None:
        # One command per step: the read script (state + chunks, atomically), then at
        # most one XREAD BLOCK and one more read script.
        client, script = self._async_client()
        key = job_key(job_id)
        since = max(0, since)
        try:
            state = _script_state(await script(keys=[key, key + ":chunks"], args=[since]), since)
            if state is None or (user is not None and state.get("user") != user):
                return None
            if state["chunks"] or state["status"] in TERMINAL or wait <= 0:
                return state
            await client.xread({key + ":chunks": f"0-{since}"}, count=1, block=max(1, int(wait * 1000)))
            return _script_state(await script(keys=[key, key + ":chunks"], args=[since]), since)
        except self._redis.RedisError as exc:
            raise StoreUnavailable(f"Redis at {redact_url(self.url)} is unreachable: {exc}") from exc

    def owner(self, job_id: str) -> str | None:
        user = self._call(self.client.hget, job_key(job_id), "user")
        return str(user) if user is not None else None

    def request_cancel(self, job_id: str) -> bool:
        key = job_key(job_id)
        return bool(self._call(self._cancel, keys=[key, key + ":chunks"]))

    def cancel_requested(self, job_ids: list[str]) -> set[str]:
        if not job_ids:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for job_id in job_ids:
            key = job_key(job_id)
            pipe.hget(key, "cancel")
            pipe.expire(key, self._ttl())
            pipe.expire(key + ":chunks", self._ttl())
        out = self._call(pipe.execute)
        return {j for j, flag in zip(job_ids, out[0::3], strict=True) if flag == "1"}

    def set_queue_position(self, positions: dict[str, int]) -> None:
        for job_id, pos in positions.items():
            self._call(self._position, keys=[job_key(job_id)], args=[pos, self._ttl()])

    def close(self) -> None:
        if self._writer_thread is not None:
            self._ops.put(None)
            self._writer_thread.join(SOCKET_TIMEOUT_S)
            self._writer_thread = None
        self.client.close()

    async def aclose(self) -> None:
        if self._aclient is not None and self._aloop is asyncio.get_running_loop():
            await self._aclient.aclose()
        self._aclient = None
