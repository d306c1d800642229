"""The HTTP API (FastAPI): start a job, long-poll its chunks, cancel it (docs/service.md).

Every ``/api`` call needs ``Authorization: Bearer <token>``. A job is visible only to the user who
created it: anyone else gets the same 404 as for an unknown or expired job. The page's routes join
through ``Service.extend`` (app/workplace.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.types import ASGIApp

from tahrix_lab.flow import chunks
from tahrix_lab.jobs.contract import JobRejected, JobRequest, JobStore, StoreUnavailable
from tahrix_lab.jobs.http.fastpaths import STORE_DOWN, FastPaths
from tahrix_lab.jobs.runner import JobRunner
from tahrix_lab.web.guards import BodyLimit, Limits, SecurityHeaders, SignInThrottle

log = logging.getLogger(__name__)

PREFIX = "/api/v1/agent"
MAX_TEXT = 32_000
CONTENT_HELP = (
    "false: leave out `content` and `reasoning`, the whole text so far, which the chunks carry "
    "piece by piece; a client that keeps the chunks then receives each word once, not once per poll."
)
LOST = "The answer's stream was interrupted; its job may still finish (see the job API)."
Submit = Callable[[JobRequest], Awaitable[dict[str, Any]]]  # admits at once: {"job_id", "meta"}
# More routes on the app, inside its outer layers: the composition root's page (app/workplace.py).
Extension = Callable[[FastAPI], None]


class HistoryItem(BaseModel):
    """An earlier turn: ``text``, or ``content`` as in the seed's chat messages."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    text: str | None = Field(default=None, max_length=MAX_TEXT)
    content: str | None = Field(default=None, max_length=MAX_TEXT)

    @model_validator(mode="after")
    def _one_text(self) -> HistoryItem:
        if self.text is None and self.content is None:
            raise ValueError("each history item needs text (or content)")
        return self

    def plain(self) -> dict[str, str]:
        return {"role": self.role, "text": self.text if self.text is not None else self.content or ""}


class ChatJobBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=MAX_TEXT, description="The user's question.")
    case_id: str | None = Field(default=None, max_length=200, description="Link a new session to this case.")
    session_id: str | None = Field(default=None, max_length=200, description="Continue this conversation.")
    history: list[HistoryItem] | None = Field(
        default=None, max_length=200, description="Earlier turns to seed a new session with."
    )


class JobMeta(BaseModel):
    session_id: str | None = Field(description="Known at once when continuing; else in the job's state.")
    backend: str
    model: str
    queue_position: int = Field(description="0: running now; k: k-th in line for a worker.")


class JobCreated(BaseModel):
    job_id: str
    meta: JobMeta


class ToolCallState(BaseModel):
    id: str | None
    name: str | None
    status: str


class JobState(BaseModel):
    status: Literal["streaming", "done", "error"]
    stop_reason: str | None = Field(description="From the last chunk: end_turn, cancelled, error...")
    content: str | None = Field(None, description="The answer's text so far; left out with content=false")
    reasoning: str | None = Field(None, description="Its reasoning so far; left out with content=false")
    chunks: list[dict[str, Any]]
    next: int
    tool_calls: list[ToolCallState]
    usage: dict[str, Any]
    session_id: str | None
    queue_position: int


class CancelAnswer(BaseModel):
    job_id: str
    status: str
    cancel_requested: bool


class Problem(BaseModel):
    detail: str
    field: str | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or unknown bearer token."},
    429: {"model": Problem, "description": "Too many answers running for this user."},
    404: {"model": Problem, "description": "No such job (or not yours, or expired)."},
    413: {"model": Problem, "description": "The request body is too large."},
    503: {"model": Problem, "description": "The job store or worker is unreachable."},
}


