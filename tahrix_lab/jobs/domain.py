"""How a domain plugs into the job service without the service importing it.

The service knows sessions, tools and the loop; a domain (the case package)
knows what a session is *about*. It passes an object that satisfies
``JobIntegration`` (structurally: no import of this module is needed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.tools import REGISTRY, ToolRegistry
from tahrix_lab.agent.transcript import Session


@runtime_checkable
class JobIntegration(Protocol):
    """``start_session`` may raise ``UserFacingError`` (the API answers 422 with its message).

    An integration may also offer ``offline_backend() -> Backend``: the model
    the service runs when no provider is configured and no fake script given;
    ``answer_events(session, events) -> events``: the loop's events of a run as
    the service should publish them (a case adds its citations line); and the
    service page's data (``cases_for``, ``case_view``, ``session_cases``: see
    ``tahrix_lab.jobs.http.workplace``); ``may_open_session(user, session) -> bool``:
    False answers the session as someone else's (404) on every route and leaves it out
    of the conversations list (a case the user may no longer open). Find them with ``offered``.
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
    ``inner`` (the fake backend's demo tools), or ``None``."""
    obj = integration
    for _ in range(4):
        found: Callable[..., Any] | None = getattr(obj, name, None)
        if callable(found):
            return found
        obj = getattr(obj, "inner", None)
        if obj is None:
            break
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
        from tahrix_lab.agent.errors import UserFacingError

        if case_id is not None:
            raise UserFacingError(
                "This service runs plain chat sessions and has no cases; leave case_id out."
            )
        return store.create_session(user=user, purpose=self.purpose, system_prompt=self.system_prompt)

    def context_for(self, store: TranscriptStore, session: Session) -> Any:
        return None

    def registry(self) -> ToolRegistry:
        return self._registry if self._registry is not None else REGISTRY
