"""MCP both ways (docs/mcp.md)."""
