"""Several processes, one writer: job requests travel through Redis.

DuckDB lets one process write a database file. So with ``--redis-url`` the
transcripts have exactly one writer, the *worker* process: API processes never
open DuckDB. An API process admits a request (the per-user cap and the job's
record in one script) and pushes it on the Redis list ``chatjob:queue`` in the
same step, then answers at once. The worker's intake thread pops requests and
queues them on its ``JobRunner``, which starts each (session, budget, user
message) when a worker thread is free; the run writes chunks to the shared
``RedisJobStore``, where any API process reads them and marks cancels. A start
that is refused (unknown session, budget) ends the job with an ``error``
chunk naming the reason.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from tahrix_lab.agent.secrets import redact_url
from tahrix_lab.jobs.contract import CapReached, JobRejected, JobRequest
from tahrix_lab.jobs.runner import DEFAULT_MAX_RUNNING, JobRunner
from tahrix_lab.jobs.stores.redis import QUEUE_KEY, RedisJobStore

log = logging.getLogger(__name__)


class RedisSubmitter:
    """The API side: admit and enqueue a request in one step; never waits for the worker."""

    def __init__(
        self,
        store: RedisJobStore,
        *,
        backend: str,
        model: str,
        max_running_per_user: int | None = DEFAULT_MAX_RUNNING,
    ) -> None:
        self.store = store
        self.backend = backend
        self.model = model
        self.max_running_per_user = max_running_per_user

    async def asubmit(self, req: JobRequest) -> dict[str, Any]:
        try:
            waiting = await self.store.acreate(req.job_id, user=req.user, request=req.to_dict(),
                                               max_running=self.max_running_per_user, enqueue=True)  # fmt: skip
        except CapReached as exc:
            raise JobRejected(429, str(exc)) from None
        meta = {"session_id": req.session_id, "backend": self.backend, "model": self.model,
                "queue_position": max(0, waiting - 1)}  # fmt: skip
        return {"job_id": req.job_id, "meta": meta}


class RedisIntake:
    """The worker side: a thread that pops requests and queues them on the runner."""

    def __init__(self, store: RedisJobStore, runner: JobRunner, *, poll_s: float = 1.0) -> None:
        self.store = store
        self.runner = runner
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> RedisIntake:
        self._thread = threading.Thread(target=self._loop, name="tahrix-intake", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        import redis

        client = self.store.client
        failing = False
        while not self._stop.is_set():
            try:
                got = client.blpop([QUEUE_KEY], timeout=self.poll_s)
                if failing:
                    log.warning("Redis at %s is reachable again; taking jobs", redact_url(self.store.url))
                    failing = False
            except redis.RedisError as exc:
                if not failing:
                    log.error("Redis at %s is unreachable, retrying: %s", redact_url(self.store.url), exc)
                    failing = True
                self._stop.wait(0.5)
                continue
            if got is None:
                continue
            try:
                req = JobRequest.from_dict(json.loads(got[1]))
                # A burst of POSTs reaches here as a burst of pops: the starts wait for it to
                # pause (starts.BurstGate), leaving the cores to the API processes admitting it.
                self.runner.admitted()
                self.runner.enqueue(req)
            except (ValueError, TypeError, KeyError):
                log.error("dropped an unreadable job request: %.200s", got[1])
