"""The job API's request and response models (its OpenAPI contract)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tahrix_lab.flow import chunks

MAX_TEXT = 32_000


class HistoryItem(BaseModel):
    """An earlier turn: ``text``, or ``content`` as in the seed's chat messages."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    text: str | None = Field(default=None, max_length=MAX_TEXT)
    content: str | None = Field(default=None, max_length=MAX_TEXT)

    @model_validator(mode="after")
    def _one_text(self) -> HistoryItem:
        if self.text is None and self.content is None:
            raise ValueError("each history item needs text (or content)")
        return self

    def plain(self) -> dict[str, str]:
        return {"role": self.role, "text": self.text if self.text is not None else self.content or ""}


class ChatJobBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=MAX_TEXT, description="The user's question.")
    case_id: str | None = Field(default=None, max_length=200, description="Link a new session to this case.")
    session_id: str | None = Field(default=None, max_length=200, description="Continue this conversation.")
    history: list[HistoryItem] | None = Field(
        default=None, max_length=200, description="Earlier turns to seed a new session with."
    )


class JobMeta(BaseModel):
    session_id: str | None = Field(description="Known at once when continuing; else in the job's state.")
    backend: str
    model: str
    queue_position: int = Field(description="0: running now; k: k-th in line for a worker.")


class JobCreated(BaseModel):
    job_id: str
    meta: JobMeta


class ToolCallState(BaseModel):
    id: str | None
    name: str | None
    status: str


CONTENT_HELP = (
    "false: leave out `content` and `reasoning`, the whole text so far, which the chunks carry "
    "piece by piece; a client that keeps the chunks then receives each word once, not once per poll."
)


class JobState(BaseModel):
    status: Literal["streaming", "done", "error"]
    stop_reason: str | None = Field(description="From the last chunk: end_turn, cancelled, error...")
    content: str | None = Field(None, description="The answer's text so far; left out with content=false")
    reasoning: str | None = Field(None, description="Its reasoning so far; left out with content=false")
    chunks: list[dict[str, Any]]
    next: int
    tool_calls: list[ToolCallState]
    usage: dict[str, Any]
    session_id: str | None
    queue_position: int


class CancelAnswer(BaseModel):
    job_id: str
    status: str
    cancel_requested: bool


class Problem(BaseModel):
    detail: str
    field: str | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or unknown bearer token."},
    429: {"model": Problem, "description": "Too many answers running for this user."},
    404: {"model": Problem, "description": "No such job (or not yours, or expired)."},
    413: {"model": Problem, "description": "The request body is too large."},
    503: {"model": Problem, "description": "The job store or worker is unreachable."},
}


def sse_events(events: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    """``text/event-stream`` frames, one per chunk: ``id`` is the chunk index, ``data`` its JSON."""
    for i, chunk in enumerate(chunks(events)):
        yield sse_frame(i, chunk)


def sse_frame(index: int, chunk: dict[str, Any]) -> str:
    """One ``text/event-stream`` frame: ``id`` is the chunk index, ``data`` its JSON."""
    return f"id: {index}\ndata: {json.dumps(chunk, ensure_ascii=False)}\n\n"
