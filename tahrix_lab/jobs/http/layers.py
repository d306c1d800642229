"""The ASGI layers around the FastAPI app (outer apps: the framework is composed, not patched).

* ``FastPaths``: under load nearly every request is a long-poll answer or, in a
  burst, a start, and FastAPI's layers (middlewares, dependency solving,
  validation) cost several times the work of the answer. A well-formed poll or
  start with a known token is answered here with the routes' own functions (the
  same ownership check, deadline, admission and JSON; the POST body checked by
  the route's pydantic model). Anything else goes on to FastAPI, which answers
  it as documented (401, 413, 422, ...): the OpenAPI routes stay the contract.
* ``BodyLimit``: bodies over the limit answer 413 before anything parses them.
* ``ReadTimeouts`` (uvicorn's ``http=`` protocol): uvicorn has no timeout for a
  request being read, so a slowloris client, or one that sends nothing, would
  hold its connection forever. One timer per request: the headers within
  ``header_timeout`` of the connection (or of the request's first byte), then
  the body within ``body_timeout``; else the connection is closed.
* ``SignInThrottle``: each 401 under ``/api`` costs the client address a token
  of a bucket refilled at ``per_minute``; an empty bucket answers 429 to every
  ``/api`` request from that address, a valid token included (else guessing
  would go on). Requests that pass the check cost nothing.
* ``SecurityHeaders``: every response says where its content may come from and
  that no other site may frame it (docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tahrix_lab.jobs.contract import JobRejected, StoreUnavailable

log = logging.getLogger(__name__)

_JOB_ID = re.compile(r"[^/]+")
# What FastAPI reads as a bool query parameter; anything else goes to it (and is a 422).
_BOOLS = {
    "1": True,
    "true": True,
    "on": True,
    "yes": True,
    "0": False,
    "false": False,
    "off": False,
    "no": False,
}
TOO_MANY = "Too many failed sign-ins from this address. Please wait a minute and try again."
STORE_DOWN = "The job store is unreachable right now. Please try again in a moment."


class FastPaths:
    """See the module docstring. ``read(job_id, user, since, wait, content)`` and ``admit(body,
    user)`` are the routes' functions; they refuse with ``JobRejected``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        prefix: str,
        tokens: dict[str, str],
        read: Callable[[str, str, int, float, bool], Awaitable[dict[str, Any]]],
        admit: Callable[[Any, str], Awaitable[dict[str, Any]]],
        body_model: type[BaseModel],
        max_body: int,
    ) -> None:
        self.app = app
        self.start_path = f"{prefix}/chat-stream-job"
        self.path_prefix = self.start_path + "/"
        self.tokens = tokens
        self.read = read
        self.admit = admit
        self.body_model = body_model
        self.max_body = max_body

    def _user(self, scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        return None

    def _poll(self, scope: Scope) -> tuple[str, str, int, float, bool] | None:
        """(job id, user, since, wait, content) of a well-formed poll, else None (FastAPI
        answers it)."""
        job_id = scope["path"][len(self.path_prefix) :]
        if not _JOB_ID.fullmatch(job_id):
            return None
        user = self._user(scope)
        if user is None:
            return None
        since, wait, content = 0, 0.0, True
        try:
            for key, value in parse_qsl(scope["query_string"].decode("latin-1")):
                if key == "since":
                    since = int(value)
                elif key == "wait":
                    wait = float(value)
                elif key == "content":
                    content = _BOOLS[value.lower()]
        except (ValueError, KeyError):
            return None
        if not (0 <= since <= 10_000_000 and 0 <= wait <= 25):  # the route's bounds; NaN fails too
            return None
        return job_id, user, since, wait, content

    def _json_post(self, scope: Scope) -> bool:
        declared = -1
        json_type = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = int(value) if value.isdigit() else -1
            elif name == b"content-type":
                json_type = value.split(b";")[0].strip().lower() == b"application/json"
        return json_type and 0 <= declared <= self.max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            if method == "GET" and path.startswith(self.path_prefix):
                poll = self._poll(scope)
                if poll is not None:
                    await self._answer(scope, receive, send, self.read(*poll))
                    return
            elif method == "POST" and path == self.start_path and self._json_post(scope):
                await self._start(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _start(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = await read_body(receive)
        if raw is None:
            return
        user = self._user(scope)
        body: Any = None
        if user is not None and len(raw) <= self.max_body:
            try:
                body = self.body_model.model_validate_json(raw)
            except ValidationError:
                body = None
        if body is None or user is None:  # FastAPI answers it (401, 413, 422) from the same bytes
            await self.app(scope, replaying(raw, receive), send)
            return
        await self._answer(scope, receive, send, self.admit(body, user))

    async def _answer(self, scope: Scope, receive: Receive, send: Send, result: Awaitable[Any]) -> None:
        try:
            answer = await result
        except StoreUnavailable as exc:
            log.error("job store unavailable: %s", exc)
            await send_json(send, 503, {"detail": STORE_DOWN, "field": None})
        except JobRejected as exc:
            await send_json(send, exc.status, {"detail": exc.message, "field": exc.field})
        else:
            await send_json(send, 200, answer)


class BodyLimit:
    """Refuse bodies over ``limit`` bytes with 413, by Content-Length or by counting the stream."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), b"0")
        too_big = declared.isdigit() and int(declared) > self.limit
        raw = b"" if too_big else await read_body(receive, self.limit)
        if raw is None:
            return
        if too_big or len(raw) > self.limit:
            problem = {"detail": f"The request body is larger than {self.limit} bytes.", "field": None}
            await send_json(send, 413, problem)
            return
        await self.app(scope, replaying(raw, receive), send)


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The request's body (reading stops past ``limit``); ``None`` when the client went away."""
    body = bytearray()
    more = True
    while more and (limit is None or len(body) <= limit):
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return bytes(body)


def replaying(raw: bytes, receive: Receive) -> Receive:
    """``receive`` for an app further in, giving it the body already read."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


async def send_json(send: Send, status: int, obj: Any, *headers: tuple[bytes, bytes]) -> None:
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def read_timeouts(header_timeout: float, body_timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's ``http=`` protocol class with these timeouts."""
    return type(
        "ReadTimeouts", (ReadTimeouts,), {"header_timeout": header_timeout, "body_timeout": body_timeout}
    )


class ReadTimeouts(HttpToolsProtocol):
    """See the module docstring."""

    header_timeout = 10.0
    body_timeout = 30.0
    _read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout)  # a connection that never sends a byte is closed too

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._read_timer is None:  # the next request on a kept-alive connection
            self._arm(self.header_timeout)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_timeout)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _too_slow(self) -> None:
        self._read_timer = None
        if not self.transport.is_closing():
            log.info("closing a connection from %s: its request was not read in time", self.client)
            self.transport.close()


class SignInThrottle:
    """See the module docstring."""

    def __init__(
        self, app: ASGIApp, per_minute: int, *, prefix: str = "/api", max_clients: int = 10_000
    ) -> None:
        self.app = app
        self.burst = float(per_minute)
        self.rate = per_minute / 60.0
        self.prefix = prefix
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens left, at)

    def _left(self, client: str, now: float) -> float:
        tokens, at = self._buckets.get(client, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def _charge(self, client: str) -> None:
        now = time.monotonic()
        self._buckets[client] = (self._left(client, now) - 1.0, now)
        if len(self._buckets) > self.max_clients:  # forget the clients whose bucket is full again
            for key in [k for k in self._buckets if self._left(k, now) >= self.burst]:
                del self._buckets[key]
            while len(self._buckets) > self.max_clients:  # still too many: the oldest go
                del self._buckets[next(iter(self._buckets))]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix) or self.burst <= 0:
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("unknown",))[0]
        if client in self._buckets and self._left(client, time.monotonic()) < 1.0:
            await send_json(
                send,
                429,
                {"detail": TOO_MANY, "field": None},
                (b"retry-after", str(int(1 / self.rate) + 1).encode()),
            )
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                self._charge(client)
            await send(message)

        await self.app(scope, receive, watch)


# The page loads its scripts and styles from /static; its own <style> block (page.html) is the one
# inline part, so styles allow 'unsafe-inline' and scripts do not.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")  # fmt: skip
# /docs (only with --api-docs) is FastAPI's swagger-ui from its CDN, with an inline starter script.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
            "style-src 'self' https://cdn.jsdelivr.net; img-src 'self' data: https://fastapi.tiangolo.com; "
            "frame-ancestors 'none'")  # fmt: skip
HEADERS = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer")]  # fmt: skip


class SecurityHeaders:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, *, docs: bool = False) -> None:
        self.app = app
        self.docs = docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = (DOCS_CSP if self.docs and scope["path"] == "/docs" else CSP).encode()

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"content-security-policy", csp), *HEADERS],
                }
            await send(message)

        await self.app(scope, receive, with_headers)
