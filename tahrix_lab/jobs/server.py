"""Building and running the job service (HTTP API, page, workers) for ``tahrix serve``.

Roles (see docs/service.md):

* ``all`` (default): the API and the workers in one process. Without
  ``--redis-url`` jobs live in memory; with it, jobs go through Redis and this
  process is the one that writes the transcripts. A second ``--role all``
  process on the same database finds the file taken and serves the API only.
* ``api``: the API only (needs ``--redis-url``); never opens DuckDB.
* ``worker``: takes jobs from Redis and writes the transcripts; no HTTP.

DuckDB lets one process write a database file, so with ``--redis-url`` the
transcripts have one writer, the worker. An API process admits a request (the
per-user cap, the job's record and a push on ``chatjob:queue``, in one script:
``RedisSubmitter``) and answers at once; the worker's ``RedisIntake`` pops it
and queues it on its ``JobRunner``. A start refused there (unknown session,
budget) ends the job with an ``error`` chunk naming the reason.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import ConfigurationError, StoreLockedError
from tahrix_lab.agent.secrets import redact_url
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.jobs.contract import JobRequest, JobStore, StoreUnavailable, Watcher
from tahrix_lab.jobs.domain import ChatIntegration, JobIntegration, offered
from tahrix_lab.jobs.http.api import Extension, Service, create_app
from tahrix_lab.jobs.runner import JobRunner
from tahrix_lab.jobs.stores.memory import MemoryJobStore
from tahrix_lab.jobs.stores.redis import QUEUE_KEY, RedisJobStore
from tahrix_lab.web.guards import Limits, uvicorn_limits
from tahrix_lab.web.tokens import dev_token

log = logging.getLogger(__name__)

IntegrationFactory = Callable[[TranscriptStore], JobIntegration]


def make_backend(settings: Settings) -> Backend:
    name = settings.backend_name
    if name == "fake":
        from tahrix_lab.agent.backends.fake import FakeBackend

        return FakeBackend.from_script(settings.fake_script or "echo")
    from tahrix_lab.agent.backends.registry import get_backend

    return get_backend(name)


@dataclass
class Built:
    """A wired service and what to stop at the end."""

    service: Service | None
    runner: JobRunner | None
    store: JobStore
    transcripts: TranscriptStore | None
    intake: RedisIntake | None = None
    notes: list[str] = field(default_factory=list)
    reaper: Watcher | None = None  # an API process's share of the leases

    def close(self) -> None:
        if self.reaper is not None:
            self.reaper.stop()
        if self.intake is not None:
            self.intake.stop()
        if self.runner is not None:
            self.runner.stop()
        if self.transcripts is not None:
            self.transcripts.close()
        self.store.close()


def build(
    settings: Settings,
    integration_factory: IntegrationFactory | None = None,
    *,
    backend: Backend | None = None,
    extend: Extension | None = None,
) -> Built:
    """Wire store, runner, intake and API service for ``settings`` (``backend`` overrides the
    configured one, for tests; ``extend`` adds routes to the API: ``Service.extend``)."""
    role = settings.role
    store: JobStore
    if settings.redis_url:
        redis_store = RedisJobStore(settings.redis_url, ttl=settings.job_ttl_s, lease_s=settings.lease_s)
        try:
            redis_store.check()
        except StoreUnavailable as exc:
            raise ConfigurationError(str(exc)) from None
        store = redis_store
    else:
        if role != "all":
            raise ConfigurationError(
                f"--role {role} needs --redis-url: without Redis, jobs live in one process."
            )
        store = MemoryJobStore(ttl=settings.job_ttl_s)

    notes: list[str] = []
    api_only = False
    transcripts: TranscriptStore | None = None
    runner: JobRunner | None = None
    intake: RedisIntake | None = None
    if role in ("all", "worker"):
        try:
            transcripts = TranscriptStore(settings.db)
        except StoreLockedError:
            if role != "all" or not settings.redis_url:
                raise
            api_only = True
            notes.append("another process writes the transcripts: serving the API only")
    if transcripts is not None:
        integration: JobIntegration = (
            integration_factory(transcripts) if integration_factory is not None else ChatIntegration()
        )
        offline = offered(integration, "offline_backend")
        if backend is None and settings.backend_name == "fake" and not settings.fake_script and offline:
            backend = offline()  # the domain's own scripted model (the case demo's investigation)
        if settings.backend_name == "fake" and backend is None:
            from tahrix_lab.jobs.domain import WithDemoTools

            integration = WithDemoTools(integration)  # scripts may call pause/echo
        budget = None
        if not settings.has_budget() and settings.backend_name != "fake":
            # A real model without a budget is an open bill: never unlimited by silence.
            settings.budget_monthly_usd = settings.default_monthly_usd
            notes.append(unbudgeted_warning(settings.default_monthly_usd))
            log.warning("%s", notes[-1])
        if settings.has_budget():
            budget = Budget(
                per_minute_tokens=settings.budget_minute_tokens,
                per_hour_tokens=settings.budget_hour_tokens,
                monthly_usd=settings.budget_monthly_usd,
                global_monthly_usd=settings.budget_global_monthly_usd,
            )
        runner = JobRunner(
            store,
            transcripts=transcripts,
            backend=backend or make_backend(settings),
            model=settings.model_name,
            integration=integration,
            budget=budget,
            workers=settings.workers,
            max_running_per_user=settings.max_running_per_user,
            lease_s=settings.lease_s,
        ).start()
        if isinstance(store, RedisJobStore):
            intake = RedisIntake(store, runner).start()

    service: Service | None = None
    if role != "worker":
        # The process that runs jobs starts its own requests directly; the others send
        # theirs through Redis to it.
        submit: Callable[[JobRequest], Awaitable[dict[str, Any]]]
        if runner is not None:
            submit = runner.asubmit
        else:
            assert isinstance(store, RedisJobStore)  # without a runner this is an API process
            try:
                model = settings.model_name
            except ConfigurationError:
                model = ""  # the worker knows; an API process only admits
            submit = redis_submit(store, backend=settings.backend_name, model=model,
                                  max_running_per_user=settings.max_running_per_user)  # fmt: skip
        service = Service(
            store=store,
            submit=submit,
            tokens=settings.tokens,
            runner=runner,
            limits=settings.limits,
            max_wait_s=settings.max_wait_s,
            api_docs=settings.api_docs,
            role="api" if api_only else role,
            extend=extend,
        )
    # Without a runner (an API process) this process still ends the jobs of dead workers.
    reaper = Watcher(store, settings.lease_s, 1.0).start() if runner is None else None
    return Built(service, runner, store, transcripts, intake, notes, reaper)


DEFAULT_MONTHLY_USD = 20.0  # per user, for a real backend started without any budget
MONTHLY_USD_ENV = "TAHRIX_BUDGET_MONTHLY_USD"


def unbudgeted_warning(cap: float) -> str:
    return (f"WARNING: no budget was set for a real model; each user is capped at {cap:g} USD a month. "
            f"Raise it with --budget-monthly-usd or ${MONTHLY_USD_ENV}.")  # fmt: skip


def settle_heap() -> None:
    """Take what start-up built (the app, schemas, parsers: about 250,000 objects) out of the
    cyclic garbage collector's view. Under load, with hundreds of run threads waiting for the
    interpreter lock, each full collection over that heap paused a worker for 0.1 to 1.2 s."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def serve(
    settings: Settings,
    integration_factory: IntegrationFactory | None = None,
    *,
    extend: Extension | None = None,
) -> int:
    if not settings.tokens and settings.role != "worker":
        token = dev_token()
        settings.tokens = {token: "analyst"}
        print(f"tahrix serve: no tokens file given; use this token (user 'analyst'): {token}", flush=True)
    built = build(settings, integration_factory, extend=extend)
    settle_heap()
    where = f"jobs in Redis at {redact_url(settings.redis_url)}" if settings.redis_url else "jobs in memory"
    for note in built.notes:
        print(f"tahrix serve: {note}", flush=True)
    try:
        if built.service is None or settings.role == "worker":
            print(f"tahrix serve: worker running ({where}, transcripts in {built.transcripts and built.transcripts.path})",
                  flush=True)  # fmt: skip
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            stop.wait()
            return 0
        sock = listen_socket(settings.host, settings.port)
        port = sock.getsockname()[1]
        print(f"tahrix serve: listening on http://{settings.host}:{port} (role {built.service.role}, {where})",
              flush=True)  # fmt: skip
        run_http(built.service, sock, settings)
        return 0
    finally:
        built.close()
        sys.stdout.flush()


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket, accepting (queueing) from the moment it returns."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


