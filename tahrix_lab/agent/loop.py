"""The loop: a plain synchronous generator of ``(event, payload)`` tuples.

It knows no wire format; surfaces (the widget, the job service, the CLI, the
SSE encoder) translate the tuples. Events and their payloads:

    token        {"kind": "text", "text": str}
    reasoning    {"kind": "reasoning", "text": str, "signature"?: str, "redacted"?: str}
    tool_use     {"kind": "tool_use", "id": str, "name": str, "input": dict | None, "raw"?: str}
    tool_start   {"id", "name"}  (when the tool begins to run; tool_use is when the model asked)
    tool_result  {"id", "name", "status": "ok"|"error", "result": dict, "duration_ms": float}
    follow_up    {"cycle": int, "text": "Synthesizing results..."}  (before each call that follows tool results)
    effects      {"effects": [dict, ...]}
    approval     {"id", "name", "args", "summary", "why", "state": "pending"}  (a call waits for the
                  analyst instead of a tool_result; ``agent.approvals``. After a decision:
                  "state": "approved"|"denied" with "decision", "by", "at", "reason")
    usage        {"backend", "model", "usage": dict, "cost_usd": float | None,
                  "uncached_cost_usd": float | None (the same tokens with no cache reads or
                  writes: what caching saved is the difference), "latency_ms", "ttft_ms",
                  "stop_reason", "position"}  (once per model call)
    done         {"session_id", "stop_reason"}  (stop_reason "cancelled" when stopped, "awaiting_approval"
                  with "pending": [call, ...] when a call waits for the analyst: the run ends there)
    error        {"kind": "backend"|"budget"|"cycle_limit"|"internal", "message": str (calm,
                  for the user), "retryable": bool, ...}

No provider or tool failure escapes as an exception: the raw error goes to the
log (with traceback) and the user gets a calm sentence. Closing the generator
(``gen.close()``) or setting ``cancel`` stops the run; what was streamed so far
is persisted either way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from tahrix_lab.agent.approvals import AWAITING, pending_calls
from tahrix_lab.agent.backends.base import Backend, ToolSpec
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import StoreUnavailableError
from tahrix_lab.agent.history import build_messages
from tahrix_lab.agent.model_call import budget_refusal, call_model
from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.retry import INTERNAL_ERROR_MESSAGE, STORE_ERROR_MESSAGE, RetryPolicy
from tahrix_lab.agent.run_state import LoopEvent, Run, close_stream
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tool_round import run_tool_round
from tahrix_lab.agent.tools import DEFAULT_MAX_RESULT_BYTES, REGISTRY, ToolRegistry
from tahrix_lab.agent.transcript import Message, Part, Session

__all__ = ["FOLLOW_UP_TEXT", "MAX_TOOL_CYCLES", "LoopEvent", "ask", "run_agent"]

log = logging.getLogger(__name__)

MAX_TOOL_CYCLES = 8
FOLLOW_UP_TEXT = "Synthesizing results..."


def run_agent(
    session: Session | str,
    *,
    store: TranscriptStore,
    backend: Backend,
    model: str,
    inference: dict[str, Any] | None = None,
    context: Any = None,
    budget: Budget | None = None,
    max_tool_cycles: int = MAX_TOOL_CYCLES,
    follow_up_instruction: str | None = None,
    tools: Sequence[ToolSpec] | None = None,
    registry: ToolRegistry | None = None,
    retry: RetryPolicy | None = None,
    cancel: threading.Event | None = None,
    pricer: Pricer | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    history: Sequence[Message] | None = None,
) -> Iterator[LoopEvent]:
    """Run the model on the session's stored history until it answers.

    The caller persists the user's message first (or uses ``ask``). ``tools``
    overrides the catalog for the session's purpose; ``context`` is passed to
    every tool (a ``ContextProvider`` is resolved per call). ``history``: the
    session's messages as the caller just stored them (a new session), so the
    loop does not read them back; by default it reads them from ``store``.
    """
    run = Run(
        session=session if isinstance(session, Session) else store.get_session(session),
        store=store,
        backend=backend,
        model=model,
        inference=inference,
        context=context,
        budget=budget,
        max_tool_cycles=max_tool_cycles,
        follow_up_instruction=follow_up_instruction,
        tools=tools,
        registry=registry or REGISTRY,
        retry=retry or RetryPolicy(),
        cancel=cancel,
        pricer=pricer or (budget.pricer if budget is not None else DEFAULT_PRICER),
        max_result_bytes=max_result_bytes,
        history=history,
    )
    events = _cycle(run)
    try:
        for event, payload in events:
            if event in ("done", "error"):
                _record_turn_end(store, run.session.id, event, payload)
            yield event, payload
    except Exception as exc:
        log.exception("the agent loop failed on session %s", run.session.id)
        unreachable = isinstance(exc, StoreUnavailableError)  # the record is down or frozen: try again
        failure: dict[str, Any] = {
            "kind": "internal",
            "message": STORE_ERROR_MESSAGE if unreachable else INTERNAL_ERROR_MESSAGE,
            "retryable": unreachable,
        }
        _record_turn_end(store, run.session.id, "error", failure)
        yield "error", failure
    finally:
        close_stream(events)  # a consumer that stops early still gets the partial answer persisted


def _record_turn_end(store: TranscriptStore, session_id: str, event: str, payload: dict[str, Any]) -> None:
    """Keep how the turn ended, so a history draws what the live run showed."""
    try:
        if event == "done":
            store.append_turn_end(session_id, stop_reason=payload.get("stop_reason"))
        else:
            store.append_turn_end(
                session_id, error_kind=payload.get("kind"), error_message=payload.get("message")
            )
    except Exception:  # the answer matters more than its bookkeeping
        log.exception("could not record how the turn ended on session %s", session_id)


def ask(
    store: TranscriptStore,
    session: Session | str,
    text: str,
    *,
    media: Sequence[Part] = (),
    **kwargs: Any,
) -> Iterator[LoopEvent]:
    """Persist the user's message now and return the loop over it."""
    session_id = session.id if isinstance(session, Session) else session
    store.append_message(session_id, Message.user(text, *media))
    return run_agent(session, store=store, **kwargs)


