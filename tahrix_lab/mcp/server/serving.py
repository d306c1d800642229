"""Transports for ``CaseMcpServer``: stdio, and streamable HTTP behind bearer tokens.

The tokens file is the job service's (``{"<token>": "<user>"}``); the token
names the user the calls are recorded for. The SDK's own auth support is
built for OAuth authorization servers; a static token table needs only this
small check (constant-time compare, ``401`` with ``WWW-Authenticate``).

Over HTTP the server has the job service's guards (``tahrix_lab.web.guards``):
read timeouts, a body limit, failed sign-ins throttled per client address,
security headers for an API (``API_CSP``), a keep-alive timeout and a
concurrency limit.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.mcp.server.case_server import USER_KEY, CaseMcpServer
from tahrix_lab.web.guards import (
    API_CSP,
    BodyLimit,
    Limits,
    SecurityHeaders,
    SignInThrottle,
    send_json,
    uvicorn_limits,
)

MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The job service's limits, but a body may be a JSON-RPC message with a tool's arguments: far
# below 1 MiB (the SDK's own cap is 4 MB).
LIMITS = Limits(max_body_bytes=1024 * 1024)


async def serve_stdio(case_server: CaseMcpServer) -> None:
    server = case_server.server
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(case_server: CaseMcpServer) -> None:
    anyio.run(serve_stdio, case_server)


class BearerTokens:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer <token>`` from the tokens table."""

    def __init__(self, app: Any, tokens: dict[str, str]) -> None:
        self.app = app
        self._tokens = [(t.encode(), u) for t, u in tokens.items()]
        # MCP session id -> the user whose request created it: a session is its user's alone.
        self._owners: dict[bytes, str] = {}

    def user_for(self, header: bytes | None) -> str | None:
        if not header or header[:7].lower() != b"bearer ":
            return None
        offered = header[7:].strip()
        user = None
        for token, name in self._tokens:  # compare with every token: no early exit to time
            if hmac.compare_digest(offered, token):
                user = name
        return user

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization")
        user = self.user_for(header)
        if user is None:
            await send_json(send, 401, {"error": "A valid bearer token is required (Authorization: Bearer <token>)."},
                            (b"www-authenticate", b'Bearer realm="tahrix-mcp"'))  # fmt: skip
            return
        scope[USER_KEY] = user
        session = dict(scope.get("headers") or []).get(SESSION_HEADER)
        if session is not None and self._owners.get(session, user) != user:
            # Another user's session answers as an unknown one would: no hint that it exists.
            await send_json(send, 404, {"jsonrpc": "2.0", "id": "server-error",
                                        "error": {"code": -32600, "message": "Session not found"}})  # fmt: skip
            return

        async def bind(message: Any) -> None:
            if message["type"] == "http.response.start":
                created = dict(message.get("headers") or []).get(SESSION_HEADER)
                if created is not None:
                    self._owners.setdefault(created, user)
            await send(message)

        await self.app(scope, receive, bind)


def transport_security(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding protection, kept on for every bind.

    On loopback the SDK turns it on by itself (``None``); any other address must name the
    ``Host`` values (and browser ``Origin`` values) it answers to, or the server does not start.
    """
    if not allowed_hosts and not allowed_origins:
        if host in LOOPBACK:
            return None
        raise ConfigurationError(
            f"Binding {host} exposes the server beyond this machine: name the Host values it answers to with "
            "--allowed-host (e.g. --allowed-host mcp.example.org:443) and, for browsers, --allowed-origin "
            "(e.g. https://app.example.org); put TLS in front (a reverse proxy)."
        )
    hosts, origins = list(allowed_hosts), list(allowed_origins)
    if host in LOOPBACK:
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def http_app(
    case_server: CaseMcpServer,
    tokens: dict[str, str],
    *,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    limits: Limits = LIMITS,
) -> Any:
    """The streamable-HTTP ASGI app at ``/mcp``, behind the bearer-token check and the guards."""
    security = transport_security(host, allowed_hosts, allowed_origins)
    inner = case_server.server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=security
    )
    # Outermost first: headers on every answer (429s included); the throttle counts the 401s
    # of every path (all are behind the token); a body is read only for a known token.
    signed_in = BearerTokens(BodyLimit(inner, limits.max_body_bytes), tokens)
    return SecurityHeaders(
        SignInThrottle(signed_in, limits.failed_sign_ins_per_minute, prefix="/"), csp=API_CSP
    )


def run_http(
    case_server: CaseMcpServer,
    tokens: dict[str, str],
    *,
    host: str,
    port: int,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    limits: Limits = LIMITS,
) -> None:
    import uvicorn

    app = http_app(case_server, tokens, host=host, allowed_hosts=allowed_hosts,
                   allowed_origins=allowed_origins, limits=limits)  # fmt: skip
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", **uvicorn_limits(limits))
    uvicorn.Server(config).run()
