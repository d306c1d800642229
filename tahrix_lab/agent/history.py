"""The history as sent to a model: every tool call answered, every tool result capped.

The stored transcript stays as it was; this builds what each backend is given.
"""

from __future__ import annotations

from collections.abc import Sequence

from tahrix_lab.agent.approvals import fold_decisions
from tahrix_lab.agent.tools import DEFAULT_MAX_RESULT_BYTES, error_result, model_facing
from tahrix_lab.agent.transcript import Message, Part

INTERRUPTED = error_result(
    "interrupted",
    "This tool call was interrupted before it returned a result; call it again if it is still needed.",
)


def build_messages(
    messages: Sequence[Message], max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
) -> list[Message]:
    """The history as sent to a backend.

    Every assistant ``tool_use`` is answered by the tool message that follows,
    in call order: a call left without a result (the process died in between)
    gets an ``interrupted`` error result, so the history is valid for every
    provider. Each tool result is capped to what the model may see. An analyst's
    decision on a call that waited takes the place of its pending result
    (``approvals.fold_decisions``). The stored messages are not modified.
    """
    messages = fold_decisions(messages)
    out: list[Message] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        i += 1
        if msg.role == "tool":  # a tool message with no assistant call before it: pass it on, capped
            out.append(capped_message(msg, max_result_bytes))
            continue
        out.append(msg)
        calls = msg.tool_uses() if msg.role == "assistant" else []
        if not calls:
            continue
        results: dict[str | None, Part] = {}
        template = msg
        if i < len(messages) and messages[i].role == "tool":
            template = messages[i]
            results = {p.tool_use_id: p for p in template.parts if p.type == "tool_result"}
            extras = [p for p in template.parts if p.type != "tool_result"]
            i += 1
        else:
            extras = []
        parts = [
            _capped(results.pop(c.tool_use_id), max_result_bytes)
            if c.tool_use_id in results
            else Part.of_tool_result(c.tool_use_id or "", c.tool_name, INTERRUPTED, "error")
            for c in calls
        ]
        parts += [_capped(p, max_result_bytes) for p in results.values()] + extras
        out.append(_replace_parts(template, parts, role="tool"))
    return out


def capped_message(msg: Message, max_bytes: int) -> Message:
    """``msg`` with each tool result capped to what the model may see."""
    return _replace_parts(msg, [_capped(p, max_bytes) for p in msg.parts])


def _capped(part: Part, max_bytes: int) -> Part:
    if part.type != "tool_result" or part.tool_result is None:
        return part
    result = model_facing(part.tool_result, max_bytes)
    if result is part.tool_result:
        return part
    return Part.of_tool_result(part.tool_use_id or "", part.tool_name, result, part.tool_status or "ok")


def _replace_parts(msg: Message, parts: list[Part], role: str | None = None) -> Message:
    return Message(
        role=role or msg.role,  # type: ignore[arg-type]
        parts=parts,
        session_id=msg.session_id,
        position=msg.position,
        created_at=msg.created_at,
    )
