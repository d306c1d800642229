"""MCP both ways (docs/mcp.md): ``tahrix mcp serve`` offers the case tools to MCP clients
(``server/``, domain level); ``registry_with_mcp`` brings other MCP servers' tools into the
assistant (``client/``, engine level).

Names load on first use, so ``tahrix`` commands that do not speak MCP never import the SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CaseMcpServer": "server",
    "McpRegistry": "client",
    "McpToolbox": "client",
    "registry_with_mcp": "client",
    "with_mcp_tools": "client",
    "ServerConfig": "client",
    "load_config": "client",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'tahrix_lab.mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tahrix_lab.mcp.{_WHERE[name]}"), name)
