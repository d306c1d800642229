"""A client nobody here wrote: the MCP Inspector's CLI mode lists and calls our tools (stdio and HTTP).

The Inspector comes from the npm registry at test time, installed once into
``.cache/mcp-inspector`` (ignored by git). 1.0.3 is the newest release that
runs on the Node 20 of the build machine (2.x wants Node ≥ 22.19).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import HttpServer, serve_args

INSPECTOR = "@modelcontextprotocol/inspector@1.0.3"
ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "mcp-inspector"

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def inspector() -> Path:
    exe = CACHE / "node_modules" / ".bin" / "mcp-inspector"
    if not exe.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed to install the MCP Inspector (Node 20 and npm; scripts/system-deps.sh)"
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", "--loglevel", "error", INSPECTOR],
            check=True, timeout=600,
        )  # fmt: skip
    assert exe.exists()
    return exe


def _inspect(exe: Path, *args: str) -> Any:
    done = subprocess.run([str(exe), "--cli", *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    return json.loads(out[out.index("{") :])  # after the Inspector's own banner, if any


def test_the_inspector_lists_and_calls_our_tools_over_stdio(inspector: Path, case_db: Path) -> None:
    server = serve_args(case_db)
    listed = _inspect(inspector, *server, "--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}
    assert {"lookup_address", "trace_funds", "run_sql", "annotate"} <= names
    annotate = next(t for t in listed["tools"] if t["name"] == "annotate")
    assert annotate["annotations"]["readOnlyHint"] is False

    called = _inspect(
        inspector, *server, "--method", "tools/call", "--tool-name", "run_sql",
        "--tool-arg", "query=SELECT count(*) AS n FROM transfers", "--tool-arg", "limit=1",
    )  # fmt: skip
    assert called["isError"] is False
    assert called["structuredContent"]["columns"] == ["n"]
    assert called["structuredContent"]["rows"][0][0] > 1000
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]

    resources = _inspect(inspector, *server, "--method", "resources/list")
    assert {r["uri"] for r in resources["resources"]} == {
        "tahrix://case/CASE-001/overview", "tahrix://case/CASE-001/flags"
    }  # fmt: skip


def test_the_inspector_over_http_with_a_bearer_token(inspector: Path, case_db: Path, tmp_path: Path) -> None:
    server = HttpServer(case_db, tmp_path, {"token-of-carol-0123456789abcdefghij": "carol"})
    try:
        http = [
            server.url,
            "--transport",
            "http",
            "--header",
            "Authorization: Bearer token-of-carol-0123456789abcdefghij",
        ]
        listed = _inspect(inspector, *http, "--method", "tools/list")
        assert "lookup_address" in {t["name"] for t in listed["tools"]}
        called = _inspect(inspector, *http, "--method", "tools/call", "--tool-name", "annotate",
                          "--tool-arg", "target_kind=flag", "--tool-arg", "target=FLG-1", "--tool-arg", "action=note")  # fmt: skip
        assert called["isError"] is True
        assert called["structuredContent"]["error"]["type"] == "denied"
    finally:
        from tests.mcp.conftest import stop

        stop(server.proc)
