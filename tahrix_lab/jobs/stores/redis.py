"""Jobs in Redis, shared by several processes: key layout and Lua in ``scripts``, the batched
writes in ``writer``, long-poll wake-ups and tails in ``wake`` (the design: docs/service.md).
No command blocks in Redis, so no request outlives its ``wait`` by more than the socket timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from tahrix_lab.agent.secrets import redact_url
from tahrix_lab.flow import Chunk
from tahrix_lab.jobs.contract import (
    DEFAULT_LEASE_S,
    DEFAULT_TTL_S,
    KEY_PREFIX,
    CapReached,
    EndStatus,
    JobStore,
    Lapsed,
    StoreUnavailable,
    long_poll,
    state,
)
from tahrix_lab.jobs.stores import scripts as lua
from tahrix_lab.jobs.stores.wake import ScriptBatcher, Waker
from tahrix_lab.jobs.stores.writer import Writer, job_key

log = logging.getLogger(__name__)

SOCKET_TIMEOUT_S = 2.0  # every command is short: nothing blocks inside Redis
QUEUE_KEY = f"{KEY_PREFIX}queue"

MAX_CONNECTIONS = 4096
ASYNC_POOL = 64


def _options(module: Any) -> dict[str, Any]:
    """One retry, only for a connection that died in the pool (not for a timeout: a frozen
    server would double every wait). ``module``: redis or redis.asyncio."""
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return {"decode_responses": True, "socket_connect_timeout": SOCKET_TIMEOUT_S,
            "socket_timeout": SOCKET_TIMEOUT_S, "health_check_interval": 10,
            "retry": module.retry.Retry(NoBackoff(), 1), "retry_on_error": [RedisConnectionError],
            "retry_on_timeout": False}  # fmt: skip


def _make_async_client(url: str) -> Any:
    """The API's client: a bounded pool that queues for a free connection (waiting polls hold
    none), so a burst of POSTs does not open hundreds of connections at once."""
    import redis.asyncio

    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, timeout=SOCKET_TIMEOUT_S, max_connections=ASYNC_POOL, **_options(redis.asyncio)
    )
    pool.connection_class = packing_with_hiredis(pool.connection_class)  # TCP, TLS or a socket file
    return redis.asyncio.Redis.from_pool(pool)  # the client owns the pool: aclose closes it


def packing_with_hiredis(base: type) -> type:
    """``base`` (a redis-py asyncio connection class) packing commands with hiredis. redis-py's
    synchronous connections do when hiredis is installed; its asyncio ones pack in Python:
    29 us for a POST's admission call against 4 us, a quarter of the POST's own CPU. The bytes
    are the same (a property test checks it)."""
    from redis.connection import HiredisRespSerializer
    from redis.utils import HIREDIS_AVAILABLE

    if not HIREDIS_AVAILABLE:
        return base
    serializer = HiredisRespSerializer()  # type: ignore[no-untyped-call]

    def pack_command(self: Any, *args: Any) -> list[bytes]:
        packed: list[bytes] = serializer.pack(*args)
        return packed

    return type(base.__name__, (base,), {"pack_command": pack_command, "__module__": __name__})


def _admitted(got: int, cap: int | None) -> int:
    if got < 0:  # CREATE's answer: -1 when the cap refused, else the queue's length
        raise CapReached(cap or 0)
    return got


@dataclass
class _OnLoop:
    """What ``aread`` and ``acreate`` use on one event loop."""

    loop: asyncio.AbstractEventLoop
    client: Any
    calls: ScriptBatcher
    waker: Waker


class RedisJobStore(JobStore):
    """See the module docstring. ``check()`` pings at start so a wrong URL fails at once."""

    def __init__(
        self, url: str, *, ttl: float = DEFAULT_TTL_S, grace_s: float = 60.0, lease_s: float = DEFAULT_LEASE_S
    ) -> None:
        import redis

        self.lease_s = lease_s
        self.url = url
        self.ttl = ttl
        self._redis = redis
        self.client: Any = redis.Redis.from_url(url, max_connections=MAX_CONNECTIONS, **_options(redis))
        self._scripts = {name: self.client.register_script(getattr(lua, name)) for name in
                         ("CREATE", "APPENDS", "RESTORE", "READ", "CANCEL", "CANCELS", "POSITIONS",
                          "SESSION", "RENEW", "WORKERS", "CLAIM", "UNSAVED", "EPOCH")}  # fmt: skip
        self._writer = Writer(self.client, redis, self._scripts, url, grace_s, self._ttl)
        self._async: _OnLoop | None = None  # the event loop's client, batcher and wake-ups
        self._epoch: str | None = None  # when Redis began holding jobs, as first seen here

    def _err(self, exc: Exception) -> StoreUnavailable:
        return StoreUnavailable(f"Redis at {redact_url(self.url)} is unreachable: {exc}")

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._redis.RedisError as exc:
            raise self._err(exc) from exc

    def _parse(self, reply: list[Any], since: int) -> dict[str, Any] | None:
        """The job's state from a READ reply; ``None`` for a job Redis does not hold, unless Redis
        restarted empty less than a lease (and some slack) ago: its worker may not have written
        it anew yet (at once, or at its next renewal), so the poll gets a retryable 503, not 404."""
        flat, entries = reply[0], reply[1]
        header = dict(zip(flat[0::2], flat[1::2], strict=True))
        if not header:  # READ then also answers Redis's epoch and its age
            epoch, age = str(reply[2]), int(reply[3])
            if self._epoch is not None and epoch != self._epoch and age < (self.lease_s + 5.0) * 1000:
                raise StoreUnavailable(
                    "Redis restarted empty moments ago and this job may not be written back yet"
                )
            self._epoch = epoch
            return None
        for name, empty in (("tool_calls", "[]"), ("usage", "{}"), ("stop_reason", "null")):
            header[name] = json.loads(header.get(name) or empty)
        chunks = [json.loads(fields[1]) for _id, fields in entries]  # fields: ["c", chunk JSON]
        return state(header, chunks, since, int(header.get("next", 0)))

    async def _acall(self, name: str, keys: list[str], args: list[Any]) -> Any:
        try:  # the calls of one event-loop turn share one pipeline
            return await self._on_loop().calls.call(self._scripts[name], keys, args)
        except self._redis.RedisError as exc:
            raise self._err(exc) from exc

    def _ttl(self) -> int:
        return max(1, round(self.ttl))

    def check(self) -> None:
        try:
            self.client.ping()
            self._epoch = str(self._scripts["EPOCH"]()[0])  # to tell a restart later
        except self._redis.RedisError as exc:
            raise StoreUnavailable(
                f"Cannot reach Redis at {redact_url(self.url)}: {exc}. Start redis-server or fix --redis-url."
            ) from None

    def ping(self) -> None:
        self._call(self.client.ping)

    # -- admission -------------------------------------------------------------
    def create(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        """Admit the job; with ``enqueue`` also push the request for a worker (one step).
        Returns the worker queue's length (0 without ``enqueue``)."""
        keys, args = self._create_args(job_id, user, request, queue_position, max_running, enqueue)
        return _admitted(int(self._call(self._scripts["CREATE"], keys=keys, args=args)), max_running)

    async def acreate(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        """``create`` on the event loop (a POST parks no thread)."""
        keys, args = self._create_args(job_id, user, request, queue_position, max_running, enqueue)
        return _admitted(int(await self._acall("CREATE", keys, args)), max_running)

    def _create_args(
        self, job_id: str, user: str, request: dict[str, Any], position: int, cap: int | None, enqueue: bool
    ) -> tuple[list[str], list[Any]]:
        keys = [job_key(job_id), f"{KEY_PREFIX}user:{user}", QUEUE_KEY]
        args = [job_id, user, json.dumps(request), position, self._ttl(), cap or 0,
                request.get("session_id") or "", "1" if enqueue else "0", int(self.lease_s * 1000)]  # fmt: skip
        return keys, args

    def take(self, job_id: str, *, user: str, request: dict[str, Any]) -> None:
        self._writer.take(job_id, user, request)

    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        return self._writer.append(job_id, chunks)

    def finish(self, job_id: str, status: EndStatus, chunks: list[Chunk]) -> None:
        self._writer.finish(job_id, status, chunks)

    def flush(self, timeout: float = 10.0) -> None:
        self._writer.flush(timeout)

    def set_session(self, job_id: str, session_id: str, *, message: str, history_len: int) -> None:
        header = {"session_id": session_id, "message": message, "history_len": str(history_len)}
        self._writer.note_session(job_id, header)
        keys = [job_key(job_id), f"{KEY_PREFIX}session:{session_id}"]
        args = [job_id, session_id, message, history_len, self._ttl()]
        with contextlib.suppress(StoreUnavailable):  # a restore writes it again
            self._call(self._scripts["SESSION"], keys=keys, args=args)

    def session_job(self, session_id: str) -> dict[str, Any] | None:
        job_id = self._call(self.client.get, f"{KEY_PREFIX}session:{session_id}")
        if not job_id:
            return None
        found = self._call(self.client.hmget, job_key(job_id), ["status", "message", "history_len"])
        if found[0] != "streaming":
            return None
        return {"job_id": job_id, "message": found[1] or "", "history_len": int(found[2] or 0)}

    # -- reading -----------------------------------------------------------------
    def read(self, job_id: str, since: int = 0) -> dict[str, Any] | None:
        key = job_key(job_id)
        reply = self._call(self._scripts["READ"], keys=[key, key + ":chunks"], args=[since])
        return self._parse(reply, since)

    def _on_loop(self) -> _OnLoop:
        loop = asyncio.get_running_loop()
        if self._async is None or self._async.loop is not loop:
            client = _make_async_client(self.url)
            self._async = _OnLoop(loop, client, ScriptBatcher(client, self._redis), Waker(client))
        return self._async

    async def aopen(self) -> None:
        """Ready this event loop's side before the first request: the wake-ups subscribed, the
        scripts loaded (else a burst's first calls each pay a NOSCRIPT round trip) and half the
        pool connected (a burst on a cold pool opened its connections while admitting)."""
        on = self._on_loop()
        on.waker.listen()  # the long-polls' wake-ups, subscribed before the first poll
        client = on.client
        try:
            async with asyncio.timeout(SOCKET_TIMEOUT_S):  # a frozen Redis must not hold up start-up
                pipe = client.pipeline(transaction=False)
                for script in self._scripts.values():
                    pipe.script_load(script.script)
                await pipe.execute()
                await asyncio.gather(*(client.ping() for _ in range(ASYNC_POOL // 2)))
        except (self._redis.RedisError, TimeoutError) as exc:  # the first requests connect instead
            log.warning("Redis at %s: no warm-up (%r)", redact_url(self.url), exc)

    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None,
        linger: float = 0.0,
    ) -> dict[str, Any] | None:  # fmt: skip
        waker = self._on_loop().waker
        key = job_key(job_id)
        since = max(0, since)

        async def read(woken: bool) -> dict[str, Any] | None:
            # A long-poll answers from the tail the wake-ups keep (wake.py) when it can.
            got = waker.answer(job_id, since, news=woken) if wait > 0 else None
            if got is not None:
                return got
            asked = waker.messages
            got = self._parse(await self._acall("READ", [key, key + ":chunks"], [since]), since)
            if got is not None and wait > 0:
                waker.keep(job_id, got, since, asked)
            return got

        # Under load a woken poll lingers only if more wake-ups come within the linger (the
        # writer's batches may already be further apart).
        return await long_poll(read, lambda: waker.register(job_id), lambda fut: waker.unregister(job_id, fut),
                               wait, user, lambda: linger if waker.gap < linger / 2 else 0.0)  # fmt: skip

    def request_cancel(self, job_id: str) -> bool:
        return bool(self._call(self._scripts["CANCEL"], keys=[job_key(job_id)]))

    def cancel_requested(self, job_ids: list[str]) -> set[str]:
        if not job_ids:
            return set()
        wanted = set(self._call(self._scripts["CANCELS"], args=[self._ttl(), *job_ids]))
        self._writer.cancelled(wanted)
        return wanted

    def set_queue_position(self, positions: dict[str, int]) -> None:
        if not positions:
            return
        args: list[Any] = [self._ttl()]
        for job_id, pos in positions.items():
            args += [job_id, pos]
        self._call(self._scripts["POSITIONS"], args=args)

    # -- leases ------------------------------------------------------------------
    def renew(self, worker_id: str, job_ids: list[str], lease_s: float) -> None:
        missing = self._call(self._scripts["RENEW"], args=[worker_id, int(lease_s * 1000), *job_ids])
        if missing:
            self._writer.restore(missing)

    def claim_lapsed(
        self, worker_id: str, lease_s: float, message: str, held: list[str] | None = None
    ) -> list[Lapsed]:
        chunk = json.dumps({"type": "error", "message": message, "kind": "lease"})
        args = [worker_id, int(lease_s * 1000), chunk, self._ttl(), *(held or [])]
        got = self._call(self._scripts["CLAIM"], args=args)
        return [Lapsed(job_id, json.loads(request), session_id or None, what == "take")
                for job_id, what, request, session_id in got]  # fmt: skip

    def unsaved(self, limit: int = 50) -> list[Lapsed]:
        out: list[Lapsed] = []
        for job_id, session_id in self._call(self._scripts["UNSAVED"], args=[limit]):
            read = self.read(job_id, 0)
            if read is not None:
                out.append(Lapsed(job_id, {}, session_id, False, read["chunks"]))
        return out

    def forgot(self, worker_id: str) -> bool:
        return self._call(self.client.zscore, f"{KEY_PREFIX}workers", worker_id) is None

    def workers_alive(self) -> int:
        return int(self._call(self._scripts["WORKERS"], args=[10_000]))

    def close(self) -> None:
        self._writer.close(SOCKET_TIMEOUT_S * 2)
        self.client.close()

    async def aclose(self) -> None:
        on = self._async
        if on is not None and on.loop is asyncio.get_running_loop():
            await on.waker.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(on.client.aclose(), SOCKET_TIMEOUT_S)
        self._async = None
