"""The analyst's decision on a call that waits (``agent.approvals``), and the run that follows it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from tahrix_lab.agent.approvals import AWAITING, pending_calls
from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.agent.loop import LoopEvent, run_agent
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import (
    DEFAULT_MAX_RESULT_BYTES,
    REGISTRY,
    Approval,
    ToolRegistry,
    error_result,
    run_tool,
)
from tahrix_lab.agent.transcript import Message, Part, Session

__all__ = ["decide"]

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def decide(
    store: TranscriptStore,
    session: Session | str,
    call_id: str,
    *,
    approve: bool,
    by: str,
    reason: str | None = None,
    context: Any = None,
    registry: ToolRegistry | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    **run_kwargs: Any,
) -> Iterator[LoopEvent]:
    """Record the analyst's decision on a pending call, then continue the run.

    Checks at once (raising ``UserFacingError`` with a calm sentence) that ``by`` names a
    person and that the call waits; returns the events: ``approval`` (the decision),
    ``tool_start`` / ``tool_result`` / ``effects`` for the call, then the loop's own events
    (``run_agent`` with ``run_kwargs``: backend, model, budget …) once no call of the turn
    waits any more, else ``done`` with ``stop_reason="awaiting_approval"``. Without a
    ``backend`` (a surface with no model: MCP) they end after the call's result
    (``done`` / ``"decided"``). The surface
    decides who ``by`` is (the notebook's analyst, the signed-in user): never the model.
    """
    who = (by or "").strip()
    if not who or who.lower().startswith("agent"):
        raise UserFacingError("A decision needs the name of the analyst who makes it (not the assistant's).")
    sess = session if isinstance(session, Session) else store.get_session(session)
    if not any(c.id == call_id for c in pending_calls(store.load_messages(sess.id))):
        raise UserFacingError(
            f"No call {call_id!r} is waiting for approval in this conversation: it was decided already, "
            "or a new question was asked since."
        )
    reg = registry or REGISTRY
    decision = Approval(who, (reason or "").strip() or None)
    return _resume(store, sess, call_id, approve, decision, context, reg, max_result_bytes, run_kwargs)


def _lock(session_id: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(session_id, threading.Lock())


def _resume(
    store: TranscriptStore,
    session: Session,
    call_id: str,
    approve: bool,
    decision: Approval,
    context: Any,
    registry: ToolRegistry,
    max_result_bytes: int,
    run_kwargs: dict[str, Any],
) -> Iterator[LoopEvent]:
    # Held only while the call runs and its result is written, never while a human thinks.
    with _lock(session.id):
        waiting = pending_calls(store.load_messages(session.id))
        call = next((c for c in waiting if c.id == call_id), None)
        if call is None:  # two clicks, or two surfaces: the first decision stands
            yield (
                "error",
                {"kind": "approval", "message": "That call was already decided.", "retryable": False},
            )
            return
        stamp = {"decision": "approved" if approve else "denied", "by": decision.by,
                 "at": decision.at.isoformat(), "reason": decision.reason}  # fmt: skip
        if approve:
            out = run_tool(Part.of_tool_use(call.id, call.name, call.args), context, registry=registry,
                           session=session, max_result_bytes=max_result_bytes, approval=decision)  # fmt: skip
            part = out.to_part()
            part.tool_result = {**out.result, "approval": stamp}
        else:
            why = f": {decision.reason}" if decision.reason else " (no reason given)"
            result = error_result(
                "denied_by_analyst",
                f"The analyst {decision.by} denied this call{why}. It was not run. Do not make it again in "
                "another form; take the reason into account and tell the analyst what you would do instead.",
                analyst_message=f"Denied by {decision.by}{why}.",
            )
            part = Part.of_tool_result(call.id, call.name, {**result, "approval": stamp}, "error")
        store.append_message(session.id, Message(role="tool", parts=[part]))
    yield "approval", {**call.to_dict(), "state": stamp["decision"], **stamp}
    if approve:
        yield "tool_start", {"id": call.id, "name": call.name}
    yield "tool_result", {"id": call.id, "name": call.name, "status": part.tool_status or "ok",
                          "result": part.tool_result, "duration_ms": part.duration_ms}  # fmt: skip
    if part.effects:
        yield "effects", {"effects": list(part.effects)}
    rest = [c for c in waiting if c.id != call_id]
    if not rest and run_kwargs.get("backend") is None:  # a surface with no model (MCP): the result is all
        yield "done", {"session_id": session.id, "stop_reason": "decided"}
        return
    if rest:
        yield (
            "done",
            {"session_id": session.id, "stop_reason": AWAITING, "pending": [c.to_dict() for c in rest]},
        )
        return
    yield from run_agent(session, store=store, context=context, registry=registry,
                         max_result_bytes=max_result_bytes, **run_kwargs)  # fmt: skip
