"""Our MCP server (``tahrix mcp serve``) driven by the official SDK's client over stdio, as a real process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace
from tests.mcp.conftest import serve_args


def _stdio(db: Path, *extra: str) -> StdioServerParameters:
    args = serve_args(db, *extra)
    return StdioServerParameters(command=args[0], args=args[1:])


def _with_client(db: Path, body: Any, *extra: str) -> Any:
    async def main() -> Any:
        async with Client(_stdio(db, *extra)) as client:
            return await body(client)

    return anyio.run(main)


def _mcp_sessions(db: Path) -> list[dict[str, Any]]:
    with Workspace(db) as ws:
        sessions = [s for s in ws.store.list_sessions() if s.purpose == "mcp"]
        out = []
        for s in sessions:
            messages = ws.store.load_messages(s.id)
            out.append({"session": s, "messages": messages, "grant": ws.grant(s.id), "case": ws.case_of(s.id),
                        "audit": ws.audit_log("CASE-001")})  # fmt: skip
        return out


def test_lists_the_case_tools_with_their_schemas_and_read_only_hints(case_db: Path) -> None:
    async def body(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _with_client(case_db, body)}
    expected = [t.name for t in CASE_TOOLS.tools_for("investigation")]
    assert sorted(tools) == sorted(expected)
    assert tools["lookup_address"].input_schema == CASE_TOOLS.get("lookup_address").parameters
    assert tools["lookup_address"].annotations.read_only_hint is True
    assert tools["annotate"].annotations.read_only_hint is False
    assert tools["run_detectors"].annotations.read_only_hint is False
    assert all(t.output_schema == {"type": "object"} for t in tools.values())


def test_a_call_returns_structured_content_and_the_same_json_as_text_and_is_recorded(case_db: Path) -> None:
    async def body(client: Client) -> Any:
        overview = await client.call_tool("get_case_overview", {})
        address = overview.structured_content["addresses_with_roles"][0]["address"]
        looked = await client.call_tool("lookup_address", {"address": address})
        return address, looked

    address, looked = _with_client(case_db, body)
    assert looked.is_error is False
    assert json.loads(looked.content[0].text) == looked.structured_content
    assert looked.structured_content["matches"][0]["address"] == address

    [rec] = _mcp_sessions(case_db)
    assert rec["session"].user == "ana" and rec["case"] == "CASE-001"
    assert rec["grant"].may_write is False
    roles = [m.role for m in rec["messages"]]
    assert roles == ["assistant", "tool", "assistant", "tool"]
    use = rec["messages"][2]
    assert use.backend == "mcp" and use.stop_reason == "tool_use"
    assert use.usage is not None and use.usage.input_tokens is None  # unknown, never 0
    assert use.parts[0].tool_name == "lookup_address" and use.parts[0].tool_input == {"address": address}
    result = rec["messages"][3].parts[0]
    assert result.tool_use_id == use.parts[0].tool_use_id
    assert result.tool_result == looked.structured_content


def test_read_only_by_default_refuses_writes_with_a_structured_error(case_db: Path) -> None:
    note = {"target_kind": "address", "target": "0x1111111111111111111111111111111111111111", "chain": "ethereum",
            "action": "note", "payload": {"text": "seen on a forum"}}  # fmt: skip

    async def body(client: Client) -> Any:
        return await client.call_tool("annotate", note), await client.call_tool(
            "lookup_address", {"adress": "0x1"}
        )

    denied, invalid = _with_client(case_db, body)
    assert denied.is_error is True
    assert denied.structured_content["error"]["type"] == "denied"
    assert "read-only" in denied.structured_content["error"]["message"]
    assert invalid.is_error is True
    assert invalid.structured_content["error"]["type"] == "invalid_arguments"
    assert "adress" in invalid.structured_content["error"]["message"]
    [rec] = _mcp_sessions(case_db)
    assert [m.parts[0].tool_status for m in rec["messages"] if m.role == "tool"] == ["error", "error"]
    assert rec["audit"] == []


def test_allow_writes_lets_annotate_write_and_the_audit_names_the_mcp_session(case_db: Path) -> None:
    async def body(client: Client) -> Any:
        overview = await client.call_tool("get_case_overview", {})
        row = overview.structured_content["addresses_with_roles"][0]
        note = {"target_kind": "address", "target": row["address"], "chain": row["chain"], "action": "note",
                "payload": {"text": "checked over MCP"}}  # fmt: skip
        return await client.call_tool("annotate", note)

    result = _with_client(case_db, body, "--allow-writes")
    assert result.is_error is False, result.structured_content
    [rec] = _mcp_sessions(case_db)
    assert rec["grant"].may_write is True
    assert len(rec["audit"]) == 1
    assert rec["audit"][0]["actor"] == f"agent:{rec['session'].id}"


def test_large_results_come_sized_with_a_cursor_and_the_transcript_keeps_each_page(case_db: Path) -> None:
    query = {"query": "SELECT * FROM transfers ORDER BY transfer_id", "limit": 1000}

    async def body(client: Client) -> Any:
        first = await client.call_tool("run_sql", query)
        cursor = first.structured_content["page"]["next_cursor"]
        second = await client.call_tool("run_sql", {**query, "cursor": cursor})
        return first, second

    first, second = _with_client(case_db, body)
    one, two = first.structured_content, second.structured_content
    assert len(json.dumps(one)) < 10_000  # sized to the tool's budget (about 8 KB), not cut at 32 KB
    assert one["page"]["shown"]["rows"]["of"] == 1000
    assert two["page"]["shown"]["rows"]["from"] == one["page"]["shown"]["rows"]["to"]
    assert one["rows"] and two["rows"]
    assert {json.dumps(r) for r in one["rows"]}.isdisjoint({json.dumps(r) for r in two["rows"]})
    [rec] = _mcp_sessions(case_db)
    stored = [m.parts[0].tool_result for m in rec["messages"] if m.role == "tool"]
    assert stored == [one, two]


def test_the_case_overview_and_the_flags_are_resources(case_db: Path) -> None:
    async def body(client: Client) -> Any:
        listed = (await client.list_resources()).resources
        read = {
            str(r.uri): json.loads((await client.read_resource(str(r.uri))).contents[0].text) for r in listed
        }
        return listed, read

    listed, read = _with_client(case_db, body)
    assert [str(r.uri) for r in listed] == ["tahrix://case/CASE-001/overview", "tahrix://case/CASE-001/flags"]
    assert all(r.mime_type == "application/json" for r in listed)
    assert read["tahrix://case/CASE-001/overview"]["case"]["case_id"] == "CASE-001"
    flags = read["tahrix://case/CASE-001/flags"]
    assert flags["count"] > 0 and flags["total"] >= flags["count"]
    assert all(f["case_id"] == "CASE-001" for f in flags["flags"])
    assert _mcp_sessions(case_db) == []  # reading a resource is not a tool call


def test_an_unknown_case_is_one_calm_line(case_db: Path) -> None:
    args = serve_args(case_db)
    args[args.index("CASE-001")] = "CASE-404"
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert "No case named 'CASE-404'" in done.stderr and "CASE-001" in done.stderr
    assert "Traceback" not in done.stderr
