"""Helpers shared by the lab tests (imported by name; conftest puts this folder on sys.path)."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore, ask
from tahrix_lab.agent.transcript import Session

QUESTIONS = ["Who controls 0xabc?", "Where did the funds go next?"]


def run(
    store: TranscriptStore,
    session: Session,
    question: str,
    backend: FakeBackend,
    model: str,
    registry: ToolRegistry | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Ask one question through the real loop and collect its events."""
    return list(ask(store, session, question, backend=backend, model=model, registry=registry))
