"""The one mapping from the loop's ``(event, payload)`` tuples to chunks.

Chunks are what every surface renders: the job service stores and serves
them, the SSE encoder streams them, the notebook widget sends them to the
front end, and ``widgets/flow.js`` draws them. Vocabulary:

    {"type": "user", "text"}                                  (history only)
    {"type": "reasoning", "text", "signature"?: bool, "redacted"?: bool}
    {"type": "content", "text"}
    {"type": "tool_call", "id", "name", "args", "raw"?}
    {"type": "tool_start", "id", "name"}                       (the tool begins to run)
    {"type": "tool_result", "id", "name", "result", "status", "duration_ms"?, "analyst_message"?}
                                   (an error's sentence for the analyst; the result keeps the model's)
    {"type": "follow_up", "text": "Synthesizing results..."}
    {"type": "effects", "effects": [...]}
    {"type": "usage", "model", "backend", "usage": {...}, "cost_usd", "uncached_cost_usd", "latency_ms", "ttft_ms",
     "stop_reason"}
    {"type": "citations", "line", "counts": {verified, close, not_found, total}, "citations": [...]}
                                          (a case answer's citations checked; before "done")
    {"type": "approval", "id", "name", "args", "summary", "why"?, "state": "pending"|"approved"|"denied",
     "by"?, "at"?, "reason"?}      (a call waits for the analyst's Approve / Deny; then their decision)
    {"type": "error", "message", "kind"}
    {"type": "done", "stop_reason"}          (stop_reason "awaiting_approval": the run waits for a decision)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tahrix_lab.agent.loop import FOLLOW_UP_TEXT
from tahrix_lab.agent.tools import AWAITING
from tahrix_lab.agent.transcript import Message
from tahrix_lab.flow.chunklog import Chunk, compact


def to_chunk(event: str, payload: dict[str, Any]) -> Chunk | None:
    """The chunk for one loop tuple (``None`` for events with nothing to show)."""
    if event == "token":
        return {"type": "content", "text": payload["text"]}
    if event == "reasoning":
        chunk: Chunk = {"type": "reasoning", "text": payload.get("text") or ""}
        if payload.get("signature"):
            chunk["signature"] = True  # opaque provider data stays in the transcript
        if payload.get("redacted"):
            chunk["redacted"] = True
        if chunk["text"] == "" and len(chunk) == 2:
            return None
        return chunk
    if event == "tool_use":
        chunk = {
            "type": "tool_call",
            "id": payload["id"],
            "name": payload["name"],
            "args": payload.get("input"),
        }
        if payload.get("input") is None and payload.get("raw") is not None:
            chunk["raw"] = payload["raw"]
        return chunk
    if event == "tool_start":
        return {"type": "tool_start", "id": payload["id"], "name": payload["name"]}
    if event == "tool_result":
        return _tool_result(payload["id"], payload["name"], payload["result"], payload["status"],
                            payload.get("duration_ms"))  # fmt: skip
    if event == "follow_up":
        return {"type": "follow_up", "text": payload.get("text", "Synthesizing results...")}
    if event == "effects":
        return {"type": "effects", "effects": payload["effects"]}
    if event == "usage":
        return {"type": "usage", **{k: payload.get(k) for k in (
            "model", "backend", "usage", "cost_usd", "uncached_cost_usd", "latency_ms", "ttft_ms", "stop_reason")}}  # fmt: skip
    if event == "approval":
        return approval_chunk(payload)
    if event == "citations":
        return {"type": "citations", **{k: payload.get(k) for k in ("line", "counts", "citations")}}
    if event == "error":
        return {"type": "error", "message": payload["message"], "kind": payload.get("kind", "internal")}
    if event == "done":
        return {"type": "done", "stop_reason": payload.get("stop_reason")}
    return None


def chunks(events: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[Chunk]:
    for event, payload in events:
        chunk = to_chunk(event, payload)
        if chunk is not None:
            yield chunk


# A tool result the loop wrote without running the tool (stopped, or over the
# cycle limit). Live, no tool_result event is sent for those: the turn's end
# marks the tool instead, so history leaves them out too.
_UNRUN = frozenset({"cancelled", "not_run"})
# Stop reasons of the partial answers the loop persists when a call is cut short.
_PARTIAL = frozenset({"cancelled", "error"})


def history_chunks(
    messages: Iterable[Message],
    turn_ends: Iterable[dict[str, Any]] = (),
    *,
    price: Callable[[Message], tuple[float | None, float | None]] | None = None,
) -> list[Chunk]:
    """A stored transcript as the chunks its live run sent (tokens merged).

    ``turn_ends`` (``TranscriptStore.load_turn_ends``) say how each turn ended
    (done, stopped, an error); ``price`` gives an assistant message's ``(cost, uncached cost)``
    (``Pricer.price_message``).
    Follow-up boundaries are implied: a model call that follows tool results
    in the same turn is a follow-up.
    """
    ends: dict[int, list[dict[str, Any]]] = {}
    for end in turn_ends:
        ends.setdefault(int(end["position"]), []).append(end)
    out: list[Chunk] = []
    after_tools = False
    calls: dict[Any, Any] = {}  # tool call id -> its arguments, for an approval card
    for m in messages:
        if m.role == "user":
            out.append({"type": "user", "text": m.text})
            after_tools = False
        elif m.role == "assistant":
            if after_tools:
                out.append({"type": "follow_up", "text": FOLLOW_UP_TEXT})
            out.extend(_assistant_chunks(m, price))
            calls.update((p.tool_use_id, p.tool_input) for p in m.tool_uses())
        elif m.role == "tool":
            out.extend(_tool_chunks(m, calls))
            after_tools = True
        for end in ends.get(m.position if m.position is not None else -1, []):
            if end.get("error_kind") or end.get("error_message"):
                out.append({"type": "error", "message": end.get("error_message") or "",
                            "kind": end.get("error_kind") or "internal"})  # fmt: skip
            else:
                out.append({"type": "done", "stop_reason": end.get("stop_reason")})
    return compact(out)


def _assistant_chunks(
    m: Message, price: Callable[[Message], tuple[float | None, float | None]] | None
) -> list[Chunk]:
    out: list[Chunk] = []
    for p in m.parts:
        if p.type == "text":
            out.append({"type": "content", "text": p.text or ""})
        elif p.type == "reasoning":
            chunk: Chunk = {"type": "reasoning", "text": p.text or ""}
            if p.signature:
                chunk["signature"] = True
            if p.is_redacted_reasoning:
                chunk["redacted"] = True
            out.append(chunk)
        elif p.type == "tool_use":
            call: Chunk = {
                "type": "tool_call",
                "id": p.tool_use_id,
                "name": p.tool_name,
                "args": p.tool_input,
            }
            if p.tool_input is None and p.text is not None:
                call["raw"] = p.text
            out.append(call)
    if m.stop_reason in _PARTIAL:
        return out  # a call cut short (stopped, failed) reports no usage live
    cost, uncached = price(m) if price is not None else (None, None)
    out.append({"type": "usage", "model": m.model_id, "backend": m.backend,
                "usage": m.usage.to_dict() if m.usage else None,
                "cost_usd": cost, "uncached_cost_usd": uncached,
                "latency_ms": m.latency_ms, "ttft_ms": m.ttft_ms, "stop_reason": m.stop_reason})  # fmt: skip
    return out


def approval_chunk(payload: dict[str, Any]) -> Chunk:
    """The card of a call that waits for the analyst, or of their decision on it."""
    keys = ("id", "name", "args", "summary", "why", "state", "by", "at", "reason")
    return {"type": "approval", **{k: payload[k] for k in keys if payload.get(k) is not None}}


def _tool_chunks(m: Message, calls: dict[Any, Any]) -> list[Chunk]:
    out: list[Chunk] = []
    effects: list[dict[str, Any]] = []
    for p in m.parts:
        if p.type != "tool_result":
            continue
        result = p.tool_result or {}
        error = result.get("error") if isinstance(result, dict) else None
        if p.tool_status == "error" and isinstance(error, dict) and error.get("type") in _UNRUN:
            continue
        base = {"id": p.tool_use_id, "name": p.tool_name, "args": calls.get(p.tool_use_id)}
        if isinstance(error, dict) and error.get("type") == AWAITING:  # drawn as live: start, then the card
            out.append({"type": "tool_start", "id": p.tool_use_id, "name": p.tool_name})
            out.append(approval_chunk({**base, **error, "state": "pending"}))
            continue
        stamp = result.get("approval") if isinstance(result, dict) else None
        if isinstance(stamp, dict):
            out.append(approval_chunk({**base, **stamp, "state": stamp.get("decision")}))
            if stamp.get("decision") != "approved":
                out.append(
                    _tool_result(p.tool_use_id, p.tool_name, result, p.tool_status or "ok", p.duration_ms)
                )
                continue
        out.append({"type": "tool_start", "id": p.tool_use_id, "name": p.tool_name})
        out.append(_tool_result(p.tool_use_id, p.tool_name, result, p.tool_status or "ok", p.duration_ms))
        effects.extend(p.effects or [])
    if effects:
        out.append({"type": "effects", "effects": effects})
    return out


def _tool_result(id: Any, name: Any, result: Any, status: str, duration_ms: Any) -> Chunk:
    chunk: Chunk = {"type": "tool_result", "id": id, "name": name, "result": result, "status": status,
                    "duration_ms": duration_ms}  # fmt: skip
    if status == "error":
        note = analyst_message(str(name or "the tool"), result)
        if note:
            chunk["analyst_message"] = note
    return chunk


# What the analyst reads on a failed tool's card. The error's own message is
# written for the model ("call again with…", "ask the analyst…"); these say
# what happened to the person watching. A tool may write its own
# (``error.analyst_message``); an unexpected exception's message is shown as it is.
_ANALYST_ERRORS = {
    "denied": "{tool} was not run: this session's grant does not allow it. The assistant was told to describe "
    "the change for you to make or to allow.",
    "invalid_arguments": "{tool} was not run: the assistant called it with arguments it does not accept, and was "
    "told what to fix.",
    "invalid_json": "{tool} was not run: the assistant's call was not valid JSON, and it was asked to send it again.",
    "unknown_tool": "The assistant asked for a tool that does not exist ({tool}); it was told which tools it has.",
    "timeout": "{tool} took too long and was stopped.",
    "unserialisable_result": "{tool} returned a result that could not be shown; the details are in the log.",
    "cancelled": "Stopped before {tool} ran.",
    "not_run": "{tool} was not run.",
}


def analyst_message(name: str, result: Any) -> str | None:
    """The sentence a failed tool's card shows the analyst (``None`` when there is no error)."""
    error = result.get("error") if isinstance(result, dict) else None
    if not isinstance(error, dict):
        return None
    if isinstance(error.get("analyst_message"), str):
        return str(error["analyst_message"])
    kind = str(error.get("type") or "")
    if kind in _ANALYST_ERRORS:
        return _ANALYST_ERRORS[kind].format(tool=name)
    message = str(error.get("message") or "").strip()
    if kind == "retry":  # the tool's reason is about the data; its advice to the model stays with the model
        first = message.split(". ")[0].rstrip(".")
        return f"{name} could not answer: {first}." if first else f"{name} could not answer."
    return message or f"{name} failed."
