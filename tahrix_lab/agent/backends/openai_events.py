"""Chat Completions stream chunks -> the normalised events (the OpenAI adapter's second
translation), for the SDK's sync and async streams alike."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any

from openai.types.chat import ChatCompletionChunk

from tahrix_lab.agent.backends.base import DoneEvent, Event, ToolUseEvent, UsageDict, parse_tool_arguments
from tahrix_lab.agent.errors import BackendError
from tahrix_lab.agent.transcript import StopReason

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


def map_stop_reason(raw: str | None) -> StopReason:
    return FINISH_REASONS.get(raw or "", "other")


def map_usage(usage: Any) -> UsageDict | None:
    """Normalise a Chat Completions ``usage`` object (any of the shapes servers send).

    ``prompt_tokens`` already includes cached tokens; DeepSeek reports cache hits
    as ``prompt_cache_hit_tokens``. Unknown counts stay ``None``."""
    if usage is None:
        return None
    extra = getattr(usage, "model_extra", None) or {}
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None:
        cached = extra.get("prompt_cache_hit_tokens")
    out_details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(out_details, "reasoning_tokens", None) if out_details is not None else None
    return {
        "input_tokens": getattr(usage, "prompt_tokens", None),
        "output_tokens": getattr(usage, "completion_tokens", None),
        "cache_read_tokens": cached,
        "cache_write_tokens": None,
        "reasoning_tokens": reasoning,
    }


class _ToolCall:
    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.args: list[str] = []

    def event(self) -> ToolUseEvent:
        raw = "".join(self.args)
        parsed = parse_tool_arguments(raw)
        return {
            "kind": "tool_use",
            "id": self.id or f"call_{uuid.uuid4().hex[:24]}",
            "name": self.name or "",
            "input": parsed,
            "raw": raw,
        }


class _StreamMap:
    """Chat Completions chunks to events, one chunk at a time (for ``map_stream`` and
    ``amap_stream``)."""

    def __init__(self) -> None:
        self.calls: dict[int, _ToolCall] = {}
        self.last = -1  # index of the latest tool-call fragment
        self.finish: str | None = None
        self.usage: Any = None

    def chunk(self, chunk: ChatCompletionChunk) -> Iterator[Event]:
        calls = self.calls
        if chunk.usage is not None:
            self.usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            extra = delta.model_extra
            if extra:
                thought = extra.get("reasoning_content") or extra.get("reasoning")
                if thought and isinstance(thought, str):
                    yield {"kind": "reasoning", "text": thought}
            if delta.content:
                yield {"kind": "text", "text": delta.content}
            if delta.tool_calls:
                for fragment in delta.tool_calls:
                    at: int | None = fragment.index
                    if at is None:  # some servers omit it: a fragment with an id starts a new call
                        at = self.last + 1 if (fragment.id or self.last < 0) else self.last
                    self.last = at
                    call = calls.get(at)
                    if call is None:
                        # a new index means the earlier calls are complete
                        for index in sorted(i for i in calls if i < at):
                            yield calls.pop(index).event()
                        call = calls[at] = _ToolCall()
                    if fragment.id and call.id is None:
                        call.id = fragment.id
                    function = fragment.function
                    if function is not None:
                        if function.name and call.name is None:
                            call.name = function.name
                        if function.arguments:
                            call.args.append(function.arguments)
            if choice.finish_reason:
                self.finish = choice.finish_reason
                for index in sorted(calls):
                    yield calls.pop(index).event()

    def end(self) -> Iterator[Event]:
        if self.finish is None:
            raise BackendError("The model's stream ended before it finished its answer.", retryable=True)
        for index in sorted(self.calls):
            yield self.calls.pop(index).event()
        done: DoneEvent = {
            "kind": "done",
            "stop_reason": map_stop_reason(self.finish),
            "raw_stop_reason": self.finish,
            "usage": map_usage(self.usage),
        }
        yield done


def map_stream(chunks: Iterable[ChatCompletionChunk]) -> Iterator[Event]:
    """Events from Chat Completions chunks, ending with one ``done``.

    Tool-call fragments are gathered per ``index`` and emitted whole; usage is
    taken from whichever chunk carries it (trailing, on the finish chunk, or
    after it). A stream without a finish reason was cut short: that is an error."""
    mapping = _StreamMap()
    for chunk in chunks:
        yield from mapping.chunk(chunk)
    yield from mapping.end()


async def amap_stream(chunks: AsyncIterable[ChatCompletionChunk]) -> AsyncIterator[Event]:
    """``map_stream`` for the SDK's async stream."""
    mapping = _StreamMap()
    async for chunk in chunks:
        for event in mapping.chunk(chunk):
            yield event
    for event in mapping.end():
        yield event
