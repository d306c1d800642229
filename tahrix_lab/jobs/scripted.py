"""A scripted, endless fake model for running the service offline.

``FakeBackend`` plays a fixed list of turns once (right for a unit test). A
service answers question after question, so ``ScriptedBackend`` replays the
same per-question script for every question: call k after the latest user
message plays turn k. ``{message}`` in any text is replaced by that message.

Script file (``tahrix serve --backend fake --fake-script FILE``)::

    {"delay": 0.05,
     "turns": [[{"kind": "reasoning", "text": "Reading the question."},
                {"kind": "tool_call", "name": "pause", "args": {"seconds": 1}}],
               [{"kind": "text", "text": "You asked: {message}"}]]}

A ``text`` item is streamed word by word, one event every ``delay`` seconds.
Built-in scripts by name: ``echo`` (answers "You asked: …" word by word),
``slow`` (the same, 50 ms a word, after a 1 s ``pause`` tool call).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from tahrix_lab.agent.backends.base import Event, ToolSpec
from tahrix_lab.agent.backends.fake import answers_since_question
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Message, StopReason, new_id

BUILTIN: dict[str, dict[str, Any]] = {
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


def load_script(name_or_path: str) -> dict[str, Any]:
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    try:
        script = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"Could not read the fake script {name_or_path!r} (a built-in name: "
            f"{', '.join(BUILTIN)}, or a JSON file): {exc}"
        ) from None
    if not isinstance(script, dict) or not isinstance(script.get("turns"), list) or not script["turns"]:
        raise ConfigurationError(f"The fake script {name_or_path!r} needs a non-empty list under 'turns'.")
    return script


class ScriptedBackend:
    """See the module docstring. Thread-safe: it keeps no per-call state."""

    name = "fake"

    def __init__(self, script: dict[str, Any] | str = "echo", *, delay: float | None = None) -> None:
        self.script = load_script(script) if isinstance(script, str) else script
        self.delay = float(self.script.get("delay", 0.0) if delay is None else delay)

    def stream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterator[Event]:
        return self._paced(self._turn(messages))

    async def astream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> AsyncIterator[Event]:
        """``stream`` for an event loop: the same events, paced with ``asyncio.sleep``."""
        for paced, event in self._turn(messages):
            if paced and self.delay:
                await asyncio.sleep(self.delay)
            yield event

    def _paced(self, items: Iterator[tuple[bool, Event]]) -> Iterator[Event]:
        for paced, event in items:
            if paced and self.delay:
                time.sleep(self.delay)
            yield event

    def _turn(self, messages: Sequence[Message]) -> Iterator[tuple[bool, Event]]:
        question = next((m.text for m in reversed(messages) if m.role == "user"), "")
        call = answers_since_question(messages)
        turns: list[Any] = self.script["turns"]
        if call >= len(turns):
            raise BackendError(
                f"The fake script has {len(turns)} turns per question; call {call + 1} has none."
            )
        return self._play(turns[call], question)

    def _play(self, items: list[dict[str, Any]], question: str) -> Iterator[tuple[bool, Event]]:
        """The turn's events, each with whether ``delay`` comes before it (each word)."""
        saw_tool = False
        out = 0
        for item in items:
            kind = item.get("kind")
            if kind in ("text", "reasoning"):
                words = str(item.get("text", "")).replace("{message}", question).split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    out += 1
                    if kind == "text":
                        yield True, {"kind": "text", "text": piece}
                    else:
                        yield True, {"kind": "reasoning", "text": piece}
            elif kind == "tool_call":
                saw_tool = True
                yield False, {"kind": "tool_use", "id": f"call_{new_id()[:8]}", "name": item["name"],
                              "input": dict(item.get("args") or {})}  # fmt: skip
            elif kind == "error":
                raise BackendError(str(item.get("message", "scripted failure")), retryable=False)
        stop: StopReason = "tool_use" if saw_tool else "end_turn"
        yield False, {"kind": "done", "stop_reason": stop, "raw_stop_reason": stop,
                      "usage": {"input_tokens": 10, "output_tokens": out}}  # fmt: skip


def demo_registry(purposes: tuple[str, ...] = ("chat",), base: ToolRegistry | None = None) -> ToolRegistry:
    """Tools for scripts: ``pause`` (sleeps; for slow and cancellable runs) and ``echo``,
    offered to sessions of ``purposes``, next to the tools of ``base``."""
    reg = ToolRegistry(base or ())

    @reg.register(
        purposes=purposes,
        parameters={
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 30}},
            "required": ["seconds"],
        },
        timeout=35,
    )
    def pause(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Wait a number of seconds, then say so."""
        time.sleep(float(args["seconds"]))
        return {"waited_s": args["seconds"]}

    @reg.register(purposes=purposes, parameters={"type": "object", "properties": {"value": {}}})
    def echo(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Return the value given."""
        return {"value": args.get("value")}

    return reg


class WithDemoTools:
    """A ``JobIntegration`` as given, plus the script tools for its sessions (fake backend)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.purpose: str = inner.purpose
        self._registry = demo_registry((inner.purpose,), inner.registry())

    def start_session(self, store: Any, *, user: str, case_id: str | None) -> Any:
        return self.inner.start_session(store, user=user, case_id=case_id)

    def context_for(self, store: Any, session: Any) -> Any:
        return self.inner.context_for(store, session)

    def registry(self) -> ToolRegistry:
        return self._registry
