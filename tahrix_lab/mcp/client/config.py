"""The MCP servers file: the ``{"mcpServers": {...}}`` shape MCP clients already use.

::

    {"mcpServers": {
        "explorer": {"command": "uvx", "args": ["explorer-mcp"], "env": {"API_KEY": "…"}},
        "kyc":      {"url": "https://kyc.internal/mcp", "headers": {"Authorization": "Bearer …"},
                     "allow": ["lookup_*"], "deny": ["delete_*"], "readOnly": true,
                     "purposes": ["investigation"], "timeout": 20}
    }}

``command``/``args``/``env``/``cwd`` start a stdio server; ``url``/``headers``
reach a streamable-HTTP one (as in Claude Desktop, Cursor and VS Code).
Tahrix Lab adds optional keys: ``allow`` / ``deny`` (tool-name globs; deny
wins), ``purposes`` (the kinds of session offered these tools), ``timeout``
(seconds per call), ``startupTimeout`` (seconds to connect and list tools),
``readOnly`` (trust every tool of this server as read-only), ``disabled``.
``${env:NAME}`` in ``args``, ``env``, ``url`` and ``headers`` is replaced by
that environment variable (as in VS Code and Cursor), so secrets stay out of the file.

The file is named by ``TAHRIX_MCP_CONFIG``. Imports only the engine.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from tahrix_lab.agent.errors import ConfigurationError

CONFIG_ENV = "TAHRIX_MCP_CONFIG"
DEFAULT_PURPOSES = ("investigation", "chat")
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_STARTUP_TIMEOUT_S = 15.0
# A server name becomes the prefix of wire tool names, so it must be wire-safe
# itself and must not contain the separator "__".
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
_KNOWN = {
    "command", "args", "env", "cwd", "url", "headers", "type", "transport", "allow", "deny",
    "purposes", "timeout", "startupTimeout", "readOnly", "disabled",
}  # fmt: skip


@dataclass(frozen=True)
class ServerConfig:
    """One entry of ``mcpServers``: a stdio ``command`` or an HTTP ``url``."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    purposes: tuple[str, ...] = DEFAULT_PURPOSES
    timeout: float = DEFAULT_TIMEOUT_S
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S
    read_only: bool = False

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def permits(self, tool_name: str) -> bool:
        """The per-server grant: ``deny`` globs win over ``allow`` globs (``allow`` absent = all)."""
        if any(fnmatchcase(tool_name, pattern) for pattern in self.deny):
            return False
        return self.allow is None or any(fnmatchcase(tool_name, pattern) for pattern in self.allow)


def config_path() -> str | None:
    return os.environ.get(CONFIG_ENV) or None


def load_config(path: str | os.PathLike[str]) -> list[ServerConfig]:
    """Read an MCP servers file; every problem names the file and the key (or line and column)."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"Could not read the MCP servers file {where!r}: {exc.strerror}.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"The MCP servers file {where!r} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None
    return parse_config(data, where)


def parse_config(data: Any, where: str = "<config>") -> list[ServerConfig]:
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigurationError(
            f'{where}: expected a JSON object like {{"mcpServers": {{"name": {{...}}}}}}.'
        )
    out = []
    for name, entry in servers.items():
        cfg = _server(name, entry, f"{where}: mcpServers.{name}")
        if cfg is not None:
            out.append(cfg)
    return out


def _server(name: str, entry: Any, where: str) -> ServerConfig | None:
    if not SERVER_NAME.match(name) or len(name) > 32:
        raise ConfigurationError(
            f"{where}: a server name has 1-32 letters, digits, '-' or single '_' (it prefixes tool names)."
        )
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: expected an object with 'command' or 'url'.")
    unknown = sorted(set(entry) - _KNOWN)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KNOWN))}).")
    if entry.get("disabled") is True:
        return None
    command, url = entry.get("command"), entry.get("url")
    if isinstance(url, str):
        url = expand(url, f"{where}.url")
    if (command is None) == (url is None):
        raise ConfigurationError(
            f"{where}: give exactly one of 'command' (stdio) or 'url' (streamable HTTP)."
        )
    if command is not None and not (isinstance(command, str) and command):
        raise ConfigurationError(f"{where}.command: expected a non-empty string.")
    if url is not None and not (isinstance(url, str) and re.match(r"^https?://", url)):
        raise ConfigurationError(f"{where}.url: expected an http:// or https:// URL.")
    allow = entry.get("allow")
    return ServerConfig(
        name=name,
        command=command,
        args=tuple(_strings(entry.get("args", []), f"{where}.args", env=True)),
        env=_mapping(entry.get("env", {}), f"{where}.env"),
        cwd=_optional_str(entry.get("cwd"), f"{where}.cwd"),
        url=url,
        headers=_mapping(entry.get("headers", {}), f"{where}.headers"),
        allow=tuple(_strings(allow, f"{where}.allow")) if allow is not None else None,
        deny=tuple(_strings(entry.get("deny", []), f"{where}.deny")),
        purposes=tuple(_strings(entry.get("purposes", list(DEFAULT_PURPOSES)), f"{where}.purposes")),
        timeout=_seconds(entry.get("timeout", DEFAULT_TIMEOUT_S), f"{where}.timeout"),
        startup_timeout=_seconds(
            entry.get("startupTimeout", DEFAULT_STARTUP_TIMEOUT_S), f"{where}.startupTimeout"
        ),
        read_only=_bool(entry.get("readOnly", False), f"{where}.readOnly"),
    )


_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, where: str) -> str:
    """``${env:NAME}`` → the variable's value; an unset one names the key and the variable."""

    def sub(m: re.Match[str]) -> str:
        found = os.environ.get(m.group(1))
        if found is None:
            raise ConfigurationError(f"{where}: the environment variable {m.group(1)} is not set.")
        return found

    return _ENV_REF.sub(sub, value)


def _strings(value: Any, where: str, *, env: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"{where}: expected a list of strings.")
    return [expand(v, where) for v in value] if env else list(value)


def _mapping(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigurationError(f"{where}: expected an object of strings.")
    return {k: expand(v, f"{where}.{k}") for k, v in value.items()}


def _optional_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{where}: expected a string.")
    return value


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise ConfigurationError(f"{where}: expected a number of seconds between 0 and 3600.")
    return float(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{where}: expected true or false.")
    return value
