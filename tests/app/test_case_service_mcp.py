"""`tahrix serve`'s case integration offers the MCP servers' tools of ``$TAHRIX_MCP_CONFIG`` beside the
case tools, against a real MCP server the tests start; without the file it is the case tools alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.app.case_service import case_integration
from tahrix_lab.case.tools import CASE_TOOLS
from tests.mcp.conftest import EXPLORER


def test_the_service_sessions_get_the_servers_tools_and_the_case_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"explorer": {"command": sys.executable, "args": [str(EXPLORER)],
                                                              "allow": ["get_balance"]}}}))  # fmt: skip
    store = TranscriptStore(str(tmp_path / "t.duckdb"))
    try:
        monkeypatch.delenv("TAHRIX_MCP_CONFIG", raising=False)
        assert case_integration(store).registry() is CASE_TOOLS
        monkeypatch.setenv("TAHRIX_MCP_CONFIG", str(config))
        names = [t.name for t in case_integration(store).registry()]
    finally:
        store.close()
    assert names == [*(t.name for t in CASE_TOOLS), "explorer__get_balance"]
