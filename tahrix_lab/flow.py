"""The one mapping from the loop's ``(event, payload)`` tuples to chunks.

Chunks are what every surface renders: the job service stores and serves
them, the SSE encoder streams them, the notebook widget sends them to the
front end, and ``widgets/flow.js`` draws them. Vocabulary:

    {"type": "user", "text"}                                  (history only)
    {"type": "reasoning", "text", "signature"?: bool, "redacted"?: bool}
    {"type": "content", "text"}
    {"type": "tool_call", "id", "name", "args", "raw"?}
    {"type": "tool_result", "id", "name", "result", "status", "duration_ms"?}
    {"type": "follow_up", "text": "Synthesizing results..."}
    {"type": "effects", "effects": [...]}
    {"type": "usage", "model", "backend", "usage": {...}, "cost_usd", "latency_ms", "ttft_ms", "stop_reason"}
    {"type": "error", "message", "kind"}
    {"type": "done", "stop_reason"}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tahrix_lab.agent.transcript import Message

Chunk = dict[str, Any]


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
    if event == "tool_result":
        return {
            "type": "tool_result",
            "id": payload["id"],
            "name": payload["name"],
            "result": payload["result"],
            "status": payload["status"],
            "duration_ms": payload.get("duration_ms"),
        }
    if event == "follow_up":
        return {"type": "follow_up", "text": payload.get("text", "Synthesizing results...")}
    if event == "effects":
        return {"type": "effects", "effects": payload["effects"]}
    if event == "usage":
        return {"type": "usage", **{k: payload.get(k) for k in (
            "model", "backend", "usage", "cost_usd", "uncached_cost_usd", "latency_ms", "ttft_ms", "stop_reason")}}  # fmt: skip
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


def history_chunks(messages: Iterable[Message]) -> list[Chunk]:
    """A stored transcript as chunks, so history renders exactly like a live run."""
    out: list[Chunk] = []
    for m in messages:
        if m.role == "user":
            out.append({"type": "user", "text": m.text})
            continue
        for p in m.parts:
            if p.type == "text":
                out.append({"type": "content", "text": p.text or ""})
            elif p.type == "reasoning":
                out.append({"type": "reasoning", "text": p.text or "", "redacted": p.is_redacted_reasoning})
            elif p.type == "tool_use":
                out.append(
                    {"type": "tool_call", "id": p.tool_use_id, "name": p.tool_name, "args": p.tool_input}
                )
            elif p.type == "tool_result":
                out.append({"type": "tool_result", "id": p.tool_use_id, "name": p.tool_name,
                            "result": p.tool_result or {}, "status": p.tool_status or "ok"})  # fmt: skip
        if m.role == "assistant":
            out.append({"type": "usage", "model": m.model_id, "backend": m.backend,
                        "usage": m.usage.to_dict() if m.usage else None, "cost_usd": None,
                        "latency_ms": m.latency_ms, "ttft_ms": m.ttft_ms, "stop_reason": m.stop_reason})  # fmt: skip
    return out
