"""Several processes, one writer: job requests travel through Redis.

DuckDB lets one process write a database file. So with ``--redis-url`` the
transcripts have exactly one writer, the *worker* process: API processes never
open DuckDB. An API process pushes the request on the Redis list
``chatjob:queue`` and waits (``BLPOP chatjob:{job_id}:reply``) for the
worker's answer: ``{"job_id", "meta"}`` or a refusal (status + calm message).
The worker's intake thread pops requests, does the quick start (session,
budget, user message) through its ``JobRunner`` and replies; the run then
writes chunks to the shared ``RedisJobStore``, where any API process reads
them and marks cancels.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from tahrix_lab.jobs.runner import JobRejected, JobRequest, JobRunner
from tahrix_lab.jobs.store import KEY_PREFIX, RedisJobStore, StoreUnavailable, redact_url

log = logging.getLogger(__name__)

QUEUE_KEY = f"{KEY_PREFIX}queue"
REPLY_TTL_S = 30


def reply_key(job_id: str) -> str:
    return f"{KEY_PREFIX}{job_id}:reply"


class RedisSubmitter:
    """The API side: enqueue a request, wait for the worker's answer."""

    def __init__(self, store: RedisJobStore, *, timeout: float = 10.0) -> None:
        self.store = store
        self.timeout = timeout

    def submit(self, req: JobRequest) -> dict[str, Any]:
        import redis

        client = self.store.client
        payload = json.dumps(req.to_dict())
        try:
            client.rpush(QUEUE_KEY, payload)
            got = client.blpop([reply_key(req.job_id)], timeout=self.timeout)
            if got is None and client.lrem(QUEUE_KEY, 1, payload):
                raise JobRejected(503, "No worker is taking jobs right now. Please try again in a minute.")
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis at {redact_url(self.store.url)} is unreachable: {exc}") from exc
        if got is None:
            raise JobRejected(503, "The worker did not answer in time. Please try again in a minute.")
        answer: dict[str, Any] = json.loads(got[1])
        if "error" in answer:
            err = answer["error"]
            raise JobRejected(int(err["status"]), str(err["message"]), err.get("field"))
        return answer


class RedisIntake:
    """The worker side: a thread that pops requests and starts them on the runner."""

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
            self._handle(got[1])

    def _handle(self, raw: str) -> None:
        try:
            req = JobRequest.from_dict(json.loads(raw))
        except (ValueError, TypeError):
            log.error("dropped an unreadable job request: %.200s", raw)
            return
        answer: dict[str, Any]
        try:
            answer = self.runner.submit(req)
        except JobRejected as exc:
            answer = {"error": exc.to_dict()}
        except StoreUnavailable as exc:
            log.error("job %s could not start: %s", req.job_id, exc)
            return
        except Exception:
            log.exception("job %s could not start", req.job_id)
            answer = {
                "error": {"status": 503, "message": "The job could not start. The details are in the log."}
            }
        for attempt in range(10):
            try:
                pipe = self.store.client.pipeline(transaction=True)
                pipe.rpush(reply_key(req.job_id), json.dumps(answer))
                pipe.expire(reply_key(req.job_id), REPLY_TTL_S)
                pipe.execute()
                return
            except Exception as exc:
                log.warning("could not reply to job %s (attempt %d): %s", req.job_id, attempt + 1, exc)
                time.sleep(0.2)
