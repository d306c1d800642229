"""The backend interface and the normalised events the loop sees.

A backend owns exactly two translations: neutral messages → its wire format,
and its wire stream → these events. Retries, tools, budgets and persistence
live in the loop, never in a backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

from tahrix_lab.agent.transcript import Message, StopReason


class TextEvent(TypedDict):
    kind: Literal["text"]
    text: str


class ReasoningEvent(TypedDict):
    """Reasoning text; ``signature`` arrives on its own event (text ``""``) on
    Bedrock and attaches to the current reasoning part; ``redacted`` (base64)
    starts a redacted reasoning part."""

    kind: Literal["reasoning"]
    text: str
    signature: NotRequired[str]
    redacted: NotRequired[str]


class ToolUseEvent(TypedDict):
    """A complete tool call. ``input`` is ``None`` when the provider's argument
    text was not valid JSON; ``raw`` keeps that text as sent."""

    kind: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any] | None
    raw: NotRequired[str]


class UsageDict(TypedDict, total=False):
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None


class DoneEvent(TypedDict):
    kind: Literal["done"]
    stop_reason: StopReason
    raw_stop_reason: str | None
    usage: UsageDict | None
    latency_ms: NotRequired[float]


Event = TextEvent | ReasoningEvent | ToolUseEvent | DoneEvent


class ToolSpec(TypedDict):
    """What a model is offered: the neutral shape every adapter maps from."""

    name: str
    description: str
    parameters: dict[str, Any]


@runtime_checkable
class Backend(Protocol):
    """A model provider. ``name`` is the backend family (``openai``,
    ``bedrock``, ``fake``): opaque data such as reasoning signatures is only
    sent back to the family that produced it."""

    name: str

    def stream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterator[Event]:
        """Yield normalised events ending with one ``done`` event.

        Raise ``BackendError`` on any transport or provider failure, before the
        first event or mid-stream; never a raw SDK exception.
        """
        ...


@runtime_checkable
class AsyncStreaming(Protocol):
    """``astream``: ``stream``'s arguments, an async iterator of the same events, raising the
    same errors. Every adapter has it (OpenAI's async client; Bedrock and any blocking stream
    through ``stream_in_thread``): the job service reads every answer's stream on one event
    loop instead of waking a thread per event."""

    def astream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> AsyncIterator[Event]: ...


_END = object()


async def stream_in_thread(open_stream: Callable[[], Iterator[Event]]) -> AsyncIterator[Event]:
    """A blocking stream (boto3's) as an async iterator: opened and read on a thread of its own
    (one per model call, not per event), each event handed to the event loop. Closed early,
    the thread lets the provider's stream go as soon as its blocked read returns."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()
    stop = threading.Event()

    def hand(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
            loop.call_soon_threadsafe(items.put_nowait, item)

    def read() -> None:
        events: Iterator[Event] | None = None
        last: Any = _END
        try:
            events = open_stream()
            for event in events:
                if stop.is_set():
                    break
                hand(event)
        except BaseException as exc:  # handed over and raised where the stream is read
            last = exc
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()
        hand(last)

    threading.Thread(target=read, name="tahrix-stream-read", daemon=True).start()
    try:
        while (item := await items.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def tool_result_text(result: dict[str, Any] | None) -> str:
    """The one serialisation of a tool result as text, so every adapter and replay sends the same bytes."""
    return json.dumps(result if result is not None else {}, ensure_ascii=False)


def parse_tool_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's argument text as an object: ``{}`` when empty, ``None``
    when it is not a JSON object (the runner then answers with an error the
    model can read, and the raw text is kept)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def done(
    stop_reason: StopReason = "end_turn",
    *,
    raw: str | None = None,
    usage: UsageDict | None = None,
) -> DoneEvent:
    return {"kind": "done", "stop_reason": stop_reason, "raw_stop_reason": raw or stop_reason, "usage": usage}
