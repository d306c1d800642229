"""Wake-ups for long-polls: one pubsub connection per event loop, one message per batch.

The Redis writer publishes the ids of the jobs it wrote, once per batch, on
``chatjob:wake``; each API process listens on one connection and resolves the
futures of the polls waiting on those jobs. After a reconnect every waiting
poll re-reads (it may have missed a batch while nobody listened).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from tahrix_lab.jobs.chunklog import KEY_PREFIX

log = logging.getLogger(__name__)

WAKE_CHANNEL = f"{KEY_PREFIX}wake"
CLOSE_TIMEOUT_S = 2.0


class Waker:
    """See the module docstring."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.waiters: dict[str, set[asyncio.Future[None]]] = {}
        self.task: asyncio.Task[None] | None = None

    def register(self, job_id: str) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._listen())
        fut: asyncio.Future[None] = loop.create_future()
        self.waiters.setdefault(job_id, set()).add(fut)
        return fut

    def unregister(self, job_id: str, fut: asyncio.Future[None]) -> None:
        group = self.waiters.get(job_id)
        if group is not None:
            group.discard(fut)
            if not group:
                del self.waiters[job_id]

    @property
    def waiting(self) -> int:
        return len(self.waiters)

    def _wake(self, job_ids: list[str] | None = None) -> None:
        for job_id in self.waiters if job_ids is None else job_ids:
            for fut in self.waiters.get(job_id, ()):
                if not fut.done():
                    fut.set_result(None)

    async def _listen(self) -> None:
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(WAKE_CHANNEL)
                self._wake()  # writes made while nobody listened
                while True:
                    msg = await pubsub.get_message(timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        self._wake(str(msg["data"]).split())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down or restarted: listen again shortly
                log.debug("wake-up channel lost: %s", exc)
                self._wake()
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), CLOSE_TIMEOUT_S)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.task, CLOSE_TIMEOUT_S)
