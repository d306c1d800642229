"""Backends: the protocol, the events, and a lazy registry of adapters.

Adapters are imported only when chosen, so using the fake backend never
imports boto3 or openai.
"""

from __future__ import annotations

from tahrix_lab.agent.backends.base import (
    Backend,
    DoneEvent,
    Event,
    ReasoningEvent,
    TextEvent,
    ToolSpec,
    ToolUseEvent,
    UsageDict,
    done,
)
from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.backends.registry import BACKENDS, get_backend

__all__ = [
    "BACKENDS",
    "Backend",
    "DoneEvent",
    "Event",
    "FakeBackend",
    "ReasoningEvent",
    "TextEvent",
    "ToolSpec",
    "ToolUseEvent",
    "UsageDict",
    "done",
    "get_backend",
]
