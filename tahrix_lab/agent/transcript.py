"""The neutral transcript: Session → Message → Part.

This is the leaf module of the engine: every other module imports it and it
imports nothing from tahrix_lab. No vendor SDK object is ever stored here;
each backend adapter maps these values to and from its own wire format.

Conventions that the rest of the engine relies on:

* One model call produces exactly one assistant ``Message``. A tool call is a
  ``tool_use`` part on it; its result is a ``tool_result`` part on a later
  ``tool`` message, paired by ``tool_use_id``.
* ``tool_result`` is always a JSON object (a list result is wrapped once as
  ``{"items": [...]}`` at the tool boundary).
* A ``tool_use`` part keeps the provider's raw argument text in ``text`` when
  the provider sent text (OpenAI-compatible endpoints), so a replay to the same
  provider sends the same bytes; ``tool_input`` is ``None`` when that text was
  not valid JSON.
* A ``reasoning`` part keeps opaque provider data in ``signature`` (Bedrock's
  reasoning signature). Redacted reasoning is a ``reasoning`` part whose
  ``text`` is ``None`` and whose ``signature`` holds the base64 of the
  redacted bytes. Opaque data belongs to the backend family named on the
  message (``Message.backend``) and is only ever sent back to that family.
* Media parts (``image``, ``document``) hold a reference (``media_ref``: a
  local path or an ``s3://`` key), never the bytes.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal, get_args

Role = Literal["user", "assistant", "tool"]
PartType = Literal["text", "reasoning", "tool_use", "tool_result", "image", "document"]
ToolStatus = Literal["ok", "error"]
SessionStatus = Literal["active", "closed"]
StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "content_filter",
    "other",
    # set by the loop, never by a provider:
    "error",  # the stream failed after some content arrived; the partial answer is kept
    "cancelled",  # the user stopped the run; the partial answer is kept
]

ROLES: tuple[Role, ...] = get_args(Role)
PART_TYPES: tuple[PartType, ...] = get_args(PartType)
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)


def utcnow() -> datetime:
    """Timezone-aware now in UTC (the only clock the transcript uses)."""
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model call.

    ``input_tokens`` counts *all* input tokens, including cache reads and
    cache writes (the convention of the ``genai-prices`` table);
    ``cache_read_tokens`` and ``cache_write_tokens`` say how many of them were
    served from or written to the provider's cache. ``output_tokens`` includes
    ``reasoning_tokens``. A field that is ``None`` is unknown, never zero: a
    stream that ended without a usage report has ``Usage()`` with every field
    ``None``.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def known(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None

    @property
    def total_tokens(self) -> int:
        """Input plus output, counting unknown as 0 (for rate limits only)."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def to_dict(self) -> dict[str, int | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        if not data:
            return cls()
        names = {f.name for f in fields(cls)}
        return cls(**{k: (int(v) if v is not None else None) for k, v in data.items() if k in names})


@dataclass(slots=True)
class Part:
    """One piece of a message, told apart by ``type``."""

    type: PartType
    text: str | None = None
    tool_use_id: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    tool_result: dict[str, Any] | None = None
    tool_status: ToolStatus | None = None
    media_ref: str | None = None
    media_type: str | None = None
    signature: str | None = None
    tool_source: str | None = None  # on a tool_result: where the tool came from (Tool.source), if not local
    duration_ms: float | None = None  # a tool result's run time (None before it was kept)
    effects: list[dict[str, Any]] | None = None  # what a tool result reported changing

    # -- constructors that read well in scripts and tests -------------------
    @classmethod
    def of_text(cls, text: str) -> Part:
        return cls(type="text", text=text)

    @classmethod
    def of_reasoning(cls, text: str | None, signature: str | None = None) -> Part:
        return cls(type="reasoning", text=text, signature=signature)

    @classmethod
    def of_tool_use(
        cls, tool_use_id: str, name: str, tool_input: dict[str, Any] | None, raw: str | None = None
    ) -> Part:
        return cls(type="tool_use", tool_use_id=tool_use_id, tool_name=name, tool_input=tool_input, text=raw)

    @classmethod
    def of_tool_result(
        cls,
        tool_use_id: str,
        name: str | None,
        result: dict[str, Any],
        status: ToolStatus = "ok",
        duration_ms: float | None = None,
        effects: list[dict[str, Any]] | None = None,
    ) -> Part:
        return cls(
            type="tool_result",
            tool_use_id=tool_use_id,
            tool_name=name,
            tool_result=result,
            tool_status=status,
            duration_ms=duration_ms,
            effects=effects or None,
        )

    @classmethod
    def of_media(cls, kind: Literal["image", "document"], ref: str, media_type: str) -> Part:
        return cls(type=kind, media_ref=ref, media_type=media_type)

    @property
    def is_redacted_reasoning(self) -> bool:
        return self.type == "reasoning" and self.text is None and self.signature is not None

    def to_dict(self) -> dict[str, Any]:
        """Only the fields that are set: the one serialised form for JSON and the widget."""
        return {name: v for name in _PART_FIELDS if (v := getattr(self, name)) is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Part:
        try:
            return cls(**data)
        except TypeError:  # keys from a newer or foreign writer: keep what we know
            return cls(**{k: v for k, v in data.items() if k in _PART_FIELDS})


_PART_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Part))


