"""Issue 31 items 1 and 2 on a real `tahrix serve` on loopback: admission on the SSE route, a
default budget for a real model, server timeouts, the concurrency limit, throttled sign-ins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_service_processes import Serve

pytestmark = pytest.mark.e2e

API = "/api/v1/agent"
ALICE = {"Authorization": "Bearer alice-token-0123456789abcdef"}


def tokens_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE["Authorization"][7:]: "alice"}))
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def slow_serve(tmp_path: Path) -> Iterator[Serve]:
    """A service whose answers take a while (60 words, 0.2 s apart), two per user at once."""
    script = tmp_path / "script.json"
    words = " ".join(f"w{i}" for i in range(60))
    script.write_text(json.dumps({"delay": 0.2, "turns": [[{"kind": "text", "text": words}]]}))
    srv = Serve("--tokens-file", tokens_file(tmp_path), "--fake-script", str(script),
                "--max-running-per-user", "2", db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        yield srv
    finally:
        srv.stop()


def test_sse_streams_go_through_admission(slow_serve: Serve) -> None:
    url = f"{slow_serve.url}{API}/chat-stream"
    statuses: list[int] = []
    refusals: list[str] = []
    with ExitStack() as open_streams, httpx.Client(timeout=30) as client:
        for i in range(45):  # one user, 45 streams, a cap of 2
            r = open_streams.enter_context(
                client.stream("POST", url, json={"message": f"q{i}"}, headers=ALICE)
            )
            statuses.append(r.status_code)
            if r.status_code == 200:
                assert r.headers["content-type"].startswith("text/event-stream")
                first = next(line for line in r.iter_lines() if line.startswith("data: "))
                assert json.loads(first[6:])["type"]  # it streams
            else:
                r.read()
                refusals.append(r.json()["detail"])
        assert statuses.count(200) == 2 and statuses.count(429) == 43
        assert all("running" in d or "at once" in d for d in refusals), refusals[0]
        # While the two run, the server still answers a static file and the job API.
        with httpx.Client(timeout=30) as other:
            js = other.get(f"{slow_serve.url}/static/poll.js")
            assert js.status_code == 200 and "createPollingChat" in js.text
            assert other.get(f"{slow_serve.url}{API}/me", headers=ALICE).json() == {"user": "alice"}
        # A question in a URL is refused with a pointer, not run.
        moved = client.get(url, params={"message": "secret question"}, headers=ALICE)
        assert moved.status_code == 405 and "POST" in moved.json()["detail"]


def test_a_real_model_without_a_budget_gets_a_capped_default(tmp_path: Path) -> None:
    # A real (OpenAI-compatible) backend at an address nobody answers: serve starts, no call is made.
    srv = Serve("--tokens-file", tokens_file(tmp_path), "--backend", "http://127.0.0.1:9/v1",
                "--model", "m", db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        out = "".join(srv.stdout)
        assert "WARNING: no budget was set" in out and "20 USD a month" in out
        assert "--budget-monthly-usd" in out
    finally:
        srv.stop()
    raised = Serve("--tokens-file", tokens_file(tmp_path), "--backend", "http://127.0.0.1:9/v1", "--model", "m",
                   "--budget-monthly-usd", "500", db=tmp_path / "u.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        assert "no budget was set" not in "".join(raised.stdout)
    finally:
        raised.stop()
