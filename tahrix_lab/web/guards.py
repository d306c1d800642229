"""The ASGI layers and uvicorn settings every HTTP server of Tahrix Lab puts around its app.

Outer apps: each framework is composed, not patched. Used by the job service
(``tahrix serve``) and the MCP server (``tahrix mcp serve --http``).

* ``BodyLimit``: bodies over the limit answer 413 before anything parses them.
* ``ReadTimeouts`` (uvicorn's ``http=`` protocol): uvicorn has no timeout for a
  request being read, so a slowloris client, or one that sends nothing, would
  hold its connection forever. One timer per request: the headers within
  ``header_timeout`` of the connection (or of the request's first byte), then
  the body within ``body_timeout``; else the connection is closed.
* ``SignInThrottle``: each 401 under ``prefix`` costs the client address a token
  of a bucket refilled at ``per_minute``; an empty bucket answers 429 to every
  request under ``prefix`` from that address, a valid token included (else
  guessing would go on). Requests that pass the check cost nothing.
* ``SecurityHeaders``: every response says where its content may come from and
  that no other site may frame it (docs/security.md): ``PAGE_CSP`` for a server
  with a page, ``API_CSP`` for one that answers only JSON or SSE.
* ``Limits`` and ``uvicorn_limits``: the knobs above and uvicorn's own
  (keep-alive, concurrency), named as ``tahrix serve``'s options.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

TOO_MANY = "Too many failed sign-ins from this address. Please wait a minute and try again."


@dataclass(frozen=True)
class Limits:
    """What a server allows a client (the defaults are ``tahrix serve``'s)."""

    max_body_bytes: int = 64 * 1024
    keep_alive_s: float = 5.0  # an idle kept-alive connection is closed after this
    header_timeout_s: float = 10.0  # a request's headers must arrive within this
    body_timeout_s: float = 30.0  # then its body within this
    limit_concurrency: int | None = 1000  # connections and requests at once; more answer 503
    failed_sign_ins_per_minute: int = 30  # per client address; more answer 429


def uvicorn_limits(limits: Limits) -> dict[str, Any]:
    """``uvicorn.Config`` arguments for ``limits``: slow or idle clients are closed (keep-alive
    by uvicorn, header and body reads by ``ReadTimeouts``); past ``limit_concurrency``
    connections answer 503."""
    return {
        "http": read_timeouts(limits.header_timeout_s, limits.body_timeout_s),
        "timeout_keep_alive": int(limits.keep_alive_s) or 1,
        "limit_concurrency": limits.limit_concurrency or None,
    }


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
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")  # fmt: skip
# /docs (only with --api-docs) is FastAPI's swagger-ui from its CDN, with an inline starter script.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
            "style-src 'self' https://cdn.jsdelivr.net; img-src 'self' data: https://fastapi.tiangolo.com; "
            "frame-ancestors 'none'")  # fmt: skip
# A server that answers only JSON or SSE (MCP): nothing it sends may load or run anything.
API_CSP = "default-src 'none'; frame-ancestors 'none'"
HEADERS = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer")]  # fmt: skip


class SecurityHeaders:
    """See the module docstring: ``csp`` on every response, ``DOCS_CSP`` on ``/docs`` when
    ``docs``."""

    def __init__(self, app: ASGIApp, *, csp: str = PAGE_CSP, docs: bool = False) -> None:
        self.app = app
        self.csp = csp.encode()
        self.docs = docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = DOCS_CSP.encode() if self.docs and scope["path"] == "/docs" else self.csp

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"content-security-policy", csp), *HEADERS],
                }
            await send(message)

        await self.app(scope, receive, with_headers)
