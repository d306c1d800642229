"""A small real MCP server for the tests, written with the official SDK's ``MCPServer``.

``python explorer_server.py`` serves stdio; ``python explorer_server.py --http PORT
--token T`` serves streamable HTTP and wants ``Authorization: Bearer T``.
"""

from __future__ import annotations

import sys
import time

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("explorer")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def get_balance(address: str, chain: str = "ethereum") -> dict[str, object]:
    """The native balance of an address."""
    return {"address": address, "chain": chain, "balance_wei": "1500000000000000000"}


@server.tool(name="tx.lookup", annotations=ToolAnnotations(read_only_hint=True))
def tx_lookup(tx_hash: str) -> str:
    """Look a transaction up (a dotted tool name, returning plain text)."""
    return f"tx {tx_hash}: 2 transfers"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def broken(reason: str = "upstream down") -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    time.sleep(seconds)
    return "done"


@server.tool()
def file_report(address: str) -> str:
    """Files a report upstream (a tool without a read-only hint: it writes)."""
    return f"report filed for {address}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def admin_reset() -> str:
    """A tool the tests' allow/deny lists leave out."""
    return "reset"


if __name__ == "__main__":
    if "--http" in sys.argv:
        import uvicorn
        from starlette.responses import JSONResponse

        port = int(sys.argv[sys.argv.index("--http") + 1])
        token = sys.argv[sys.argv.index("--token") + 1]
        inner = server.streamable_http_app()

        async def app(scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    else:
        server.run()
