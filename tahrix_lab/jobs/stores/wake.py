"""The API's event-loop side of Redis: batched script calls, and wake-ups for long-polls.

``ScriptBatcher``: the reads and admissions asked in one event-loop turn share one pipeline.

``Waker``: one pubsub connection per event loop. After each batch the writer publishes on
``chatjob:wake`` what landed, as JSON: ``{"w": [[job, first index, status, [chunk...],
tool_calls, usage, stop_reason], ...]}``; a job whose state changed otherwise (written anew,
its session set, ended by a reaper) is named by its id alone (space-separated ids). For a job
its polls read, the Waker keeps the log's tail (``Tail``), seeded by a Redis read and extended
by the messages, so a woken poll answers without reading Redis. A tail is kept only while it
is exact: a gap, a job named by id or a reconnect drops it (docs/service.md has the story).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from tahrix_lab.flow import Chunk, ChunkLog, Fold
from tahrix_lab.jobs.contract import KEY_PREFIX, TERMINAL, wake

log = logging.getLogger(__name__)

WAKE_CHANNEL = f"{KEY_PREFIX}wake"
CLOSE_TIMEOUT_S = 2.0
TAIL_IDLE_S = 30.0  # a tail no poll asked for this long is dropped


@dataclass
class Tail:
    """One job's state as a poll answers it, and its chunks from the latest poll's ``since`` on."""

    header: dict[str, Any]  # status, session_id, queue_position, user
    log: ChunkLog
    fold: Fold
    used: float

    def extend(self, first: int, chunks: list[Chunk], status: str, fields: list[Any]) -> bool:
        """Add what a message appended; False when it does not continue this tail (a gap)."""
        if first > self.log.next:
            return False
        if first + len(chunks) < self.log.next:  # older than the read that seeded the tail
            return True
        fresh = chunks[self.log.next - first :]
        self.fold.extend(fresh)
        self.log.append(fresh)
        # The writer's fold of the whole log says the rest (a tool call ended with it).
        self.fold.tool_calls, self.fold.usage, self.fold.stop_reason = fields
        self.header["queue_position"] = 0
        if status:
            self.header["status"] = status
        return True

    def state(self, since: int) -> dict[str, Any]:
        return {**self.header, **self.fold.summary(), "chunks": self.log.since(since), "next": self.log.next}


class Waker:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.waiters: dict[str, set[asyncio.Future[None]]] = {}
        self.tails: dict[str, Tail] = {}
        # Messages counted, and for jobs being read the count at the last message naming them:
        # a read that a message overtook (its reply parsed after it) must not seed a tail.
        self.messages = 0
        self.touched: dict[str, int] = {}
        self.task: asyncio.Task[None] | None = None
        self.listening = False  # subscribed: the tails are being kept up to date
        # Seconds between messages (a moving average, from "far apart"): a poll lingers for
        # more only when the next messages come sooner than its linger would end.
        self.gap = 1.0
        self._last_at: float | None = None

    def listen(self) -> None:
        """Subscribe (once per event loop; again if the listener ended)."""
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._listen())

    def register(self, job_id: str) -> asyncio.Future[None]:
        self.listen()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(job_id, set()).add(fut)
        return fut

    def unregister(self, job_id: str, fut: asyncio.Future[None]) -> None:
        group = self.waiters.get(job_id)
        if group is not None:
            group.discard(fut)
            if not group:
                del self.waiters[job_id]
                self.touched.pop(job_id, None)

    # -- tails -------------------------------------------------------------------
    def keep(self, job_id: str, got: dict[str, Any], since: int, asked: int) -> None:
        """Seed (or replace) the tail from a Redis read of the chunks from ``since``, asked when
        ``messages`` was ``asked``."""
        chunks = got["chunks"]
        overtaken = self.touched.get(job_id, -1) > asked  # the read may predate that message
        if (not self.listening or overtaken or got["status"] in TERMINAL
                or got["next"] != since + len(chunks)):  # fmt: skip
            self.tails.pop(job_id, None)
            return
        header = {k: got.get(k) for k in ("status", "session_id", "queue_position", "user")}
        self.tails[job_id] = Tail(header, ChunkLog(list(chunks), since), Fold.of(got), time.monotonic())

    def answer(self, job_id: str, since: int, *, news: bool) -> dict[str, Any] | None:
        """The state from the tail, if it holds ``since`` (with ``news``: and chunks after it)."""
        tail = self.tails.get(job_id)
        if tail is None or not tail.log.holds(since):
            return None
        if news and since == tail.log.next and tail.header["status"] not in TERMINAL:
            return None
        tail.used = time.monotonic()
        got = tail.state(since)
        if got["status"] in TERMINAL:
            del self.tails[job_id]  # answered its end: later reads go to Redis
        else:  # the client has what came before: let it go
            tail.log.trim(since)
        return got

    def _news(self, data: str) -> list[str] | None:
        """Apply one message to the tails; the jobs it wakes (None: every waiting poll)."""
        self.messages += 1
        now = time.monotonic()
        if self._last_at is not None:
            self.gap += 0.2 * (min(now - self._last_at, 1.0) - self.gap)
        self._last_at = now
        woken = self._apply(data)
        for job_id in self.waiters if woken is None else woken:
            if job_id in self.waiters:
                self.touched[job_id] = self.messages
        return woken

    def _apply(self, data: str) -> list[str] | None:
        if not data.startswith("{"):
            ids = data.split()
            for job_id in ids:
                self.tails.pop(job_id, None)
            return ids
        try:
            msg = json.loads(data)
            woken: list[str] = []
            for job_id, first, status, chunks, *fields in msg.get("w", ()):
                woken.append(job_id)
                tail = self.tails.get(job_id)
                if tail is not None and not tail.extend(first, chunks, status, fields):
                    del self.tails[job_id]
            return woken
        except (ValueError, TypeError, KeyError) as exc:  # not ours: trust no tail
            log.warning("unreadable wake-up message (%s); every poll reads Redis", exc)
            self.tails.clear()
            return None

    def _sweep(self) -> None:
        old = time.monotonic() - TAIL_IDLE_S
        self.tails = {job_id: tail for job_id, tail in self.tails.items() if tail.used >= old}

    def _wake(self, job_ids: list[str] | None = None) -> None:
        for job_id in self.waiters if job_ids is None else job_ids:
            for fut in self.waiters.get(job_id, ()):
                wake(fut)

    async def _listen(self) -> None:
        while True:
            pubsub = self.client.pubsub()
            swept = time.monotonic()
            try:
                await pubsub.subscribe(WAKE_CHANNEL)
                while True:
                    msg = await pubsub.get_message(timeout=1.0)
                    kind = msg.get("type") if msg is not None else None
                    if kind == "message":
                        self._wake(self._news(str(msg["data"])))
                    elif kind == "subscribe":  # from here on no message is missed
                        self.listening = True
                        self._wake()  # writes made while nobody listened
                    if time.monotonic() - swept > TAIL_IDLE_S / 3:
                        self._sweep()
                        swept = time.monotonic()
            except Exception as exc:  # Redis down or restarted: listen again shortly
                log.debug("wake-up channel lost: %s", exc)
                self._wake()  # the polls run at the next await, after the finally dropped the tails
            finally:
                self.listening = False
                self.tails.clear()  # messages will be missed: no tail stays exact
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), CLOSE_TIMEOUT_S)
            await asyncio.sleep(0.5)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.task, CLOSE_TIMEOUT_S)


_Call = tuple[Any, list[str], list[Any], "asyncio.Future[Any]"]


class ScriptBatcher:
    """``await call(script, keys, args)`` answers that registered script's reply."""

    def __init__(self, client: Any, redis_module: Any) -> None:
        self.client = client
        self.redis = redis_module
        self.pending: list[_Call] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if not self.pending:
            loop.call_soon(self._kick)  # after the other requests of this turn asked too
        self.pending.append((script, keys, args, fut))
        return await fut

    def _kick(self) -> None:
        batch, self.pending = self.pending, []  # never empty: ``call`` filled it
        task = asyncio.get_running_loop().create_task(self._flush(batch))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _send(self, batch: list[_Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args, _fut in batch:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))

    async def _flush(self, batch: list[_Call]) -> None:
        try:
            results = await self._send(batch)
            if any(isinstance(r, self.redis.exceptions.NoScriptError) for r in results):
                for script in {call[0] for call in batch}:  # a fresh or restarted Redis
                    await self.client.script_load(script.script)
                results = await self._send(batch)
        except Exception as exc:  # unreachable, timed out: each call raises it
            results = [exc] * len(batch)
        for (_script, _keys, _args, fut), res in zip(batch, results, strict=True):
            if fut.done():  # its request gave up (deadline)
                continue
            if isinstance(res, BaseException):
                fut.set_exception(res)
            else:
                fut.set_result(res)
