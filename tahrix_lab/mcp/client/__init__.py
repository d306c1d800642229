"""Other MCP servers' tools in the assistant (engine level: imports only ``tahrix_lab.agent``).

``config`` reads ``$TAHRIX_MCP_CONFIG``; ``names`` maps MCP tool names to the neutral ones;
``toolbox`` connects, lists and calls."""

from __future__ import annotations

from tahrix_lab.mcp.client.config import ServerConfig, load_config
from tahrix_lab.mcp.client.toolbox import (
    SEPARATOR,
    McpRegistry,
    McpToolbox,
    registry_with_mcp,
    shared_toolbox,
    with_mcp_tools,
)

__all__ = [
    "SEPARATOR",
    "McpRegistry",
    "McpToolbox",
    "ServerConfig",
    "load_config",
    "registry_with_mcp",
    "shared_toolbox",
    "with_mcp_tools",
]
