"""How a domain (the case package) plugs into the job service without the service importing
it (``JobIntegration``, satisfied structurally), and the tools the fake scripts call."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import REGISTRY, ToolRegistry
from tahrix_lab.agent.transcript import Session


@runtime_checkable
class JobIntegration(Protocol):
    """What a session is about. Optional methods, found with ``offered``: ``offline_backend()``
    (the model run when no provider and no fake script is given); ``answer_events(session,
    events)`` (the run's events as published: a case adds its citations line);
    ``may_open_session(user, session)`` (False: the session reads as someone else's, a 404).
    """

    purpose: str

    def start_session(self, store: TranscriptStore, *, user: str, case_id: str | None) -> Session:
        """A new session with no messages yet; ``UserFacingError`` answers 422 with its message."""
        ...

    def context_for(self, store: TranscriptStore, session: Session) -> Any:
        """Passed to the loop as ``run_agent(context=...)``."""
        ...

    def registry(self) -> ToolRegistry: ...


def layers(integration: Any) -> Iterator[Any]:
    """The integration and, outermost first, what its wrappers keep in ``inner``."""
    while integration is not None:
        yield integration
        integration = getattr(integration, "inner", None)


def offered(integration: Any, name: str) -> Callable[..., Any] | None:
    """The integration's optional method ``name``, looking through its wrappers, or ``None``."""
    found = (getattr(obj, name, None) for obj in layers(integration))
    return next((f for f in found if callable(f)), None)


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


def demo_registry(purposes: tuple[str, ...] = ("chat",), base: ToolRegistry | None = None) -> ToolRegistry:
    """Tools for scripts, beside the tools of ``base``: ``pause`` (sleeps: slow and cancellable
    runs) and ``echo``, offered to sessions of ``purposes``."""
    reg = ToolRegistry(base or ())
    seconds = {"type": "number", "minimum": 0, "maximum": 30}
    pause_args = {"type": "object", "properties": {"seconds": seconds}, "required": ["seconds"]}

    @reg.register(purposes=purposes, parameters=pause_args, timeout=35)
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
