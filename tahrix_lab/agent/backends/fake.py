"""FakeBackend: a deterministic, scripted model with no network.

A script is a list of turns, one per model call. A turn is either a list of
events (and ``BackendError`` instances, raised at that point of the stream)
or a callable ``(messages, tools) -> events`` that decides from what it was
sent (tool-driven answers: it reads the tool results it is sent). Every
request is recorded so tests can assert what a real provider would have been
sent.

    backend = FakeBackend([
        [reasoning("Look the address up."), tool_call("lookup_address", {"address": "0xabc"})],
        [text("It is an exchange deposit address.")],
    ])

A service answers question after question, in many conversations at once.
``per_question`` makes the backend endless and stateless: call k after the
latest user message plays turn k of ``per_question`` (a list of turns, or a
function ``(question, messages) -> turns`` choosing them by the question);
past its turns it plays ``then``, or fails when there is none. Such a
backend records no requests (it would grow without end). With ``delay``,
text and reasoning stream word by word, one word every ``delay`` seconds.
``astream`` is ``stream`` for an event loop (paced with ``asyncio.sleep``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.backends.base import (
    DoneEvent,
    Event,
    ReasoningEvent,
    TextEvent,
    ToolSpec,
    ToolUseEvent,
    UsageDict,
)
from tahrix_lab.agent.errors import BackendError
from tahrix_lab.agent.transcript import Message

ScriptItem = Event | BackendError
Turn = Sequence[ScriptItem] | Callable[[Sequence[Message], Sequence[ToolSpec]], Iterable[ScriptItem]]
PerQuestion = Sequence[Turn] | Callable[[str, Sequence[Message]], Sequence[Turn]]

_ids = itertools.count(1)


def text(value: str) -> TextEvent:
    return {"kind": "text", "text": value}


def reasoning(value: str, signature: str | None = None) -> ReasoningEvent:
    event: ReasoningEvent = {"kind": "reasoning", "text": value}
    if signature is not None:
        event["signature"] = signature
    return event


def tool_call(name: str, args: dict[str, Any] | None = None, *, id: str | None = None) -> ToolUseEvent:
    return {"kind": "tool_use", "id": id or f"call_{next(_ids)}", "name": name, "input": dict(args or {})}


def latest_question(messages: Sequence[Message]) -> str:
    return next((m.text for m in reversed(messages) if m.role == "user"), "") or ""


def answers_since_question(messages: Sequence[Message]) -> int:
    """How many model calls already answered the latest user message: a
    stateless scripted model plays turn k for call k of each question."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return sum(1 for m in messages[last_user + 1 :] if m.role == "assistant")


def estimate_tokens(value: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token."""
    return max(1, (len(value) + 3) // 4) if value else 0


@dataclass
class Request:
    system: str | None
    messages: list[Message]
    tools: list[ToolSpec]
    model: str
    inference: dict[str, Any] | None


@dataclass
class FakeBackend:
    """See the module docstring. ``name`` is ``"fake"`` unless told otherwise
    (a test can pose as another family to check what is sent where)."""

    script: list[Turn] = field(default_factory=list)
    name: str = "fake"
    usage: bool = True
    requests: list[Request] = field(default_factory=list)
    per_question: PerQuestion | None = None
    then: Turn | None = None
    delay: float | None = None

    def stream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterator[Event]:
        items = self._turn(system, messages, tools, model, inference)
        return self._paced(self._play(items, system, messages, tools))

    async def astream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> AsyncIterator[Event]:
        items = self._turn(system, messages, tools, model, inference)
        for event in self._play(items, system, messages, tools):
            for piece in self._words(event):
                if self.delay and piece["kind"] in ("text", "reasoning"):
                    await asyncio.sleep(self.delay)
                yield piece

    def _turn(
        self,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterable[ScriptItem]:
        """The items of the turn this call plays (raises when the script has none)."""
        if self.per_question is not None:
            script = self.per_question
            turns = script(latest_question(messages), messages) if callable(script) else script
            call = answers_since_question(messages)
            what = f"{len(turns)} turns per question"
        else:
            self.requests.append(Request(system, list(messages), list(tools), model, inference))
            turns, call = self.script, len(self.requests) - 1
            what = f"{len(turns)} turns"
        turn = turns[call] if call < len(turns) else self.then
        if turn is None:
            raise BackendError(
                f"The fake backend's script has {what}; call {call + 1} has none.",
                status=None,
                retryable=False,
            )
        return turn(messages, tools) if callable(turn) else turn

    def _words(self, event: Event) -> list[Event]:
        """With ``delay``, a text or reasoning event as one event per word (else as it is)."""
        if self.delay is None or event["kind"] not in ("text", "reasoning") or len(event) > 2:
            return [event]
        words = event["text"].split(" ")
        return [{"kind": event["kind"], "text": w if i == 0 else " " + w} for i, w in enumerate(words)]  # type: ignore[misc]

    def _paced(self, events: Iterator[Event]) -> Iterator[Event]:
        for event in events:
            for piece in self._words(event):
                if self.delay and piece["kind"] in ("text", "reasoning"):
                    time.sleep(self.delay)
                yield piece

    def _play(
        self,
        items: Iterable[ScriptItem],
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> Iterator[Event]:
        out_chars = 0
        saw_tool = False
        for item in items:
            if isinstance(item, BackendError):
                raise item
            kind = item["kind"]
            if kind == "done":
                yield item
                return
            if kind == "tool_use":
                saw_tool = True
                out_chars += len(json.dumps(item.get("input")))
            else:
                out_chars += len(item.get("text", ""))  # type: ignore[arg-type]
            yield item
        finish: DoneEvent = {
            "kind": "done",
            "stop_reason": "tool_use" if saw_tool else "end_turn",
            "raw_stop_reason": "tool_use" if saw_tool else "end_turn",
            "usage": self._usage(system, messages, tools, out_chars) if self.usage else None,
        }
        yield finish

    @staticmethod
    def _usage(
        system: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec], out_chars: int
    ) -> UsageDict:
        chars = len(system or "") + len(json.dumps(list(tools)))
        for m in messages:
            for p in m.parts:
                chars += len(p.text or "") + len(json.dumps(p.tool_input or p.tool_result or {}))
        return {
            "input_tokens": estimate_tokens("x" * chars),
            "output_tokens": estimate_tokens("x" * out_chars),
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "reasoning_tokens": None,
        }
