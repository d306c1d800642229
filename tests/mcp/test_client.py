"""Other MCP servers' tools in the assistant: our registry against a real MCP server the tests start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore, ask
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.tools import run_tool
from tahrix_lab.agent.transcript import Part
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.mcp.client import McpRegistry, McpToolbox, registry_with_mcp, with_mcp_tools
from tahrix_lab.mcp.client.config import ServerConfig, parse_config
from tahrix_lab.mcp.client.names import WIRE_NAME
from tests.mcp.conftest import EXPLORER, free_port, stop, wait_for_port


def explorer(**extra: Any) -> ServerConfig:
    [cfg] = parse_config(
        {"mcpServers": {"explorer": {"command": sys.executable, "args": [str(EXPLORER)], **extra}}}
    )
    return cfg


@pytest.fixture(scope="module")
def toolbox() -> Iterator[McpToolbox]:
    cfg = explorer(deny=["admin_*"], timeout=2)
    ghost = ServerConfig(name="ghost", command="/nonexistent/bin/mcp-server")
    box = McpToolbox([ghost, cfg]).start()
    yield box
    box.close()


def _run(registry: ToolRegistry, name: str, args: dict[str, Any]) -> Any:
    return run_tool(Part.of_tool_use("call-1", name, args), registry=registry)


def test_tools_are_namespaced_wire_safe_and_keep_their_source(toolbox: McpToolbox) -> None:
    tools = {t.source: t for t in toolbox.tools}
    assert set(tools) == {
        "mcp:explorer.get_balance",
        "mcp:explorer.tx.lookup",
        "mcp:explorer.broken",
        "mcp:explorer.slow",
        "mcp:explorer.file_report",
    }  # fmt: skip  (admin_reset denied)
    assert tools["mcp:explorer.get_balance"].name == "explorer__get_balance"
    dotted = tools["mcp:explorer.tx.lookup"].name
    assert dotted.startswith("explorer__tx_lookup_") and WIRE_NAME.match(dotted)
    assert all(WIRE_NAME.match(t.name) for t in toolbox.tools)
    assert tools["mcp:explorer.get_balance"].writes is False  # readOnlyHint
    assert tools["mcp:explorer.file_report"].writes is True  # no hint: treated as writing
    assert tools["mcp:explorer.get_balance"].purposes == {"investigation", "chat"}
    assert "[from the MCP server 'explorer']" in tools["mcp:explorer.get_balance"].description


def test_a_server_that_fails_to_start_gives_one_calm_message_and_the_rest_work(toolbox: McpToolbox) -> None:
    assert len(toolbox.problems) == 1
    [problem] = toolbox.problems
    assert "'ghost' is not available" in problem and "/nonexistent/bin/mcp-server" in problem
    assert "other tools keep working" in problem
    out = _run(McpRegistry(ToolRegistry(), toolbox), "explorer__get_balance", {"address": "0xabc"})
    assert out.status == "ok"


def test_calls_return_structured_results_and_errors_never_raise(toolbox: McpToolbox) -> None:
    reg = McpRegistry(ToolRegistry(), toolbox)
    ok = _run(reg, "explorer__get_balance", {"address": "0xabc", "chain": "base"})
    assert ok.result == {"address": "0xabc", "chain": "base", "balance_wei": "1500000000000000000"}
    assert ok.source == "mcp:explorer.get_balance"
    assert ok.to_part().tool_source == "mcp:explorer.get_balance"
    failed = _run(reg, "explorer__broken", {"reason": "explorer API down"})
    assert failed.status == "error"
    assert failed.result["error"]["type"] == "tool_error"
    assert "explorer API down" in failed.result["error"]["message"]
    invalid = _run(reg, "explorer__get_balance", {"address": 7})
    assert invalid.status == "error" and invalid.result["error"]["type"] == "invalid_arguments"
    slow = _run(reg, "explorer__slow", {"seconds": 6})
    assert slow.status == "error" and slow.result["error"]["type"] == "timeout"
    assert "within 2 s" in slow.result["error"]["message"]
    after = _run(reg, "explorer__get_balance", {"address": "0xdef"})
    assert after.status == "ok"  # the connection survives a timed-out call


def test_the_loop_offers_them_and_the_transcript_records_the_server(toolbox: McpToolbox) -> None:
    store = TranscriptStore(":memory:")
    session = store.create_session(user="ana")
    backend = FakeBackend([[tool_call("explorer__get_balance", {"address": "0xabc"})], [text("1.5 ETH.")]])
    events = list(ask(store, session, "Balance of 0xabc?", backend=backend, model="scripted",
                      registry=registry_with_mcp(ToolRegistry(), toolbox)))  # fmt: skip
    assert events[-1][0] == "done"
    messages = store.load_messages(session.id)
    assert "explorer__get_balance" in (messages[1].tools_offered or [])
    [result] = [p for m in messages for p in m.parts if p.type == "tool_result"]
    assert result.tool_source == "mcp:explorer.get_balance"
    assert result.tool_result["balance_wei"] == "1500000000000000000"
    stored = store.cursor().execute("SELECT parts FROM messages WHERE role = 'tool'").fetchone()[0]
    assert json.loads(stored)[0]["tool_source"] == "mcp:explorer.get_balance"


def test_the_case_grant_applies_to_mcp_tools(toolbox: McpToolbox, case_db: Path) -> None:
    with Workspace(case_db) as ws:
        session = ws.start_investigation("CASE-001", user="ana", grant={"may_write": False})
        backend = FakeBackend([
            [tool_call("explorer__file_report", {"address": "0xabc"}), tool_call("explorer__get_balance", {"address": "0xabc"})],
            [text("Done.")],
        ])  # fmt: skip
        list(ws.ask(session, "File a report", backend=backend, model="scripted",
                    registry=registry_with_mcp(ws.registry(), toolbox)))  # fmt: skip
        results = {
            p.tool_name: p
            for m in ws.store.load_messages(session.id)
            for p in m.parts
            if p.type == "tool_result"
        }
    assert results["explorer__file_report"].tool_result["error"]["type"] == "denied"
    assert results["explorer__get_balance"].tool_status == "ok"


def test_allow_lists_read_only_servers_and_purposes() -> None:
    with McpToolbox(
        [explorer(allow=["get_*", "file_report"], readOnly=True, purposes=["chat"])]
    ).start() as box:
        assert sorted(t.name for t in box.tools) == ["explorer__file_report", "explorer__get_balance"]
        assert all(t.writes is False for t in box.tools)
        reg = registry_with_mcp(ToolRegistry(), box)
        assert [s["name"] for s in reg.catalog_for("investigation")] == []
        assert sorted(s["name"] for s in reg.catalog_for("chat")) == [
            "explorer__file_report",
            "explorer__get_balance",
        ]


def test_streamable_http_servers_with_headers(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "explorer.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, str(EXPLORER), "--http", str(port), "--token", "s3cret-token"],
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    try:
        wait_for_port(port, proc, log)
        url = f"http://127.0.0.1:{port}/mcp"
        good = {"url": url, "headers": {"Authorization": "Bearer s3cret-token"}, "allow": ["get_balance"]}
        bad = {"url": url, "headers": {"Authorization": "Bearer wrong"}, "startupTimeout": 10}
        servers = parse_config({"mcpServers": {"remote": good, "locked": bad}})
        with McpToolbox(servers).start() as box:
            assert [t.name for t in box.tools] == ["remote__get_balance"]
            assert len(box.problems) == 1 and "'locked' is not available" in box.problems[0]
            out = _run(McpRegistry(ToolRegistry(), box), "remote__get_balance", {"address": "0x1"})
            assert out.status == "ok" and out.result["address"] == "0x1"
    finally:
        stop(proc)


def test_a_server_that_goes_away_gives_error_results(tmp_path: Path) -> None:
    tag = f"doomed-{uuid.uuid4().hex}"  # tells this server process apart from the others
    [cfg] = parse_config(
        {"mcpServers": {"explorer": {"command": sys.executable, "args": [str(EXPLORER), tag]}}}
    )
    with McpToolbox([cfg]).start() as box:
        reg = McpRegistry(ToolRegistry(), box)
        assert _run(reg, "explorer__get_balance", {"address": "0x1"}).status == "ok"
        children = subprocess.run(["pgrep", "-f", tag, "-P", str(os.getpid())],
                                  capture_output=True, text=True).stdout.split()  # fmt: skip
        assert children, "the stdio server should be our child process"
        for pid in children:
            subprocess.run(["kill", pid], check=True)
        gone = _run(reg, "explorer__get_balance", {"address": "0x1"})
    assert gone.status == "error" and gone.result["error"]["type"] in {"unavailable", "mcp_error"}


def test_without_a_servers_file_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAHRIX_MCP_CONFIG", raising=False)
    base = ToolRegistry()
    assert registry_with_mcp(base) is base
    sentinel = object()
    assert with_mcp_tools(sentinel) is sentinel


def test_the_job_service_integration_and_tahrix_mcp_tools_read_the_servers_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"explorer": {"command": sys.executable, "args": [str(EXPLORER)],
                                                              "allow": ["get_balance"]}}}))  # fmt: skip
    monkeypatch.setenv("TAHRIX_MCP_CONFIG", str(config))

    class Integration:
        purpose = "investigation"

        def registry(self) -> ToolRegistry:
            return ToolRegistry()

    wrapped = with_mcp_tools(Integration())
    assert wrapped.purpose == "investigation"
    assert [t.name for t in wrapped.registry()] == ["explorer__get_balance"]
    assert wrapped.registry().toolbox is wrapped.registry().toolbox  # one set of connections per file

    from tahrix_lab.cli import main

    assert main(["mcp", "tools"]) == 0
    assert "explorer__get_balance" in capsys.readouterr().out
