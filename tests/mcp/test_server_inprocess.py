"""``CaseMcpServer`` in-process through the SDK's client: list wrapping, a registry of one's own, parallel calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from tahrix_lab.agent.tools import Tool, ToolRegistry
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.mcp.server import CaseMcpServer


def _listing(args: dict[str, Any], ctx: Any) -> list[dict[str, Any]]:
    return [{"case": ctx.case_id, "n": i} for i in range(int(args["n"]))]


LISTING = Tool(
    name="list_numbers",
    description="Numbers, as a JSON list.",
    parameters={"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
    fn=_listing,
    purposes=frozenset({"investigation"}),
)


def test_list_results_come_wrapped_as_objects_and_parallel_calls_stay_paired(case_db: Path) -> None:
    with Workspace(case_db) as ws:
        server = CaseMcpServer(ws, "CASE-001", user="ana", registry=ToolRegistry([*CASE_TOOLS, LISTING]))
        results: dict[int, Any] = {}

        async def main() -> None:
            async with Client(server.server, cache=None) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert "list_numbers" in names and "lookup_address" in names

                async def one(i: int) -> None:
                    results[i] = await client.call_tool("list_numbers", {"n": i})

                async with anyio.create_task_group() as tg:
                    for i in range(8):
                        tg.start_soon(one, i)

        anyio.run(main)
        assert results[3].structured_content == {"items": [{"case": "CASE-001", "n": n} for n in range(3)]}
        assert results[0].structured_content == {"items": []}
        [session] = [s for s in ws.store.list_sessions() if s.purpose == "mcp"]
        messages = ws.store.load_messages(session.id)
    assert [m.role for m in messages] == ["assistant", "tool"] * 8
    for use, result in zip(messages[::2], messages[1::2], strict=True):
        assert use.parts[0].tool_use_id == result.parts[0].tool_use_id
        assert len(result.parts[0].tool_result["items"]) == use.parts[0].tool_input["n"]
