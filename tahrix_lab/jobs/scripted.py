"""The service's fake-model scripts: JSON for ``FakeBackend(per_question=...)``.

A service answers question after question, so a script is played for every
question: call k after the latest user message plays turn k (see
``agent.backends.fake``). ``{message}`` in any text is replaced by that message.

Script file (``tahrix serve --backend fake --fake-script FILE``)::

    {"delay": 0.05,
     "turns": [[{"kind": "reasoning", "text": "Reading the question."},
                {"kind": "tool_call", "name": "pause", "args": {"seconds": 1}}],
               [{"kind": "text", "text": "You asked: {message}"}]]}

A ``text`` item is streamed word by word, one event every ``delay`` seconds;
``{"kind": "error", "message": ...}`` fails the call there. Built-in scripts by
name: ``echo`` (answers "You asked: …" word by word), ``slow`` (the same, 50 ms
a word, after a 1 s ``pause`` tool call).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tahrix_lab.agent.backends.base import ToolSpec
from tahrix_lab.agent.backends.fake import FakeBackend, ScriptItem, Turn, latest_question, tool_call
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Message

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


def scripted_backend(script: dict[str, Any] | str = "echo", *, delay: float | None = None) -> FakeBackend:
    """An endless ``FakeBackend`` playing ``script`` (a built-in name, a file, or the parsed JSON)."""
    spec = load_script(script) if isinstance(script, str) else script
    pace = float(spec.get("delay", 0.0) if delay is None else delay)
    return FakeBackend(per_question=[_turn(items) for items in spec["turns"]], delay=pace)


def _turn(items: list[dict[str, Any]]) -> Turn:
    def play(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[ScriptItem]:
        question = latest_question(messages)
        out: list[ScriptItem] = []
        for item in items:
            kind = item.get("kind")
            if kind in ("text", "reasoning"):
                said = str(item.get("text", "")).replace("{message}", question)
                out.append(
                    {"kind": "text", "text": said} if kind == "text" else {"kind": "reasoning", "text": said}
                )
            elif kind == "tool_call":
                out.append(tool_call(str(item["name"]), item.get("args")))
            elif kind == "error":
                out.append(BackendError(str(item.get("message", "scripted failure")), retryable=False))
        return out

    return play


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
