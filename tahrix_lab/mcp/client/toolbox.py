"""Other MCP servers' tools inside the assistant.

``registry_with_mcp(base)`` returns ``base``'s tools plus the tools of every
server in the MCP servers file (``$TAHRIX_MCP_CONFIG``, see ``config``), each
a ``Tool`` named ``server__tool`` on the wire (``names``), with
``source="mcp:server.tool"`` recorded on its results, offered to the
configured purposes, filtered by the server's allow/deny lists, and marked
``writes`` unless the server (or its tool annotation) says read-only, so a
read-only grant refuses it like any other writing tool.

The engine's loop is synchronous; MCP sessions are asynchronous and long-lived
(a stdio server is a child process). A ``McpToolbox`` therefore runs one
event loop in a daemon thread holding every connection, and each tool's
``fn`` submits its call to that loop and waits, under the server's timeout.
A server that fails to start gives one calm message (logged once and kept in
``toolbox.problems``) and the others keep working; a call to a server that
went away is an error result, never an exception.

Imports only the engine (and the ``mcp`` SDK).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tahrix_lab import __version__
from tahrix_lab.agent.tools import Tool, ToolRegistry, error_result
from tahrix_lab.mcp.client.config import ServerConfig, config_path, load_config
from tahrix_lab.mcp.client.names import SEPARATOR, neutral_name, wire_name

log = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="tahrix-lab", version=__version__)


@dataclass
class _Connection:
    config: ServerConfig
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    lost: str | None = None  # why a server that had started went away


class McpToolbox:
    """The connections to the configured MCP servers and the ``Tool``s they offer."""

    def __init__(self, servers: Sequence[ServerConfig]) -> None:
        self.servers = list(servers)
        self.tools: list[Tool] = []
        self.problems: list[str] = []
        self._conns: dict[str, _Connection] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tahrix-mcp", daemon=True)
        self._thread.start()
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, taken: set[str] | None = None) -> McpToolbox:
        """Connect to every server at once and list their tools; failures become ``problems``."""
        taken = set(taken or ())
        pending = {cfg.name: self._submit(self._open(cfg)) for cfg in self.servers}
        for cfg in self.servers:
            future = pending[cfg.name]
            try:
                listed = future.result(timeout=cfg.startup_timeout)
            except concurrent.futures.TimeoutError:
                self._submit(self._abandon(cfg.name))
                self._problem(cfg, f"did not answer within {cfg.startup_timeout:g} s")
                continue
            except Exception as exc:
                self._problem(cfg, _reason(exc))
                continue
            for spec in listed:
                tool = self._tool(cfg, spec, taken)
                if tool is not None:
                    taken.add(tool.name)
                    self.tools.append(tool)
        return self

    def close(self) -> None:
        """Stop every connection (stdio servers exit) and the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(self._close_all()).result(timeout=10)
        except Exception:  # closing is best effort: the daemon thread dies with the process
            log.debug("closing MCP connections failed", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> McpToolbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _problem(self, cfg: ServerConfig, reason: str) -> None:
        message = (
            f"The MCP server {cfg.name!r} is not available ({reason}); its tools are left out "
            "and the other tools keep working."
        )
        self.problems.append(message)
        log.warning("%s", message)

    # -- inside the loop thread ----------------------------------------------------------------
    async def _open(self, cfg: ServerConfig) -> list[types.Tool]:
        conn = _Connection(cfg)
        self._conns[cfg.name] = conn
        ready: asyncio.Future[list[types.Tool]] = self._loop.create_future()
        conn.task = asyncio.ensure_future(self._hold(conn, ready))
        return await ready

    async def _hold(self, conn: _Connection, ready: asyncio.Future[list[types.Tool]]) -> None:
        """Own one connection for its whole life: the SDK's context must be entered and left in one task."""
        cfg = conn.config
        try:
            async with _client(cfg) as client:
                listed: list[types.Tool] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                conn.client = client
                ready.set_result(listed)
                await conn.closed.wait()
        except BaseException as exc:
            conn.client = None
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(str(exc)))
            else:
                conn.lost = _reason(exc)
                log.warning("The MCP server %r went away: %s", cfg.name, conn.lost)
            if not isinstance(exc, Exception):
                raise

    async def _abandon(self, name: str) -> None:
        conn = self._conns.get(name)
        if conn is not None and conn.task is not None:
            conn.task.cancel()

    async def _close_all(self) -> None:
        for conn in self._conns.values():
            conn.closed.set()
        tasks = [c.task for c in self._conns.values() if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=8)

    # -- tools ------------------------------------------------------------------------------
    def _tool(self, cfg: ServerConfig, spec: types.Tool, taken: set[str]) -> Tool | None:
        if not cfg.permits(spec.name):
            return None
        annotations = spec.annotations
        read_only = cfg.read_only or bool(annotations is not None and annotations.read_only_hint is True)
        name = wire_name(cfg.name, spec.name, taken)
        description = (spec.description or spec.title or spec.name).strip()
        try:
            tool = Tool(
                name=name,
                description=f"[from the MCP server {cfg.name!r}] {description}",
                parameters=dict(spec.input_schema),
                fn=self._caller(cfg.name, spec.name),
                purposes=frozenset(cfg.purposes),
                timeout=cfg.timeout + 5,  # the MCP request times out first and tells the server
                writes=not read_only,
                source=f"mcp:{neutral_name(cfg.name, spec.name)}",
            )
            ToolRegistry([tool])  # checks the schema now, so a bad one is one problem, not a crash later
        except Exception as exc:
            self._problem(cfg, f"its tool {spec.name!r} has an unusable input schema: {_reason(exc)}")
            return None
        return tool

    def _caller(self, server: str, tool: str) -> Any:
        def call(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            return self.call(server, tool, args)

        return call

    def call(self, server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool`` on ``server``; the result as a JSON object, errors as ``{"error": …}``."""
        conn = self._conns.get(server)
        if conn is None or conn.client is None:
            why = conn.lost if conn is not None and conn.lost else "it is not connected"
            return error_result("unavailable", f"The MCP server {server!r} is not available: {why}.")
        timeout = conn.config.timeout
        future = self._submit(conn.client.call_tool(tool, args, read_timeout_seconds=timeout))
        try:
            result = future.result(timeout=timeout + 2)
        except (concurrent.futures.TimeoutError, TimeoutError):
            future.cancel()
            return error_result(
                "timeout", f"The MCP tool {server}.{tool} did not answer within {timeout:g} s."
            )
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                return error_result(
                    "timeout", f"The MCP tool {server}.{tool} did not answer within {timeout:g} s."
                )
            return error_result(
                "mcp_error", f"The MCP server {server!r} refused the call: {exc}", code=exc.code
            )
        except Exception as exc:
            return error_result("unavailable", f"The MCP server {server!r} failed: {_reason(exc)}")
        return _as_result(server, tool, result)


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers; the HTTP client closes with the transport."""
    async with (
        create_mcp_http_client(headers=headers or None) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _client(cfg: ServerConfig) -> Client:
    if cfg.url is not None:
        transport = _http_transport(cfg.url, cfg.headers)
        return Client(transport, read_timeout_seconds=cfg.timeout, client_info=CLIENT_INFO, cache=None)
    params = StdioServerParameters(
        command=cfg.command or "", args=list(cfg.args), env=cfg.env or None, cwd=cfg.cwd
    )
    return Client(params, read_timeout_seconds=cfg.timeout, client_info=CLIENT_INFO, cache=None)


def _as_result(server: str, tool: str, result: types.CallToolResult) -> dict[str, Any]:
    """Structured content when the server gave it, else the text; ``isError`` as an error result."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    text = "\n".join(texts)
    if result.is_error:
        return error_result("tool_error", text or f"The MCP tool {server}.{tool} reported an error.")
    out: dict[str, Any]
    if isinstance(result.structured_content, dict):
        out = dict(result.structured_content)
    else:
        out = {"text": text}
    others = [b for b in result.content if not isinstance(b, types.TextContent)]
    if others:  # images, audio, resources: named, not inlined (the transcript holds JSON, not bytes)
        out.setdefault("other_content", [{"type": b.type} for b in others])
    return out


def _reason(exc: BaseException) -> str:
    """One line for a calm message; exception groups (anyio task groups) are unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


# -- composing a session's registry -----------------------------------------------------------

_SHARED: dict[str, McpToolbox] = {}
_SHARED_LOCK = threading.Lock()


def shared_toolbox(path: str | os.PathLike[str], taken: set[str] | None = None) -> McpToolbox:
    """One toolbox per servers file per process (started on first use, closed at exit)."""
    key = os.path.abspath(path)
    with _SHARED_LOCK:
        box = _SHARED.get(key)
        if box is None:
            box = McpToolbox(load_config(path)).start(taken)
            _SHARED[key] = box
            atexit.register(box.close)
        return box


class McpRegistry(ToolRegistry):
    """A registry with MCP servers' tools; ``toolbox`` holds the connections and their ``problems``."""

    def __init__(self, base: ToolRegistry, toolbox: McpToolbox) -> None:
        super().__init__(base)
        self.toolbox = toolbox
        for tool in toolbox.tools:
            if tool.name in self:  # a local tool keeps its name; the MCP one is left out, said once
                toolbox.problems.append(
                    f"The MCP tool {tool.source} clashes with the local tool {tool.name!r}."
                )
                continue
            self.add(tool)


def registry_with_mcp(
    base: ToolRegistry,
    config: str | os.PathLike[str] | McpToolbox | None = None,
) -> ToolRegistry:
    """``base`` plus the MCP servers' tools (``config``: a servers file, a toolbox, or ``$TAHRIX_MCP_CONFIG``).

    With no servers file configured this is ``base`` itself.
    """
    if isinstance(config, McpToolbox):
        return McpRegistry(base, config)
    path = config if config is not None else config_path()
    if path is None:
        return base
    return McpRegistry(base, shared_toolbox(path, {t.name for t in base}))


class WithMcpTools:
    """Wraps a job-service integration so its sessions are offered the MCP servers' tools too."""

    def __init__(self, inner: Any, config: str | os.PathLike[str]) -> None:
        self._inner = inner
        self._config = config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def registry(self) -> ToolRegistry:
        return registry_with_mcp(self._inner.registry(), self._config)


def with_mcp_tools(integration: Any, config: str | os.PathLike[str] | None = None) -> Any:
    """``integration`` with MCP tools in its registry, or unchanged when no servers file is configured."""
    path = config if config is not None else config_path()
    return integration if path is None else WithMcpTools(integration, path)


__all__ = ["SEPARATOR", "McpRegistry", "McpToolbox", "registry_with_mcp", "shared_toolbox", "with_mcp_tools"]
