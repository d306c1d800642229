"""Limits a hostile client meets on the HTTP server (issue 31 item 2; docs/security.md).

* ``ReadTimeouts``: uvicorn closes idle keep-alive connections, but has no
  timeout for a request being read: a client sending a header byte every few
  seconds (slowloris), or one that connects and sends nothing, holds its
  connection forever. This subclass of uvicorn's httptools protocol arms one
  timer per request: the headers must be complete within ``header_timeout``
  of the connection (or of the request's first byte), then the body within
  ``body_timeout``; else the connection is closed. It is the smallest hook:
  the parser's own callbacks, no extra task per connection.
* ``SignInThrottle``: a failed token check (any 401 under ``/api``) costs the
  client address one token of a bucket refilled at ``per_minute``; an empty
  bucket answers 429 to every ``/api`` request from that address until it
  refills (a valid token included, else the throttle would not slow guessing).
  Requests that pass the check cost nothing.
* ``SecurityHeaders``: every response (page, API, static files, errors) says
  where its content may come from and that no other site may frame it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


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
            await _too_many(send, int(1 / self.rate) + 1)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                self._charge(client)
            await send(message)

        await self.app(scope, receive, watch)


async def _too_many(send: Send, retry_after: int) -> None:
    body = json.dumps(
        {
            "detail": "Too many failed sign-ins from this address. Please wait a minute and try again.",
            "field": None,
        }
    ).encode()
    headers: list[Any] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                          (b"retry-after", str(retry_after).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
