"""Any OpenAI-compatible Chat Completions endpoint, on the official ``openai`` SDK.

OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, LM Studio, DeepSeek: all
speak Chat Completions with ``stream=True``. The two translations are
module-level functions in their own modules and can be tested without a client:

    as_wire_messages / as_wire_tools / as_wire_request (openai_wire)
                                                          neutral -> wire
    map_stream / amap_stream / map_stop_reason / map_usage (openai_events)
                                                          wire -> events
    map_error (here)                                      any failure -> BackendError

``OpenAIBackend`` only sets up the client (SDK retries off: the loop retries)
and runs a request through them: ``stream`` on ``openai.OpenAI``, ``astream``
on its ``openai.AsyncOpenAI`` twin (the job service reads many at once on one
event loop).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import openai

from tahrix_lab.agent.backends.base import Event, ToolSpec
from tahrix_lab.agent.backends.headers import parse_retry_after
from tahrix_lab.agent.backends.media import load_media
from tahrix_lab.agent.backends.openai_events import amap_stream, map_stream
from tahrix_lab.agent.backends.openai_events import map_stop_reason as map_stop_reason  # re-exported
from tahrix_lab.agent.backends.openai_events import map_usage as map_usage  # re-exported
from tahrix_lab.agent.backends.openai_wire import FAMILY, Loader, session_cache_key
from tahrix_lab.agent.backends.openai_wire import as_wire_messages as as_wire_messages  # re-exported
from tahrix_lab.agent.backends.openai_wire import as_wire_request as as_wire_request  # re-exported
from tahrix_lab.agent.backends.openai_wire import as_wire_tools as as_wire_tools  # re-exported
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.transcript import Message

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})

# Endpoints known to accept ``prompt_cache_key``; elsewhere it is sent only when
# the backend is told to (some servers refuse fields they do not know).
PROMPT_CACHE_KEY_HOSTS = frozenset({"api.openai.com"})


def accepts_prompt_cache_key(base_url: str | None) -> bool:
    """Whether ``prompt_cache_key`` goes to this endpoint by default (``None``: api.openai.com)."""
    if base_url is None:
        return True
    return (urlsplit(base_url).hostname or "").lower() in PROMPT_CACHE_KEY_HOSTS


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
