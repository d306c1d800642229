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

``FakeBackend.from_script`` builds such a backend from a JSON script, played
for every question (``tahrix serve --backend fake --fake-script FILE``)::

    {"delay": 0.05,
     "turns": [[{"kind": "reasoning", "text": "Reading the question."},
                {"kind": "tool_call", "name": "pause", "args": {"seconds": 1}}],
               [{"kind": "text", "text": "You asked: {message}"}]]}

``{message}`` is the latest question; ``{"kind": "error", "message": ...}``
fails the call there. Built in (``SCRIPTS``): ``echo`` and ``slow`` (the same
after a 1 s ``pause`` call; the job service offers that tool with this model).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
from tahrix_lab.agent.errors import BackendError, ConfigurationError
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

    @classmethod
    def from_script(cls, script: dict[str, Any] | str = "echo", *, delay: float | None = None) -> FakeBackend:
        """An endless backend playing ``script`` (a built-in name, a JSON file, or the parsed JSON)."""
        spec = load_script(script) if isinstance(script, str) else script
        pace = float(spec.get("delay", 0.0) if delay is None else delay)

        def turns(question: str, _messages: Sequence[Message]) -> list[list[ScriptItem]]:
            return [[_item(i, question) for i in items if i.get("kind") in _KINDS] for items in spec["turns"]]

        return cls(per_question=turns, delay=pace)

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


SCRIPTS: dict[str, dict[str, Any]] = {
    "echo": {
        "delay": 0.01,
        "turns": [
            [
                {"kind": "reasoning", "text": "The user wants an answer."},
                {"kind": "text", "text": "You asked: {message}"},
            ]
        ],
    },
    "slow": {
        "delay": 0.05,
        "turns": [
            [
                {"kind": "reasoning", "text": "Let me wait for the tool first."},
                {"kind": "tool_call", "name": "pause", "args": {"seconds": 1}},
            ],
            [{"kind": "text", "text": "After a pause, here is my answer to: {message}"}],
        ],
    },
}

_KINDS = ("text", "reasoning", "tool_call", "error")


def load_script(name_or_path: str) -> dict[str, Any]:
    """A built-in script by name, or a JSON file (checked for a non-empty ``turns`` list)."""
    if name_or_path in SCRIPTS:
        return SCRIPTS[name_or_path]
    try:
        script = json.loads(Path(name_or_path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"Could not read the fake script {name_or_path!r} (a built-in name: "
            f"{', '.join(SCRIPTS)}, or a JSON file): {exc}"
        ) from None
    if not isinstance(script, dict) or not isinstance(script.get("turns"), list) or not script["turns"]:
        raise ConfigurationError(f"The fake script {name_or_path!r} needs a non-empty list under 'turns'.")
    return script


def _item(item: dict[str, Any], question: str) -> ScriptItem:
    kind = item["kind"]
    if kind == "tool_call":
        return tool_call(str(item["name"]), item.get("args"))
    if kind == "error":
        return BackendError(str(item.get("message", "scripted failure")), retryable=False)
    said = str(item.get("text", "")).replace("{message}", question)
    return text(said) if kind == "text" else reasoning(said)
