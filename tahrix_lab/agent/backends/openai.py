"""Any OpenAI-compatible Chat Completions endpoint, on the official ``openai`` SDK.

OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, LM Studio, DeepSeek: all
speak Chat Completions with ``stream=True``. The module-level functions are
the two translations and can be tested without a client:

    as_wire_messages / as_wire_tools / as_wire_request   neutral -> wire
    map_stream / amap_stream / map_stop_reason / map_usage (openai_events)
                                                          wire -> events
    map_error                                             any failure -> BackendError

``OpenAIBackend`` only sets up the client (SDK retries off: the loop retries)
and runs a request through them: ``stream`` on ``openai.OpenAI``, ``astream``
on its ``openai.AsyncOpenAI`` twin (the job service reads many at once on one
event loop).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import openai

from tahrix_lab.agent.backends.base import (
    Event,
    ToolSpec,
)
from tahrix_lab.agent.backends.headers import parse_retry_after
from tahrix_lab.agent.backends.media import Media, MediaError, load_media
from tahrix_lab.agent.backends.openai_events import amap_stream, map_stream
from tahrix_lab.agent.backends.openai_events import map_stop_reason as map_stop_reason  # re-exported
from tahrix_lab.agent.backends.openai_events import map_usage as map_usage  # re-exported
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.transcript import Message, Part

log = logging.getLogger(__name__)

FAMILY = "openai"

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})

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

# Endpoints known to accept ``prompt_cache_key``; elsewhere it is sent only when
# the backend is told to (some servers refuse fields they do not know).
PROMPT_CACHE_KEY_HOSTS = frozenset({"api.openai.com"})

Loader = Callable[[Part], Media]


def accepts_prompt_cache_key(base_url: str | None) -> bool:
    """Whether ``prompt_cache_key`` goes to this endpoint by default (``None``: api.openai.com)."""
    if base_url is None:
        return True
    return (urlsplit(base_url).hostname or "").lower() in PROMPT_CACHE_KEY_HOSTS


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


def tool_result_text(result: dict[str, Any] | None) -> str:
    """The one serialisation of a tool result, so replays send the same bytes."""
    return json.dumps(result if result is not None else {}, ensure_ascii=False)


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


# -- failures -------------------------------------------------------------------
def map_error(exc: BaseException) -> BackendError:
    """The one place where an SDK or transport failure becomes a ``BackendError``."""
    if isinstance(exc, BackendError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        headers = dict(exc.response.headers) if exc.response is not None else None
        return BackendError(
            f"The OpenAI-compatible endpoint answered HTTP {status}: {exc.message}",
            status=status,
            retryable=status in RETRYABLE_STATUS or status >= 500,
            retry_after=parse_retry_after(headers),
            cause=exc,
        )
    if isinstance(exc, openai.APITimeoutError):
        return BackendError("The OpenAI-compatible endpoint timed out.", retryable=True, cause=exc)
    if isinstance(exc, openai.APIConnectionError):
        detail = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
        return BackendError(
            f"Could not reach the OpenAI-compatible endpoint, or it dropped the connection{detail}.",
            retryable=True,
            cause=exc,
        )
    if isinstance(exc, openai.APIError):  # an in-band {"error": ...} chunk
        body = exc.body if isinstance(exc.body, dict) else {}
        code = body.get("code")
        in_band = code if isinstance(code, int) else None
        retryable = in_band is not None and (in_band in RETRYABLE_STATUS or in_band >= 500)
        return BackendError(
            f"The OpenAI-compatible endpoint reported an error in its stream: {exc.message}",
            status=in_band,
            retryable=retryable,
            cause=exc,
        )
    if isinstance(exc, ValueError):  # json.JSONDecodeError and friends: a malformed event
        return BackendError(f"The endpoint sent a malformed stream event: {exc}", retryable=True, cause=exc)
    if isinstance(exc, openai.OpenAIError):
        return BackendError(f"The OpenAI SDK failed: {exc}", cause=exc)
    if isinstance(exc, OSError):
        return BackendError(f"The connection to the endpoint failed: {exc}", retryable=True, cause=exc)
    return BackendError(f"The OpenAI-compatible request failed: {type(exc).__name__}: {exc}", cause=exc)


# -- the client -----------------------------------------------------------------
class OpenAIBackend:
    """A ``Backend`` for any OpenAI-compatible endpoint.

    ``base_url`` ``None`` means api.openai.com (then ``api_key`` or
    ``OPENAI_API_KEY`` is required); local servers need no key. ``client`` is
    an ``openai.OpenAI`` to use as it is (tests, custom HTTP set-up); ``aclient``
    its ``openai.AsyncOpenAI`` twin for ``astream`` (by default one is made with
    ``client``'s URL, key, timeout and retries).
    ``prompt_cache_key`` says whether to send one key per session: ``None``
    sends it to api.openai.com only (an endpoint that refuses unknown fields
    needs ``False``; OpenRouter or a proxy in front of OpenAI may take ``True``)."""

    name = FAMILY

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.OpenAI | None = None,
        *,
        aclient: openai.AsyncOpenAI | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        load: Loader = load_media,
        prompt_cache_key: bool | None = None,
    ) -> None:
        self.load = load
        # astream's client and the loop it belongs to (made from the sync one's settings on first use)
        self._aclient: tuple[asyncio.AbstractEventLoop | None, openai.AsyncOpenAI] | None = (
            (None, aclient) if aclient is not None else None
        )
        if client is not None:
            self.client = client
            self.prompt_cache_key = (
                accepts_prompt_cache_key(str(client.base_url))
                if prompt_cache_key is None
                else prompt_cache_key
            )
            return
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.prompt_cache_key = (
            accepts_prompt_cache_key(base_url) if prompt_cache_key is None else prompt_cache_key
        )
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if base_url is None:
                raise ConfigurationError(
                    "The openai backend needs an API key: set OPENAI_API_KEY "
                    "(or OPENAI_BASE_URL for a local OpenAI-compatible server)."
                )
            api_key = "not-needed"  # vLLM, Ollama, llama.cpp and LM Studio accept any key
        import httpx2

        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,  # the loop retries, before the first event only
            timeout=httpx2.Timeout(timeout, connect=connect_timeout),
        )

    def _request(self, system: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec], model: str,
                 inference: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
        return as_wire_request(
            system=system, messages=messages, tools=tools, model=model, inference=inference, load=self.load,
            cache_key=session_cache_key(messages) if self.prompt_cache_key else None,
        )  # fmt: skip

    def stream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterator[Event]:
        request = self._request(system, messages, tools, model, inference)
        try:
            sdk_stream = self.client.chat.completions.create(**request)
        except Exception as exc:
            raise map_error(exc) from exc
        try:
            yield from map_stream(sdk_stream)
        except Exception as exc:
            raise map_error(exc) from exc
        finally:
            sdk_stream.close()

    async def astream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> AsyncIterator[Event]:
        """``stream`` on an event loop, through the SDK's ``AsyncOpenAI`` with the same settings."""
        request = self._request(system, messages, tools, model, inference)
        try:
            sdk_stream = await self._async_client().chat.completions.create(**request)
        except Exception as exc:
            raise map_error(exc) from exc
        try:
            async for event in amap_stream(sdk_stream):
                yield event
        except Exception as exc:
            raise map_error(exc) from exc
        finally:
            await sdk_stream.close()

    async def aclose(self) -> None:
        """Close ``astream``'s client, on the event loop that used it."""
        if self._aclient is not None:
            aclient, self._aclient = self._aclient[1], None
            await aclient.close()

    def _async_client(self) -> openai.AsyncOpenAI:
        """The async twin of ``client`` (its URL, key, timeout and retries), one per event loop:
        its connection pool belongs to the loop it was made on."""
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aclient[0] not in (None, loop):
            c = self.client
            aclient = openai.AsyncOpenAI(base_url=c.base_url, api_key=c.api_key, timeout=c.timeout,
                                         max_retries=c.max_retries)  # fmt: skip
            self._aclient = (loop, aclient)
        return self._aclient[1]
