"""Building and running the job service for ``tahrix serve``: settings, wiring by role (``all``,
``api``, ``worker``), the API-to-worker queue through Redis, and the HTTP server. The roles and why
there is one transcript writer: docs/service.md ("Several processes").
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import ConfigurationError, StoreLockedError
from tahrix_lab.agent.secrets import redact_url
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.jobs.contract import JobRequest, JobStore, StoreUnavailable, Watcher
from tahrix_lab.jobs.domain import ChatIntegration, JobIntegration, offered
from tahrix_lab.jobs.http.api import Extension, Service, Submit, create_app
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
        store = RedisJobStore(settings.redis_url, ttl=settings.job_ttl_s, lease_s=settings.lease_s)
        try:
            store.check()
        except StoreUnavailable as exc:
            raise ConfigurationError(str(exc)) from None
    else:
        if role != "all":
            raise ConfigurationError(
                f"--role {role} needs --redis-url: without Redis, jobs live in one process."
            )
        store = MemoryJobStore(ttl=settings.job_ttl_s)

    notes: list[str] = []
    transcripts: TranscriptStore | None = None
    runner: JobRunner | None = None
    intake: RedisIntake | None = None
    if role in ("all", "worker"):
        try:
            transcripts = TranscriptStore(settings.db)
        except StoreLockedError:
            if role != "all" or not settings.redis_url:
                raise
            role = "api"
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
        budget = settings.budget()
        if budget is None and settings.backend_name != "fake":
            # A real model without a budget is an open bill: never unlimited by silence.
            settings.budget_monthly_usd = cap = settings.default_monthly_usd
            notes.append(
                f"WARNING: no budget was set for a real model; each user is capped at {cap:g} USD a "
                "month. Raise it with --budget-monthly-usd or $TAHRIX_BUDGET_MONTHLY_USD."
            )
            log.warning("%s", notes[-1])
            budget = settings.budget()
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
        if runner is not None:
            submit: Submit = runner.asubmit
        else:
            assert isinstance(store, RedisJobStore)  # without a runner this is an API process
            submit = redis_submit(store, settings)
        service = Service(
            store=store,
            submit=submit,
            tokens=settings.tokens,
            runner=runner,
            limits=settings.limits,
            max_wait_s=settings.max_wait_s,
            api_docs=settings.api_docs,
            role=role,
            extend=extend,
        )
    # Without a runner (an API process) this process still ends the jobs of dead workers.
    reaper = Watcher(store, settings.lease_s, 1.0).start() if runner is None else None
    return Built(service, runner, store, transcripts, intake, notes, reaper)


def settle_heap() -> None:
    """Take start-up's heap out of the collector's view: under load each full collection over it
    paused a worker for 0.1 to 1.2 s (docs/service.md, "A settled heap")."""
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
        if built.service is None:  # a worker
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
        # Neither is used, and uvicorn would still pay for them on each request.
        access_log=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


def redis_submit(store: RedisJobStore, settings: Settings) -> Submit:
    """The API side: admit and enqueue a request in one step; never waits for the worker."""
    backend, cap = settings.backend_name, settings.max_running_per_user
    try:
        model = settings.model_name
    except ConfigurationError:
        model = ""  # the worker knows; an API process only admits

    async def submit(req: JobRequest) -> dict[str, Any]:  # CapReached: the 429 at the per-user cap
        waiting = await store.acreate(
            req.job_id, user=req.user, request=req.to_dict(), max_running=cap, enqueue=True
        )
        meta = {"session_id": req.session_id, "backend": backend, "model": model,
                "queue_position": max(0, waiting - 1)}  # fmt: skip
        return {"job_id": req.job_id, "meta": meta}

    return submit


class RedisIntake:
    """The worker side: a thread that pops requests and queues them on the runner."""

    def __init__(self, store: RedisJobStore, runner: JobRunner) -> None:
        self.store = store
        self.runner = runner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tahrix-intake", daemon=True)

    def start(self) -> RedisIntake:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _loop(self) -> None:
        import redis

        client = self.store.client
        failing = False
        while not self._stop.is_set():
            try:
                got = client.blpop([QUEUE_KEY], timeout=1.0)
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


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 4
    role: Literal["all", "api", "worker"] = "all"
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
    default_monthly_usd: float = 20.0  # per user, when a real backend is started without a budget
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

    def budget(self) -> Budget | None:
        """The caps set (in ``Budget``'s order), or None when none is."""
        caps = (
            self.budget_minute_tokens,
            self.budget_hour_tokens,
            self.budget_monthly_usd,
            self.budget_global_monthly_usd,
        )
        return Budget(*caps) if any(cap is not None for cap in caps) else None