def _cycle(run: Run) -> Iterator[LoopEvent]:
    """Call the model, run the tools it asks for, and again, until it answers or a limit ends the run."""
    stored = list(run.history) if run.history is not None else run.store.load_messages(run.session.id)
    run.sent = build_messages(stored, run.max_result_bytes)
    specs = list(run.tools) if run.tools is not None else run.registry.catalog_for(run.session.purpose)
    offered = [s["name"] for s in specs]
    cycle = 0
    while True:
        if run.cancelled():  # stopped before this call began
            yield run.stopped()
            return
        refusal = budget_refusal(run)
        if refusal is not None:
            yield refusal
            return
        history = list(run.sent)
        system = run.session.system_prompt
        if cycle > 0:
            yield "follow_up", {"cycle": cycle, "text": FOLLOW_UP_TEXT}
            if run.follow_up_instruction:
                system = f"{system}\n\n{run.follow_up_instruction}" if system else run.follow_up_instruction

        message = yield from call_model(run, system, history, specs, offered)
        if message is None:
            return

        tool_uses = message.tool_uses()
        if not tool_uses:
            yield "done", {"session_id": run.session.id, "stop_reason": message.stop_reason}
            return
        if cycle >= run.max_tool_cycles:
            run.close_unanswered(tool_uses, "The tool-call limit for one question was reached; not run.")
            log.warning("session %s hit the tool-cycle ceiling (%d)", run.session.id, run.max_tool_cycles)
            yield (
                "error",
                {
                    "kind": "cycle_limit",
                    "message": (
                        f"I stopped after {run.max_tool_cycles} rounds of tool calls without reaching an answer. "
                        "Try a narrower question, or ask me to continue."
                    ),
                    "retryable": False,
                },
            )
            return

        waiting = yield from run_tool_round(run, tool_uses, offered)
        if waiting:  # the run ends here; the analyst's decision continues it (approvals.decide)
            pending = [c.to_dict() for c in pending_calls(run.sent)]
            yield "done", {"session_id": run.session.id, "stop_reason": AWAITING, "pending": pending}
            return
        if run.cancelled():
            yield run.stopped()
            return
        cycle += 1
