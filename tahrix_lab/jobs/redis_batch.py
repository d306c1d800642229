"""Script calls of many requests, one pipeline: every call asked in one event-loop turn is
sent together.

Under load one batch of writes wakes hundreds of polls at once, and a burst of
POSTs admits hundreds of jobs; each would otherwise take a pooled connection,
send one script and parse one reply. Here they share one round trip. Errors
stay per call: a script that failed raises for that call only, and Redis
unreachable raises for each (the API answers 503, as for a single call).
"""

from __future__ import annotations

import asyncio
from typing import Any

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
        batch, self.pending = self.pending, []
        if batch:
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
                for script in {id(c[0]): c[0] for c in batch}.values():  # a fresh or restarted Redis
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