@dataclass(slots=True)
class Message:
    """One turn. Assistant messages also carry the record of the model call."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    session_id: str | None = None
    position: int | None = None
    created_at: datetime = field(default_factory=utcnow)
    # -- the per-call record (assistant messages only) ----------------------
    backend: str | None = None
    model_id: str | None = None
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    usage: Usage | None = None
    tools_offered: list[str] | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None

    @classmethod
    def user(cls, text: str, *media: Part) -> Message:
        return cls(role="user", parts=[Part.of_text(text), *media])

    @property
    def text(self) -> str:
        """The concatenated visible text of the message."""
        return "".join(p.text or "" for p in self.parts if p.type == "text")

    def tool_uses(self) -> list[Part]:
        return [p for p in self.parts if p.type == "tool_use"]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "position": self.position,
            "role": self.role,
            "created_at": self.created_at.isoformat(),
            "parts": [p.to_dict() for p in self.parts],
        }
        for name in (
            "backend",
            "model_id",
            "stop_reason",
            "raw_stop_reason",
            "tools_offered",
            "latency_ms",
            "ttft_ms",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        created = data.get("created_at")
        return cls(
            role=data["role"],
            parts=[Part.from_dict(p) for p in data.get("parts", [])],
            session_id=data.get("session_id"),
            position=data.get("position"),
            created_at=datetime.fromisoformat(created) if isinstance(created, str) else (created or utcnow()),
            backend=data.get("backend"),
            model_id=data.get("model_id"),
            stop_reason=data.get("stop_reason"),
            raw_stop_reason=data.get("raw_stop_reason"),
            usage=Usage.from_dict(data["usage"]) if "usage" in data else None,
            tools_offered=data.get("tools_offered"),
            latency_ms=data.get("latency_ms"),
            ttft_ms=data.get("ttft_ms"),
        )


@dataclass(slots=True)
class Session:
    """A conversation. It has no foreign key into any domain: the store links a
    session to a case (``TranscriptStore.link_case``)."""

    id: str = field(default_factory=new_id)
    user: str = "analyst"
    purpose: str = "chat"
    status: SessionStatus = "active"
    system_prompt: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    replay_of: str | None = None
    title: str | None = None
    # The analyst's team, for team cost reports: ``$TAHRIX_TEAM`` when the session is made.
    team: str | None = field(default_factory=lambda: os.environ.get("TAHRIX_TEAM") or None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "purpose": self.purpose,
            "status": self.status,
            "system_prompt": self.system_prompt,
            "created_at": self.created_at.isoformat(),
            "replay_of": self.replay_of,
            "title": self.title,
            "team": self.team,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        created = data.get("created_at")
        return cls(
            id=data["id"],
            user=data.get("user", "analyst"),
            purpose=data.get("purpose", "chat"),
            status=data.get("status", "active"),
            system_prompt=data.get("system_prompt"),
            created_at=datetime.fromisoformat(created) if isinstance(created, str) else (created or utcnow()),
            replay_of=data.get("replay_of"),
            title=data.get("title"),
            team=data.get("team"),
        )
