"""The service page and its data routes: what an analyst needs beside the chat.

    GET /                                         the standalone chat page (and /static/...: widgets/)
    GET /api/v1/agent/me                          who the token belongs to (the page's sign-in)
    GET /api/v1/agent/sessions/{session_id}       the conversation so far + the job running in it
    GET /api/v1/agent/cases                       the cases the signed-in user may open (the picker)
    GET /api/v1/agent/cases/{case_id}             the case and example questions to start from
    GET /api/v1/agent/cases/{case_id}/flags       the flags panel's rows (triage, each with its flags)
    GET /api/v1/agent/cases/{case_id}/graph       the fund-flow graph panel's graph
    POST /api/v1/agent/cases/{case_id}/graph/onward  {node, edges_in}: "Trace onward" from a node
    POST /api/v1/agent/cases/{case_id}/flags/{flag_id}/decision  {action}: Confirm / Dismiss a flag
    POST /api/v1/agent/cases/{case_id}/flags/{flag_id}/undo  {audit_id}: take back one's own decision
    GET /api/v1/agent/conversations               the user's conversations, newest first
    GET /api/v1/agent/conversations/{id}/citations  each stored turn's citations line (not in the transcript)
    POST /api/v1/agent/conversations/{id}/decisions  {call_id, approve, reason}: Approve / Deny, as a job

Same bearer token as every other ``/api`` route. A case the user may not open answers
exactly like an unknown one (404). Here, at the composition root, the routes call the case
service (``CaseIntegration``) the process runs its jobs with; the job service takes them
through its one seam, ``Service.extend`` (``mount``), and never imports the case domain.
A service of plain chat sessions has no case service: ``/cases`` says so.
"""

# No `from __future__ import annotations`: FastAPI must see the route's dependency types itself.

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tahrix_lab.agent.errors import StoreUnavailableError, UserFacingError
from tahrix_lab.app.case_service import CaseIntegration, ViewOnly
from tahrix_lab.flow import history_chunks
from tahrix_lab.flow.resources import widgets_dir
from tahrix_lab.jobs.contract import JobRejected, JobRequest
from tahrix_lab.jobs.domain import layers
from tahrix_lab.jobs.http.api import ERRORS, PREFIX, User, problem
from tahrix_lab.jobs.runner import JobRunner

MAX_CONVERSATIONS = 100
NO_CASE = "There is no case with this id."
NO_CASES = "This service runs plain chat sessions: it has no cases."
NO_RUNNER = "This process does not hold the cases and transcripts; ask the worker's process."
RECORD_DOWN = "The case record is unreachable right now. Please try again in a moment."

log = logging.getLogger(__name__)


def _runner(request: Request) -> JobRunner:
    """The process's runner, which holds the cases and transcripts (an API process has none)."""
    runner: JobRunner | None = request.app.state.service.runner
    if runner is None:
        raise JobRejected(503, NO_RUNNER)
    return runner


def _cases(runner: Annotated[JobRunner, Depends(_runner)]) -> CaseIntegration | None:
    """The case service the runner's jobs run with, or None: plain chat sessions."""
    # Through the wrappers around it (the fake model's script tools), as the runner looks.
    return next((i for i in layers(runner.integration) if isinstance(i, CaseIntegration)), None)


Runner = Annotated[JobRunner, Depends(_runner)]
Cases = Annotated[CaseIntegration | None, Depends(_cases)]


def _found(found: dict[str, Any] | None) -> JSONResponse:
    if found is None:
        raise JobRejected(404, NO_CASE, "case_id")
    return JSONResponse(found)


async def _thread(fn: Any, *args: Any) -> Any:
    """DuckDB reads block: off the event loop, like the job routes' starts and cancels."""
    return await anyio.to_thread.run_sync(fn, *args)


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    call_id: str = Field(min_length=1, max_length=200, description="The waiting call's id (its tool card).")
    approve: bool
    reason: str | None = Field(default=None, max_length=2000, description="Why, kept in the transcript.")


class FlagDecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["confirm_flag", "dismiss_flag"]


class UndoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    audit_id: str = Field(
        min_length=1, max_length=64, description="The decision's audit id (``last_decision``)."
    )


class OnwardBody(BaseModel):
    node: dict[str, Any] = Field(description="The graph node to trace from, as the graph panel has it.")
    edges_in: list[dict[str, Any]] = Field(
        default_factory=list, max_length=5000, description="The graph's flows into that node."
    )

    @field_validator("node")
    @classmethod
    def _has_id(cls, node: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(node.get("id"), str) or not 0 < len(node["id"]) <= 300:
            raise ValueError("the node needs its graph id, a string such as 'ethereum:0x…'")
        return node


def mount(app: FastAPI) -> None:
    """The page, its static files (no token: the page asks for one) and its data routes, on the job
    service's app (``jobs.server.build(..., extend=mount)``)."""
    app.include_router(router, prefix=PREFIX, responses=ERRORS)
    app.add_exception_handler(StoreUnavailableError, _record_down)
    widgets = widgets_dir()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse((widgets / "page.html").read_text())

    app.mount("/static", StaticFiles(directory=widgets), name="static")


async def _record_down(request: Request, exc: Exception) -> JSONResponse:
    """The team's PostgreSQL record did not answer (down, frozen, every connection busy): a calm,
    retryable 503 for the page; the server it names goes to the log only."""
    log.error("the case record is unreachable: %s", exc)
    return problem(503, RECORD_DOWN, **{"Retry-After": "5"})


router = APIRouter()


@router.get("/me")
async def who_am_i(user: User) -> dict[str, str]:
    """Who this token belongs to (the page checks the token at sign-in)."""
    return {"user": user}


@router.get("/sessions/{session_id}")
async def session_history(session_id: str, user: User, runner: Runner) -> JSONResponse:
    """The conversation as chunks, and the job still running in it (to reattach to)."""
    return JSONResponse(await _thread(_history, runner, session_id, user))


@router.get("/cases")
async def cases(user: User, cases: Cases) -> JSONResponse:
    """The cases this user may open (none when the service runs plain chat)."""
    if cases is None:
        return JSONResponse({"cases": [], "note": NO_CASES})
    return JSONResponse({"cases": await _thread(cases.cases_for, user), "note": None})


@router.get("/cases/{case_id}")
async def case(user: User, cases: Cases, case_id: str) -> JSONResponse:
    """The case and questions to start from."""
    return _found(None if cases is None else await _thread(cases.case_view, user, case_id, "examples"))


@router.get("/cases/{case_id}/{part}")
async def case_panel(user: User, cases: Cases, case_id: str, part: Literal["flags", "graph"]) -> JSONResponse:
    """What the flags panel or the fund-flow graph panel draws for this case."""
    return _found(None if cases is None else await _thread(cases.case_view, user, case_id, part))


@router.post("/cases/{case_id}/graph/onward")
async def trace_onward(user: User, cases: Cases, case_id: str, body: OnwardBody) -> JSONResponse:
    """What "Trace onward" adds to the graph (the page merges it in)."""
    if cases is None:
        return _found(None)
    try:
        return _found(await _thread(cases.trace_onward, user, case_id, body.node, body.edges_in))
    except UserFacingError as exc:  # e.g. a bridge contract with no deposit in this graph
        raise JobRejected(422, str(exc), "node") from None


@router.post("/cases/{case_id}/flags/{flag_id}/decision")
async def flag_decision(
    user: User, cases: Cases, case_id: str, flag_id: str, body: FlagDecisionBody
) -> JSONResponse:
    """The signed-in analyst's Confirm or Dismiss on a flag, audited under their name (a viewer: 403);
    the flags panel's rows after it."""
    if cases is None:
        return _found(None)
    return await _deciding(cases.decide_flag, "flag_id", user, case_id, flag_id, body.action)


@router.post("/cases/{case_id}/flags/{flag_id}/undo")
async def flag_undo(user: User, cases: Cases, case_id: str, flag_id: str, body: UndoBody) -> JSONResponse:
    """Take back the signed-in analyst's own decision on a flag (``last_decision.audit_id`` of the
    decision's answer); refused when the flag was decided again since. The panel's rows after it."""
    if cases is None:
        return _found(None)
    return await _deciding(cases.undo_flag_decision, "audit_id", user, case_id, flag_id, body.audit_id)


async def _deciding(work: Callable[..., Any], field: str, *args: Any) -> JSONResponse:
    """A decision on a flag: a viewer gets 403; a refusal (an unknown flag, not one's decision,
    decided again since) a 422 naming ``field``."""
    try:
        return _found(await _thread(work, *args))
    except ViewOnly as exc:
        raise JobRejected(403, str(exc), "case_id") from None
    except UserFacingError as exc:
        raise JobRejected(422, str(exc), field) from None


@router.get("/conversations")
async def conversations(
    user: User, runner: Runner, cases: Cases, limit: Annotated[int, Query(ge=1, le=MAX_CONVERSATIONS)] = 30
) -> JSONResponse:
    """The user's conversations, newest first: id, title, first question, case, time."""
    return JSONResponse({"conversations": await _thread(_conversations, runner, cases, user, limit)})


@router.get("/conversations/{session_id}/citations")
async def conversation_citations(user: User, runner: Runner, cases: Cases, session_id: str) -> JSONResponse:
    """Per turn of the stored conversation, its citations chunk's fields (or null): for a page that
    reads a conversation again (``GET /sessions/{id}``) and wants the lines its live run showed."""
    return JSONResponse({"turns": await _thread(_citations, runner, cases, session_id, user)})


@router.post("/conversations/{session_id}/decisions")
async def decision(request: Request, user: User, session_id: str, body: DecisionBody) -> JSONResponse:
    """The signed-in user's Approve or Deny on a call that waits, as a job (admitted, capped and run
    like a question): poll it like one; it goes on with the call's result or the denial."""
    req = JobRequest(user=user, message="", session_id=session_id, decision=body.model_dump())
    return JSONResponse(await request.app.state.service.admit(req))


def _history(runner: JobRunner, session_id: str, user: str) -> dict[str, Any]:
    session = runner.own_session(session_id, user)
    messages = runner.transcripts.load_messages(session.id)
    job = runner.store.session_job(session.id)
    if job is not None:  # the running job replays its own turn from its first chunk
        messages = messages[: job["history_len"]]
        job = {"job_id": job["job_id"], "message": job["message"]}
    return {"session_id": session.id, "chunks": history_chunks(messages), "job": job}


def _citations(runner: JobRunner, cases: CaseIntegration | None, session_id: str, user: str) -> list[Any]:
    session = runner.own_session(session_id, user)  # someone else's: the same 404 as an unknown one
    if cases is None:
        return []
    return list(
        cases.turn_citations(session.id, history_chunks(runner.transcripts.load_messages(session.id)))
    )


def _conversations(
    runner: JobRunner, cases: CaseIntegration | None, user: str, limit: int
) -> list[dict[str, Any]]:
    store = runner.transcripts
    # A conversation on a case the user may no longer open is not listed (as someone else's).
    sessions = [s for s in store.list_sessions(user=user, limit=limit) if runner.may_open(user, s)]
    case_of = cases.session_cases([s.id for s in sessions]) if cases is not None else {}
    out = []
    for s in sessions:
        question = next((m.text for m in store.load_messages(s.id) if m.role == "user" and m.text), None)
        out.append({
            "session_id": s.id,
            "title": s.title,
            "question": question[:300] if question else None,
            "case_id": case_of.get(s.id),
            "created_at": s.created_at.isoformat() if s.created_at else None,
        })  # fmt: skip
    return out


__all__ = ["mount", "router"]