def sse_events(events: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    for i, chunk in enumerate(chunks(events)):
        yield sse_frame(i, chunk)


def sse_frame(index: int, chunk: dict[str, Any]) -> str:
    """One ``text/event-stream`` frame: ``id`` is the chunk index, ``data`` its JSON."""
    return f"id: {index}\ndata: {json.dumps(chunk, ensure_ascii=False)}\n\n"


@dataclass
class Service:
    """What the API needs: where jobs live, how to start one, who may call."""

    store: JobStore
    submit: Submit  # no DuckDB, no worker
    tokens: dict[str, str]
    runner: JobRunner | None = None  # set when this process runs jobs itself
    limits: Limits = field(default_factory=Limits)  # the body limit and the sign-in throttle
    max_wait_s: float = 25.0
    api_docs: bool = False  # serve /docs and /openapi.json (tahrix serve --api-docs)
    role: str = "all"
    extend: Extension | None = None
    # Under load a woken long-poll waits up to linger_s for more chunks, so one answer carries
    # several; below busy_polls waiting polls it answers at once (milliseconds when idle).
    linger_s: float = 0.1
    busy_polls: int = 64
    waiting: int = 0

    async def admit(self, req: JobRequest) -> dict[str, Any]:
        try:
            async with asyncio.timeout(1.0):  # admission is one script: a frozen Redis answers 503
                return await self.submit(req)
        except TimeoutError:
            raise StoreUnavailable("the job store did not admit the job in time") from None

    def linger(self) -> float:
        if self.waiting < self.busy_polls:
            return 0.0
        return self.linger_s * min(1.0, self.waiting / 500)


def problem(status: int, detail: str, field: str | None = None, **headers: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "field": field}, status_code=status, headers=headers or None)


_bearer = HTTPBearer(auto_error=False, description="A token from the server's tokens file.")


