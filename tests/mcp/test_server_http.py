"""``tahrix mcp serve --http``: streamable HTTP behind bearer tokens, driven by the official SDK's client."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tahrix_lab.case.workspace import Workspace
from tests.mcp.conftest import ALICE, BOB, HttpServer, stop


@asynccontextmanager
async def _transport(url: str, token: str) -> Any:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _call(url: str, token: str, name: str, args: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with Client(_transport(url, token)) as client:
            tools = await client.list_tools()
            return [t.name for t in tools.tools], await client.call_tool(name, args)

    return anyio.run(main)


def test_http_without_a_valid_token_is_401(http_server: HttpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(http_server.url, json=body, headers=headers)
    wrong = httpx.post(http_server.url, json=body, headers={**headers, "Authorization": "Bearer not-a-token"})
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "bearer token" in missing.json()["error"]


def test_http_calls_are_recorded_per_token_user(http_server: HttpServer, case_db: Path) -> None:
    names, first = _call(http_server.url, ALICE, "list_flags", {"min_severity": "high", "limit": 3})
    assert "lookup_address" in names
    assert first.is_error is False and first.structured_content["count"] <= 3
    _, second = _call(
        http_server.url, BOB, "annotate", {"target_kind": "flag", "target": "FLG-x", "action": "note"}
    )
    assert second.is_error is True and second.structured_content["error"]["type"] == "denied"
    stop(http_server.proc)

    with Workspace(case_db) as ws:
        sessions = {s.user: s for s in ws.store.list_sessions() if s.purpose == "mcp"}
        assert set(sessions) == {"alice", "bob"}
        alice = ws.store.load_messages(sessions["alice"].id)
        assert [p.tool_name for m in alice for p in m.parts] == ["list_flags", "list_flags"]
        assert alice[1].parts[0].tool_result == first.structured_content
        bob = ws.store.load_messages(sessions["bob"].id)
        assert bob[1].parts[0].tool_status == "error"
