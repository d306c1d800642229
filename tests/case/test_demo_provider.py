"""`tahrix demo` with TAHRIX_BACKEND=openai: the real OpenAI adapter against a loopback server."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Console

from tahrix_lab.app.demo import run_demo
from tahrix_lab.case.workspace import Workspace


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "loop-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if len(type(self).requests) == 1:
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_case_overview", "arguments": "{}"},
            }
            chunks = [_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls")]
        else:
            tool_msg = next(m for m in body["messages"] if m["role"] == "tool")
            title = json.loads(tool_msg["content"])["case"]["title"]
            chunks = [_chunk({"role": "assistant", "content": f"The case is {title}."}), _chunk({}, "stop")]
        chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "loop-model", "choices": [],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for c in chunks:
            self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.requests = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_demo_uses_the_configured_provider(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAHRIX_BACKEND", "openai")
    monkeypatch.setenv("TAHRIX_MODEL", "loop-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    buf = io.StringIO()
    with Workspace(tmp_path / "p.duckdb") as ws:
        out = run_demo(ws, console=Console(file=buf, width=200))
        assert out["scripted"] is False and out["calls"] == 2
        text = buf.getvalue()
        assert "Scripted" not in text and "Investigation with openai" in text
        assert "The case is Aurora Gate bridge" in text
        first = _Handler.requests[0]
        assert first["model"] == "loop-model"
        assert {t["function"]["name"] for t in first["tools"]} >= {"trace_funds", "run_sql", "annotate"}
        assert "Cite evidence" in first["messages"][0]["content"]
        stored = ws.store.load_messages(out["session_id"])
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


def test_demo_needs_a_model_for_a_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tahrix_lab.agent.errors import ConfigurationError

    monkeypatch.setenv("TAHRIX_BACKEND", "openai")
    monkeypatch.delenv("TAHRIX_MODEL", raising=False)
    with Workspace(tmp_path / "q.duckdb") as ws, pytest.raises(ConfigurationError, match="TAHRIX_MODEL"):
        run_demo(ws, console=Console(file=io.StringIO()))