async def current_user(  # async: a sync dependency would cost a thread hop per request
    request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    tokens: dict[str, str] = request.app.state.service.tokens
    user = tokens.get(creds.credentials) if creds is not None else None
    if user is None:
        raise JobRejected(401, "Send a valid token as 'Authorization: Bearer <token>'.")
    return user


User = Annotated[str, Depends(current_user)]


def create_app(service: Service) -> ASGIApp:
    """The ASGI app for one ``Service``: the FastAPI app inside its fast paths (``FastPaths``)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await service.store.aopen()
        yield
        await service.store.aclose()

    docs = service.api_docs  # off by default: swagger-ui would load from a CDN beside the page's token
    app = FastAPI(
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if docs else None,
        title="Tahrix Lab job service",
        version="1",
        description="Start an agent job, then poll (or long-poll) its chunks. Proxy-safe: no request "
        "lasts longer than the `wait` you ask for (at most 25 s).",
    )
    app.state.service = service
    # Cancelling a job blocks (Redis) and runs in a thread; allow many at once.
    poll_limiter = anyio.CapacityLimiter(2000)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        detail = f"Invalid {field}: {first.get('msg', 'invalid value')}."
        details = [
            {"field": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg")} for e in errors
        ]
        return JSONResponse({"detail": detail, "field": field, "errors": details}, status_code=422)

    @app.exception_handler(StoreUnavailable)
    async def _store_down(request: Request, exc: StoreUnavailable) -> JSONResponse:
        log.error("job store unavailable: %s", exc)
        return problem(503, STORE_DOWN)

    @app.exception_handler(JobRejected)
    async def _rejected(request: Request, exc: JobRejected) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}  # current_user's refusal
        return problem(exc.status, exc.message, exc.field, **headers)

    async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=poll_limiter)

    @app.post(
        f"{PREFIX}/chat-stream-job",
        response_model=JobCreated,
        responses={**ERRORS, 422: {"model": Problem}},
    )
    async def start_job(body: ChatJobBody, user: User) -> dict[str, Any]:
        """Start answering ``message``; returns at once with the job id."""
        return await admit(body, user)

    async def admit(body: ChatJobBody, user: str) -> dict[str, Any]:
        history = [h.plain() for h in body.history] if body.history else None
        return await service.admit(JobRequest(user=user, message=body.message, case_id=body.case_id,
                                              session_id=body.session_id, history=history))  # fmt: skip

    async def own_state(
        job_id: str, user: str, since: int, wait: float, content: bool = True
    ) -> dict[str, Any]:
        wait = min(wait, service.max_wait_s)
        service.waiting += 1
        try:
            # The deadline holds whatever Redis does (frozen, gone): a proxy never sees more.
            async with asyncio.timeout(wait + 0.9):
                state = await service.store.aread(job_id, since, wait, user=user, linger=service.linger())
        except TimeoutError:
            raise StoreUnavailable("the job store did not answer within the request's deadline") from None
        finally:
            service.waiting -= 1
        if state is None:
            raise JobRejected(404, "There is no job with this id (it may have expired).")
        state.pop("user", None)
        if not content:  # the client builds the text from the chunks: don't send it all again
            state.pop("content", None)
            state.pop("reasoning", None)
        return state

    @app.get(f"{PREFIX}/chat-stream-job/{{job_id}}", response_model=JobState, responses=ERRORS)
    async def poll_job(
        job_id: str,
        user: User,
        since: Annotated[int, Query(ge=0, le=10_000_000, description="First chunk index wanted.")] = 0,
        wait: Annotated[float, Query(ge=0, le=25, description="Long-poll up to this many seconds.")] = 0.0,
        content: Annotated[bool, Query(description=CONTENT_HELP)] = True,
    ) -> JSONResponse:
        """The job's state with the chunks from ``since`` on."""
        # The hot path: the state is already plain JSON, so skip re-validating it.
        return JSONResponse(await own_state(job_id, user, since, wait, content))

    @app.delete(f"{PREFIX}/chat-stream-job/{{job_id}}", response_model=CancelAnswer, responses=ERRORS)
    async def cancel_job(job_id: str, user: User) -> dict[str, Any]:
        """Ask the job to stop; what was produced so far is kept."""
        state = await own_state(job_id, user, 0, 0.0)
        requested = state["status"] == "streaming"
        if requested:
            await in_thread(service.store.request_cancel, job_id)
        return {"job_id": job_id, "status": state["status"], "cancel_requested": requested}

    @app.post(
        f"{PREFIX}/chat-stream",
        response_class=StreamingResponse,
        responses={**ERRORS, 200: {"content": {"text/event-stream": {}}}, 422: {"model": Problem}},
    )
    async def chat_stream(body: ChatJobBody, user: User) -> StreamingResponse:
        """Server-sent events of a job's chunks, for deployments without a proxy in between.

        The same admission as ``POST /chat-stream-job`` (the per-user cap answers 429, the run
        takes a place in the worker pool); the stream only reads the job, holding no thread."""
        job_id = (await admit(body, user))["job_id"]

        async def frames() -> AsyncIterator[str]:
            since, ended = 0, False
            try:
                while not ended:
                    try:
                        state = await own_state(job_id, user, since, service.max_wait_s, content=False)
                    except (JobRejected, StoreUnavailable) as exc:  # headers are sent: say it in the stream
                        log.error("stream of job %s stopped: %r", job_id, exc)
                        yield sse_frame(since, {"type": "error", "message": LOST})
                        return
                    for i, chunk in enumerate(state["chunks"], start=since):
                        yield sse_frame(i, chunk)
                    since, ended = state["next"], state["status"] != "streaming"
            finally:
                if not ended:  # the client went away: stop the run; the loop keeps the partial answer
                    # Shielded: a disconnect arrives as a cancel, which would cancel this await too.
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await in_thread(service.store.request_cancel, job_id)

        # X-Job-Id: the job behind the stream, to read again or cancel through the job API.
        return StreamingResponse(frames(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Job-Id": job_id})  # fmt: skip

    @app.get(f"{PREFIX}/chat-stream", include_in_schema=False)
    async def chat_stream_moved() -> JSONResponse:
        # A question in a URL ends up in proxy and server logs: it travels in a POST body now.
        return problem(
            405,
            'Send the question as a POST to this URL with a JSON body {"message": ...}; '
            "questions in URLs are no longer accepted.",
            Allow="POST",
        )

    @app.get("/healthz", include_in_schema=False)
    async def health() -> dict[str, Any]:
        # pid: which process answered, behind a shared port
        return {"ok": True, "role": service.role, "pid": os.getpid()}

    @app.get("/readyz", include_in_schema=False)
    async def ready() -> JSONResponse:
        checks: dict[str, bool] = {}
        try:
            # asyncio's thread wait gives up at the deadline (the thread finishes on its own).
            await asyncio.wait_for(asyncio.to_thread(service.store.ping), 0.5)
            checks["store"] = True
            alive = await asyncio.wait_for(asyncio.to_thread(service.store.workers_alive), 0.5)
            checks["worker"] = alive > 0
        except (StoreUnavailable, TimeoutError):
            checks["store"] = checks["worker"] = False
        if service.runner is not None:
            local = service.runner.ready()
            checks["worker"] = checks["worker"] or local["worker"]
            checks["transcripts"] = local["transcripts"]
        ok = all(checks.values())
        return JSONResponse(
            {"ready": ok, "role": service.role, "checks": checks}, status_code=200 if ok else 503
        )

    if service.extend is not None:
        service.extend(app)
    app.add_middleware(BodyLimit, limit=service.limits.max_body_bytes)  # before anything parses a body
    # Around FastAPI and all its layers: a well-formed poll or start skips them (fastpaths.py).
    fast = FastPaths(app, prefix=PREFIX, tokens=service.tokens, read=own_state, admit=admit,
                     body_model=ChatJobBody, max_body=service.limits.max_body_bytes)  # fmt: skip
    return SecurityHeaders(SignInThrottle(fast, service.limits.failed_sign_ins_per_minute), docs=docs)
