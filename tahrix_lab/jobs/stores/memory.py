"""Jobs in this process (the embedded default); the rules every store keeps are in ``contract``."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.flow import Chunk, ChunkLog, Fold
from tahrix_lab.jobs.contract import (
    DEFAULT_TTL_S,
    TERMINAL,
    CapReached,
    EndStatus,
    JobStore,
    end_status,
    long_poll,
    state,
    wake,
)


@dataclass
class _MemJob:
    user: str
    session_id: str | None = None
    fold: Fold = field(default_factory=Fold)
    log: ChunkLog = field(default_factory=ChunkLog)
    status: str = "streaming"
    queue_position: int = 0
    cancel: bool = False
    expires: float | None = None  # set when the job ends
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(default_factory=list)

    def wake(self) -> None:
        for loop, fut in self.waiters:
            loop.call_soon_threadsafe(wake, fut)
        self.waiters.clear()


class MemoryJobStore(JobStore):
    """Jobs in a dict under one lock; a chunk wakes only the long-polls of its own job."""

    def __init__(self, ttl: float = DEFAULT_TTL_S) -> None:
        self.ttl = ttl
        self._jobs: dict[str, _MemJob] = {}
        self._sessions: dict[str, tuple[str, str, int]] = {}  # session -> (job, message, history_len)
        self._cond = threading.RLock()

    def _get(self, job_id: str) -> _MemJob | None:
        job = self._jobs.get(job_id)
        if job is not None and job.expires is not None and job.expires <= time.monotonic():
            del self._jobs[job_id]
            return None
        return job

    def _purge(self) -> None:
        for job_id in list(self._jobs):
            self._get(job_id)  # drops it if it expired

    def create(
        self, job_id: str, *, user: str, request: dict[str, Any], queue_position: int = 0,
        max_running: int | None = None, enqueue: bool = False,
    ) -> int:  # fmt: skip
        with self._cond:
            self._purge()
            if max_running is not None:
                running = sum(1 for j in self._jobs.values() if j.user == user and j.status not in TERMINAL)
                if running >= max_running:
                    raise CapReached(max_running)
            self._jobs[job_id] = _MemJob(user, request.get("session_id"), queue_position=queue_position)
            return 0

    def set_session(self, job_id: str, session_id: str, *, message: str, history_len: int) -> None:
        with self._cond:
            job = self._get(job_id)
            if job is not None:
                job.session_id = session_id
                self._sessions[session_id] = (job_id, message, history_len)
                job.wake()

    def session_job(self, session_id: str) -> dict[str, Any] | None:
        with self._cond:
            found = self._sessions.get(session_id)
            if found is None:
                return None
            job = self._get(found[0])
            if job is None or job.status in TERMINAL:
                return None
            return {"job_id": found[0], "message": found[1], "history_len": found[2]}

    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        with self._cond:
            job = self._get(job_id)
            if job is None:
                return True  # expired under us: nobody can read it, stop working on it
            job.fold.extend(chunks)
            job.log.append(chunks)
            job.queue_position = 0
            job.wake()
            return job.cancel

    def finish(self, job_id: str, status: EndStatus, chunks: list[Chunk]) -> None:
        with self._cond:
            job = self._get(job_id)
            if job is None:
                return
            job.fold.extend(chunks)
            job.log.append(chunks)
            job.fold.end(status == "cancelled")
            job.status = end_status(status)
            job.queue_position = 0
            job.expires = time.monotonic() + self.ttl
            if job.session_id is not None:
                self._sessions.pop(job.session_id, None)
            job.wake()

    def read(self, job_id: str, since: int = 0) -> dict[str, Any] | None:
        with self._cond:
            job = self._get(job_id)
            return None if job is None else self._snapshot(job, since)

    async def aread(
        self, job_id: str, since: int = 0, wait: float = 0.0, *, user: str | None = None,
        linger: float = 0.0,
    ) -> dict[str, Any] | None:  # fmt: skip
        loop = asyncio.get_running_loop()

        async def read(woken: bool) -> dict[str, Any] | None:  # the lock is only ever held briefly
            return self.read(job_id, since)

        def register() -> asyncio.Future[None]:
            fut: asyncio.Future[None] = loop.create_future()
            with self._cond:
                if (job := self._get(job_id)) is not None:
                    job.waiters.append((loop, fut))
            return fut

        def unregister(fut: asyncio.Future[None]) -> None:
            with self._cond:
                if (job := self._jobs.get(job_id)) is not None and (loop, fut) in job.waiters:
                    job.waiters.remove((loop, fut))

        return await long_poll(read, register, unregister, wait, user, lambda: linger)

    def _snapshot(self, job: _MemJob, since: int) -> dict[str, Any]:
        """The job's state (under the lock)."""
        header = {"status": job.status, **job.fold.summary(), "session_id": job.session_id,
                  "queue_position": job.queue_position, "user": job.user}  # fmt: skip
        return state(header, job.log.since(since), since, job.log.next)

    def request_cancel(self, job_id: str) -> bool:
        with self._cond:
            job = self._get(job_id)
            if job is not None:
                job.cancel = True
            return job is not None

    def cancel_requested(self, job_ids: list[str]) -> set[str]:
        with self._cond:
            return {j for j in job_ids if (job := self._get(j)) is not None and job.cancel}

    def set_queue_position(self, positions: dict[str, int]) -> None:
        with self._cond:
            for job_id, pos in positions.items():
                job = self._get(job_id)
                if job is not None:
                    job.queue_position = pos

    def workers_alive(self) -> int:
        return 1  # the runner lives in this process with the store
