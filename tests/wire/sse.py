"""Chat Completions Server-Sent Events, built from neutral events."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .server import Reply

STOP_TO_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "stop_sequence": "stop",
}


def sse(data: Any) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    model: str = "test-model",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else [],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def openai_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Neutral usage -> Chat Completions usage (OpenAI's shape)."""
    if not usage:
        return None
    out: dict[str, Any] = {
        "prompt_tokens": usage.get("input_tokens") or 0,
        "completion_tokens": usage.get("output_tokens") or 0,
        "total_tokens": (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0),
    }
    if usage.get("cache_read_tokens") is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage["cache_read_tokens"]}
    if usage.get("reasoning_tokens") is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage["reasoning_tokens"]}
    return out


def turn_chunks(events: Sequence[dict[str, Any]], *, fragment: int = 7, shape: str = "openai") -> list[bytes]:
    """SSE events for one scripted model turn. ``shape`` is where usage goes:
    ``openai`` (trailing chunk, empty choices), ``deepseek`` (on the finish
    chunk), ``openrouter`` (an extra chunk after the finish chunk)."""
    out: list[bytes] = [sse(chunk({"role": "assistant", "content": ""}))]
    index = 0
    stop = "end_turn"
    usage: dict[str, Any] | None = None
    saw_tool = False
    for event in events:
        kind = event["kind"]
        if kind == "text":
            out.append(sse(chunk({"content": event["text"]})))
        elif kind == "reasoning":
            if event.get("text"):
                out.append(sse(chunk({"reasoning_content": event["text"]})))
        elif kind == "tool_use":
            saw_tool = True
            raw = event.get("raw", json.dumps(event["input"]))
            first = {
                "index": index,
                "id": event["id"],
                "type": "function",
                "function": {"name": event["name"], "arguments": ""},
            }
            out.append(sse(chunk({"tool_calls": [first]})))
            for start in range(0, len(raw), fragment):
                piece = {"index": index, "function": {"arguments": raw[start : start + fragment]}}
                out.append(sse(chunk({"tool_calls": [piece]})))
            index += 1
        elif kind == "done":
            stop = event["stop_reason"]
            usage = event.get("usage")
    if not any(e["kind"] == "done" for e in events) and saw_tool:
        stop = "tool_use"
    finish = STOP_TO_FINISH.get(stop, stop)
    wire_usage = openai_usage(usage)
    if shape == "deepseek":
        out.append(sse(chunk(finish=finish, usage=wire_usage)))
    elif shape == "openrouter":
        out.append(sse(chunk(finish=finish)))
        if wire_usage is not None:
            out.append(sse(chunk({"content": ""}, usage=wire_usage)))
    else:
        out.append(sse(chunk(finish=finish)))
        if wire_usage is not None:
            out.append(sse(chunk(usage=wire_usage, choices=False)))
    out.append(DONE)
    return out


def turn_reply(events: Sequence[dict[str, Any]], **kwargs: Any) -> Reply:
    return Reply(chunks=turn_chunks(events, **kwargs), content_type="text/event-stream")
