"""What one run of the loop holds: its settings, the history as sent, and its writes to the record.

The cycle (``loop``), one model call (``model_call``) and one round of tool
calls (``tool_round``) all act on this state; it lives below them so none of
them imports another's module to reach it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.backends.base import Backend, ToolSpec
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.history import capped_message
from tahrix_lab.agent.pricing import Pricer
from tahrix_lab.agent.retry import RetryPolicy
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import ToolRegistry, error_result
from tahrix_lab.agent.transcript import Message, Part, Session

LoopEvent = tuple[str, dict[str, Any]]


@dataclass
class Run:
    session: Session
    store: TranscriptStore
    backend: Backend
    model: str
    inference: dict[str, Any] | None
    context: Any
    budget: Budget | None
    max_tool_cycles: int
    follow_up_instruction: str | None
    tools: Sequence[ToolSpec] | None
    registry: ToolRegistry
    retry: RetryPolicy
    cancel: threading.Event | None
    pricer: Pricer
    max_result_bytes: int
    history: Sequence[Message] | None = None  # as the caller stored it; None: read it
    sent: list[Message] = field(default_factory=list)  # the history as sent to the backend

    def persist(self, message: Message) -> Message:
        """Write a message and keep it in this run's history (loaded once per run)."""
        stored = self.store.append_message(self.session.id, message)
        # The loop answers every tool call before the next model call, so the
        # history as sent grows by this message alone (capped when it is a result).
        self.sent.append(capped_message(stored, self.max_result_bytes) if stored.role == "tool" else stored)
        return stored

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def stopped(self) -> LoopEvent:
        return "done", {"session_id": self.session.id, "stop_reason": "cancelled"}

    def close_unanswered(self, tool_uses: list[Part], why: str) -> None:
        result = error_result("not_run", why)
        self.persist(
            Message(
                role="tool",
                parts=[
                    Part.of_tool_result(p.tool_use_id or "", p.tool_name, result, "error") for p in tool_uses
                ],
            ),
        )


def close_stream(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()
