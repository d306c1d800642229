"""How a domain plugs into the job service without the service importing it,
and the scripted model the service runs with ``--backend fake``.

The service knows sessions, tools and the loop; a domain (the case package)
knows what a session is *about*. It passes an object that satisfies
``JobIntegration`` (structurally: no import of this module is needed).

Fake-model scripts are JSON for ``FakeBackend(per_question=...)``, played for
every question (``tahrix serve --backend fake --fake-script FILE``)::

    {"delay": 0.05,
     "turns": [[{"kind": "reasoning", "text": "Reading the question."},
                {"kind": "tool_call", "name": "pause", "args": {"seconds": 1}}],
               [{"kind": "text", "text": "You asked: {message}"}]]}

``{message}`` is the latest question; text streams word by word, one word
every ``delay`` seconds; ``{"kind": "error", "message": ...}`` fails the call
there. Built in: ``echo`` and ``slow`` (the same after a 1 s ``pause`` call).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tahrix_lab.agent.backends.fake import FakeBackend, ScriptItem, reasoning, text, tool_call
from tahrix_lab.agent.errors import BackendError, ConfigurationError, UserFacingError
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import REGISTRY, ToolRegistry
from tahrix_lab.agent.transcript import Message, Session


@runtime_checkable
class JobIntegration(Protocol):
    """``start_session`` may raise ``UserFacingError`` (the API answers 422 with its message).

    Optional methods, found with ``offered``: ``offline_backend() -> Backend`` (the model run
    when no provider is configured and no fake script given); ``answer_events(session,
    events)`` (the run's events as published: a case adds its citations line);
    ``may_open_session(user, session)`` (False: the session reads as someone else's, 404, and
    is left out of the conversations list). The page's routes, which show a case, are the
    composition root's (``Service.extend``).
    """

    purpose: str

    def start_session(self, store: TranscriptStore, *, user: str, case_id: str | None) -> Session:
        """A new session for a job, with no messages yet (the runner adds history and question)."""
        ...

    def context_for(self, store: TranscriptStore, session: Session) -> Any:
        """Passed to the loop as ``run_agent(context=...)``."""
        ...

    def registry(self) -> ToolRegistry: ...


def offered(integration: Any, name: str) -> Callable[..., Any] | None:
    """The integration's optional method ``name``, looking through wrappers that keep theirs in
    ``inner`` (``WithDemoTools``), or ``None``."""
    obj = integration
    while obj is not None:
        found: Callable[..., Any] | None = getattr(obj, name, None)
        if callable(found):
            return found
        obj = getattr(obj, "inner", None)
    return None


def answer_events(integration: Any, session: Session, events: Iterator[Any]) -> Iterator[Any]:
    """``events`` through the integration's ``answer_events`` when it has one (a case: citations)."""
    wrap = offered(integration, "answer_events")
    return events if wrap is None else wrap(session, events)


class ChatIntegration:
    """Plain chat sessions with the registry's ``chat`` tools and no case."""

    purpose = "chat"

    def __init__(self, registry: ToolRegistry | None = None, system_prompt: str | None = None) -> None:
        self._registry = registry
        self.system_prompt = system_prompt

    def start_session(self, store: TranscriptStore, *, user: str, case_id: str | None) -> Session:
        if case_id is not None:
            raise UserFacingError(
                "This service runs plain chat sessions and has no cases; leave case_id out."
            )
        return store.create_session(user=user, purpose=self.purpose, system_prompt=self.system_prompt)

    def context_for(self, store: TranscriptStore, session: Session) -> Any:
        return None

    def registry(self) -> ToolRegistry:
        return self._registry if self._registry is not None else REGISTRY


# -- the scripted model ---------------------------------------------------------------

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
    try:
        script = json.loads(Path(name_or_path).read_text())
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

    def turns(question: str, _messages: Sequence[Message]) -> list[list[ScriptItem]]:
        return [
            [_play(item, question) for item in items if item.get("kind") in _KINDS] for items in spec["turns"]
        ]

    return FakeBackend(per_question=turns, delay=pace)


_KINDS = ("text", "reasoning", "tool_call", "error")


def _play(item: dict[str, Any], question: str) -> ScriptItem:
    kind = item["kind"]
    if kind == "tool_call":
        return tool_call(str(item["name"]), item.get("args"))
    if kind == "error":
        return BackendError(str(item.get("message", "scripted failure")), retryable=False)
    said = str(item.get("text", "")).replace("{message}", question)
    return text(said) if kind == "text" else reasoning(said)


def demo_registry(purposes: tuple[str, ...] = ("chat",), base: ToolRegistry | None = None) -> ToolRegistry:
    """Tools for scripts, beside the tools of ``base``: ``pause`` (sleeps: slow and cancellable
    runs) and ``echo``, offered to sessions of ``purposes``."""
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
