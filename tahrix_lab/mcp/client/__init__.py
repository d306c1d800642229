"""Other MCP servers' tools in the assistant (engine level: imports only ``tahrix_lab.agent``).

``config`` reads ``$TAHRIX_MCP_CONFIG``; ``names`` maps MCP tool names to the neutral ones;
``toolbox`` connects, lists and calls. Names load on first use: importing ``config`` (to ask
whether any server is configured) must not import the MCP SDK, which takes seconds."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "SEPARATOR": "names",
    "McpRegistry": "toolbox",
    "McpToolbox": "toolbox",
    "ServerConfig": "config",
    "load_config": "config",
    "registry_with_mcp": "toolbox",
    "shared_toolbox": "toolbox",
    "with_mcp_tools": "toolbox",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'tahrix_lab.mcp.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tahrix_lab.mcp.client.{_WHERE[name]}"), name)
