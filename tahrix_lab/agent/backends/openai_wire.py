"""The OpenAI Chat Completions adapter's neutral -> wire translation: the request for a neutral history.

Pure functions with no client (``as_wire_messages``, ``as_wire_tools``,
``as_wire_request``), and the per-model quirks as data. The other direction
(wire -> events) is ``openai_events``.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tahrix_lab.agent.backends.base import ToolSpec, tool_result_text
from tahrix_lab.agent.backends.media import Media, MediaError, load_media
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.transcript import Message, Part

log = logging.getLogger("tahrix_lab.agent.backends.openai")  # the adapter's log, as operators know it

FAMILY = "openai"

# Keys of ``inference`` this adapter reads; the other family's extras are ignored
# so one inference dict can follow a conversation across providers.
NEUTRAL_KEYS = frozenset({"max_tokens", "temperature", "top_p", "stop_sequences", "prompt_caching"})
OPENAI_KEYS = frozenset({"extra_body", "extra_headers", "reasoning_effort", "seed", "parallel_tool_calls"})
OTHER_FAMILY_KEYS = frozenset({"additional_model_request_fields", "guardrail_config", "performance_config"})


@dataclass(frozen=True, slots=True)
class ModelQuirks:
    """What differs between models behind the same API, as data."""

    max_tokens_field: str = "max_tokens"
    sampling: bool = True  # accepts temperature / top_p


REASONING_MODEL = ModelQuirks(max_tokens_field="max_completion_tokens", sampling=False)

# model-id prefix (after any "vendor/" part) -> quirks; first match wins
QUIRKS: tuple[tuple[str, ModelQuirks], ...] = (
    ("o1", REASONING_MODEL),
    ("o3", REASONING_MODEL),
    ("o4", REASONING_MODEL),
    ("gpt-5", REASONING_MODEL),
)

# How each document format reaches an OpenAI-compatible endpoint: PDFs as file
# parts, text formats inline as text. A format missing here (docx) is refused.
DOCUMENT_MODES: dict[str, Literal["file", "text"]] = {
    "pdf": "file",
    "csv": "text",
    "txt": "text",
    "md": "text",
    "html": "text",
}

Loader = Callable[[Part], Media]


def session_cache_key(messages: Sequence[Message]) -> str | None:
    """One ``prompt_cache_key`` per session, so its calls reach the same cache;
    ``None`` for a history not stored in a session."""
    session = next((m.session_id for m in messages if m.session_id), None)
    return f"tahrix-{session}" if session else None


def quirks_for(model: str) -> ModelQuirks:
    bare = model.rsplit("/", 1)[-1].lower()
    for prefix, quirks in QUIRKS:
        if bare.startswith(prefix):
            return quirks
    return ModelQuirks()


# -- neutral -> wire ------------------------------------------------------------
def as_wire_messages(
    system: str | None, messages: Sequence[Message], *, load: Loader = load_media
) -> list[dict[str, Any]]:
    """The Chat Completions ``messages`` list for a neutral history.

    Reasoning never goes back (OpenAI-compatible servers reject or ignore it,
    and opaque signatures belong to the family that made them); each tool
    result is its own ``role: "tool"`` message."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for msg in messages:
        if msg.role == "tool":
            out.extend(_tool_message(p) for p in msg.parts if p.type == "tool_result")
        elif msg.role == "assistant":
            out.append(_assistant_message(msg, same_family=msg.backend == FAMILY))
        else:
            out.append({"role": "user", "content": _user_content(msg.parts, load)})
    return out


def _tool_message(part: Part) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": part.tool_use_id or "",
        "content": tool_result_text(part.tool_result),
    }


def _assistant_message(msg: Message, *, same_family: bool) -> dict[str, Any]:
    text = "".join(p.text or "" for p in msg.parts if p.type == "text")
    wire: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [
        {
            "id": p.tool_use_id or "",
            "type": "function",
            "function": {"name": p.tool_name or "", "arguments": tool_arguments(p, same_family)},
        }
        for p in msg.parts
        if p.type == "tool_use"
    ]
    if calls:
        wire["tool_calls"] = calls
    elif wire["content"] is None:
        wire["content"] = ""
    return wire


def tool_arguments(part: Part, same_family: bool = True) -> str:
    """The raw argument text as this family sent it (a replay sends the same
    bytes), else the input as JSON."""
    if part.text is not None and same_family:
        return part.text
    return json.dumps(part.tool_input if part.tool_input is not None else {}, ensure_ascii=False)


def _user_content(parts: Sequence[Part], load: Loader) -> str | list[dict[str, Any]]:
    if all(p.type == "text" for p in parts):
        return "".join(p.text or "" for p in parts)
    content: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text":
            if part.text:
                content.append({"type": "text", "text": part.text})
        elif part.type in ("image", "document"):
            content.append(_media_part(load(part)))
    return content


def _media_part(media: Media) -> dict[str, Any]:
    encoded = base64.b64encode(media.data).decode("ascii")
    if media.kind == "image":
        return {"type": "image_url", "image_url": {"url": f"data:{media.media_type};base64,{encoded}"}}
    mode = DOCUMENT_MODES.get(media.format)
    if mode == "file":
        return {
            "type": "file",
            "file": {
                "filename": f"{media.name}.{media.format}",
                "file_data": f"data:{media.media_type};base64,{encoded}",
            },
        }
    if mode == "text":
        try:
            body = media.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MediaError(
                f"The {media.format} document {media.name!r} is not UTF-8 text.", cause=exc
            ) from exc
        return {"type": "text", "text": f'<document name="{media.name}.{media.format}">\n{body}\n</document>'}
    allowed = ", ".join(sorted(DOCUMENT_MODES))
    raise MediaError(
        f"OpenAI-compatible endpoints cannot take {media.format} documents ({media.name!r}); "
        f"convert it to one of: {allowed}."
    )


def as_wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
        }
        for t in tools
    ]


def as_wire_request(
    *,
    system: str | None,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    model: str,
    inference: dict[str, Any] | None,
    load: Loader = load_media,
    cache_key: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``.

    Within a session the request before the history never changes: the system
    message comes first and is the session's; the tools keep the caller's
    order; nothing per call (ids, times) is sent. So the provider's automatic
    prefix cache hits. ``cache_key`` becomes ``prompt_cache_key`` unless
    ``inference["prompt_caching"]`` is false."""
    inference = dict(inference or {})
    unknown = set(inference) - NEUTRAL_KEYS - OPENAI_KEYS - OTHER_FAMILY_KEYS
    if unknown:
        raise ConfigurationError(
            f"Unknown inference setting(s) {sorted(unknown)} for the openai backend; "
            f"known: {sorted(NEUTRAL_KEYS | OPENAI_KEYS)}."
        )
    quirks = quirks_for(model)
    request: dict[str, Any] = {
        "model": model,
        "messages": as_wire_messages(system, messages, load=load),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        request["tools"] = as_wire_tools(tools)
    if inference.get("max_tokens") is not None:
        request[quirks.max_tokens_field] = inference["max_tokens"]
    for key in ("temperature", "top_p"):
        if inference.get(key) is not None:
            if quirks.sampling:
                request[key] = inference[key]
            else:
                log.debug("model %s takes no %s; not sent", model, key)
    if inference.get("stop_sequences"):
        request["stop"] = list(inference["stop_sequences"])
    for key in sorted(OPENAI_KEYS):
        if inference.get(key) is not None:
            request[key] = inference[key]
    if cache_key and inference.get("prompt_caching", True):
        request["prompt_cache_key"] = cache_key
    return request
