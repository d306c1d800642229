"""The backend interface and the normalised events the loop sees.

A backend owns exactly two translations: neutral messages → its wire format,
and its wire stream → these events. Retries, tools, budgets and persistence
live in the loop, never in a backend.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
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
    """A backend that can also stream without a thread: ``astream`` takes ``stream``'s
    arguments and returns an async iterator of the same events, raising the same errors.

    Optional. A surface that runs many answers at once (the job service) reads such
    streams on one event loop instead of waking a thread per event."""

    def astream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> AsyncIterator[Event]: ...


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