def run_http(service: Service, sock: socket.socket, settings: Settings | None = None) -> None:
    """Serve the API on ``sock`` until SIGTERM or SIGINT, with ``settings``' timeouts and limits."""
    import uvicorn

    config = uvicorn.Config(
        create_app(service),
        log_level="warning",
        timeout_graceful_shutdown=2,
        **uvicorn_limits((settings or Settings()).limits),  # slow or idle clients are closed
        backlog=4096,
        # At the warning level no access line is written, but uvicorn would still build each
        # one's fields; and no client address is used, so X-Forwarded-For is not parsed.
        access_log=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


# -- several processes, one transcript writer --------------------------------------


def redis_submit(store: RedisJobStore, *, backend: str, model: str, max_running_per_user: int | None
                 ) -> Callable[[JobRequest], Awaitable[dict[str, Any]]]:  # fmt: skip
    """The API side: admit and enqueue a request in one step; never waits for the worker."""

    async def submit(req: JobRequest) -> dict[str, Any]:  # CapReached: the 429 at the per-user cap
        waiting = await store.acreate(req.job_id, user=req.user, request=req.to_dict(),
                                      max_running=max_running_per_user, enqueue=True)  # fmt: skip
        meta = {"session_id": req.session_id, "backend": backend, "model": model,
                "queue_position": max(0, waiting - 1)}  # fmt: skip
        return {"job_id": req.job_id, "meta": meta}

    return submit


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
                # pause (steps.BurstGate), leaving the cores to the API processes admitting it.
                self.runner.admitted()
                self.runner.enqueue(req)
            except (ValueError, TypeError, KeyError):
                log.error("dropped an unreadable job request: %.200s", got[1])


Role = Literal["all", "api", "worker"]


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 4
    role: Role = "all"
    redis_url: str | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    backend: str | None = None
    model: str | None = None
    fake_script: str | None = None
    db: str | None = None
    max_wait_s: float = 25.0
    job_ttl_s: float = 180.0
    max_running_per_user: int | None = 8  # answers running or queued per user; more get 429
    lease_s: float = 6.0  # a job whose worker stops renewing for this long ends (or moves)
    budget_minute_tokens: int | None = None
    budget_hour_tokens: int | None = None
    budget_monthly_usd: float | None = None
    budget_global_monthly_usd: float | None = None
    default_monthly_usd: float = DEFAULT_MONTHLY_USD  # used when a real backend has no budget
    limits: Limits = field(default_factory=Limits)  # body size, timeouts, connections, sign-ins
    api_docs: bool = False  # serve /docs and /openapi.json

    @property
    def backend_name(self) -> str:
        return self.backend or os.environ.get("TAHRIX_BACKEND") or "fake"

    @property
    def model_name(self) -> str:
        model = self.model or os.environ.get("TAHRIX_MODEL")
        if model:
            return model
        if self.backend_name == "fake":
            return "fake-model"
        raise ConfigurationError("Set the model id with --model or TAHRIX_MODEL for this backend.")

    def has_budget(self) -> bool:
        return any(
            v is not None
            for v in (
                self.budget_minute_tokens,
                self.budget_hour_tokens,
                self.budget_monthly_usd,
                self.budget_global_monthly_usd,
            )
        )
