"""``tahrix mcp serve --http`` with per-case access: the token's user must be granted the case.

A real server process on loopback, driven by the official SDK's client. The sample case is closed
(``TAHRIX_OPEN_CASES=``), alice is granted it, bob is not, carol only views it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tahrix_lab.case.workspace import Workspace
from tests.mcp.conftest import ALICE, BOB, HttpServer, stop
from tests.mcp.test_server_http import _transport

CAROL = "token-of-carol-0123456789abcdefghijk"
URI = "tahrix://case/CASE-001/overview"


@pytest.fixture
def server(case_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpServer]:
    monkeypatch.setenv("TAHRIX_OPEN_CASES", "")  # the server process inherits it: no case is open
    with Workspace(case_db) as ws:
        ws.grant_case("CASE-001", "alice", "investigator", by="admin")
        ws.grant_case("CASE-001", "carol", "viewer", by="admin")
    srv = HttpServer(case_db, tmp_path, {ALICE: "alice", BOB: "bob", CAROL: "carol"}, "--allow-writes")
    yield srv
    stop(srv.proc)


def _session(url: str, token: str, uri: str = URI) -> dict[str, Any]:
    """What one user sees: a read, a write, the resources and reading ``uri``."""

    async def main() -> dict[str, Any]:
        async with Client(_transport(url, token)) as client:
            read = await client.call_tool("list_flags", {"min_severity": "high", "limit": 3})
            write = await client.call_tool(
                "annotate", {"target_kind": "flag", "target": "FLG-x", "action": "note", "note": "n"}
            )
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            try:
                text: Any = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
            except Exception as exc:  # the SDK raises the server's error
                text = exc
            return {"read": read, "write": write, "resources": listed, "resource": text}

    return anyio.run(main)


def test_only_granted_users_reach_the_case(server: HttpServer, case_db: Path) -> None:
    alice = _session(server.url, ALICE)
    assert alice["read"].is_error is False and alice["read"].structured_content["count"] <= 3
    assert URI in alice["resources"] and "CASE-001" in alice["resource"]

    bob = _session(server.url, BOB)
    missing = {"error": {"type": "not_found", "message": "No case named 'CASE-001'."}}
    assert bob["read"].is_error is True and bob["read"].structured_content == missing
    assert bob["write"].structured_content == missing  # a write answers the same
    assert bob["resources"] == []
    unknown = _session(server.url, ALICE, "tahrix://case/CASE-001/nothing")["resource"]
    assert isinstance(bob["resource"], Exception) and isinstance(unknown, Exception)
    assert repr(bob["resource"]) == repr(unknown)  # the case's resource reads as one that is not there

    carol = _session(server.url, CAROL)  # a viewer reads, and may not write
    assert carol["read"].is_error is False
    assert carol["write"].is_error is True
    assert carol["write"].structured_content["error"]["type"] == "denied"
    assert "view" in carol["write"].structured_content["error"]["message"]
    stop(server.proc)

    with Workspace(case_db) as ws:
        users = {s.user for s in ws.store.list_sessions() if s.purpose == "mcp"}
    assert "bob" not in users and "alice" in users  # bob's refused calls left no session on the case
