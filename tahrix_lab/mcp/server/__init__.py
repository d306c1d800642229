"""The case tools offered to MCP clients (domain level: imports ``agent`` and ``case``).

``case_server`` is the MCP server over a ``Workspace``; ``serving`` runs it on stdio or on
streamable HTTP behind bearer tokens."""

from __future__ import annotations

from tahrix_lab.mcp.server.case_server import BACKEND, PURPOSE, USER_KEY, CaseMcpServer

__all__ = ["BACKEND", "PURPOSE", "USER_KEY", "CaseMcpServer"]
