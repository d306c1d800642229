"""A human decides: tool calls that wait for the analyst's approval.

A tool (or a context provider) raises ``NeedsApproval``; ``run_tool`` answers the call
with a *pending* result (``{"error": {"type": "awaiting_approval", "summary", "why"}}``),
the loop stores it like any other result, emits an ``approval`` event and ends the run
with ``done`` / ``stop_reason="awaiting_approval"``. Nothing waits: no thread, no
transaction, no open stream. The pending call lives in the transcript, so any surface
(the widget, the job page, a reload) finds it again with ``pending_calls``.

``decisions.decide`` records the analyst's answer as a later ``tool`` message holding the call's
final result, stamped with ``{"approval": {"decision", "by", "at", "reason"}}``: on
approve the tool runs for real with ``Approval`` in its context (the tool acts under the
analyst's name); on deny the model gets the denial and the reason. Then the loop goes on.
``fold_decisions`` puts that result in the pending one's place in the history sent to a
model, so every provider sees one result per call, and a replay sends the same bytes.

The model can never approve itself: there is no tool for it, a decision names a human
(never an ``agent`` actor) and only calls that are pending in the latest turn can be decided.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tahrix_lab.agent.tools import AWAITING, Approval
from tahrix_lab.agent.transcript import Message

__all__ = ["AWAITING", "Approval", "PendingCall", "fold_decisions", "is_pending", "pending_calls"]


@dataclass(frozen=True)
class PendingCall:
    """A call that waits for the analyst: what the surface shows beside Approve / Deny."""

    id: str
    name: str
    args: dict[str, Any] | None
    summary: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "args": self.args, "summary": self.summary, "why": self.why}


def is_pending(result: Any) -> bool:
    error = result.get("error") if isinstance(result, dict) else None
    return isinstance(error, dict) and error.get("type") == AWAITING


def pending_calls(messages: Sequence[Message]) -> list[PendingCall]:
    """The calls of the latest turn still waiting for a decision, in call order.

    A new question from the analyst ends the wait: the model was told the call did not run.
    """
    start = max((i + 1 for i, m in enumerate(messages) if m.role == "user"), default=0)
    uses = {p.tool_use_id: p for m in messages[start:] if m.role == "assistant" for p in m.tool_uses()}
    pending: dict[str, PendingCall] = {}
    for m in messages[start:]:
        for p in m.parts if m.role == "tool" else ():
            cid = p.tool_use_id or ""
            if p.type != "tool_result":
                continue
            if is_pending(p.tool_result):
                err = (p.tool_result or {})["error"]
                use = uses.get(cid)
                args = use.tool_input if use is not None else None
                pending[cid] = PendingCall(cid, p.tool_name or "", args, str(err.get("summary") or ""),
                                           str(err.get("why") or ""))  # fmt: skip
            else:
                pending.pop(cid, None)
    return list(pending.values())


def fold_decisions(messages: Sequence[Message]) -> list[Message]:
    """The history with each decision's result in its pending result's place (stored messages untouched)."""
    out: list[Message] = []
    where: dict[str | None, tuple[int, int]] = {}  # pending call id -> (message, part) in ``out``
    for m in messages:
        if m.role == "tool" and m.parts and all(p.tool_use_id in where for p in m.parts):
            for p in m.parts:
                i, j = where.pop(p.tool_use_id)
                parts = list(out[i].parts)
                parts[j] = p
                out[i] = dataclasses.replace(out[i], parts=parts)
            continue
        if m.role == "tool":
            for j, p in enumerate(m.parts):
                if p.type == "tool_result" and is_pending(p.tool_result):
                    where[p.tool_use_id] = (len(out), j)
        out.append(m)
    return out
