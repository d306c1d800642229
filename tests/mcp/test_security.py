"""Security of ``tahrix mcp serve`` as a real process on loopback, driven by the SDK's client."""

from __future__ import annotations

import json
from pathlib import Path

from tahrix_lab.agent.bounds import json_size
from tahrix_lab.agent.tools import DEFAULT_MAX_RESULT_BYTES
from tahrix_lab.case.workspace import Workspace
from tests.mcp.conftest import HttpServer, stop
from tests.mcp.test_server_http import ALICE, _call

MARKER = "…[truncated: 100,000,000 characters]"


def test_a_huge_cell_is_bounded_before_the_transcript_keeps_it(
    http_server: HttpServer, case_db: Path
) -> None:
    _, out = _call(http_server.url, ALICE, "run_sql", {"query": "SELECT repeat('a', 100000000) AS big"})
    assert out.is_error is False and MARKER in json.dumps(out.structured_content, ensure_ascii=False)
    stop(http_server.proc)
    with Workspace(case_db) as ws:
        session = next(s for s in ws.store.list_sessions() if s.purpose == "mcp" and s.user == "alice")
        results = [
            p.tool_result
            for m in ws.store.load_messages(session.id)
            for p in m.parts
            if p.type == "tool_result"
        ]
        assert results == [out.structured_content]  # the record holds exactly what the caller was sent
        assert json_size(results[0]) <= DEFAULT_MAX_RESULT_BYTES
        parts = [p for m in ws.store.load_messages(session.id) for p in m.parts]
        stored = sum(
            len(json.dumps([p.tool_input, p.tool_result, p.text], ensure_ascii=False)) for p in parts
        )
        assert stored <= DEFAULT_MAX_RESULT_BYTES + 1000  # the call and its bounded result, nothing more
