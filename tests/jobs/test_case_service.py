"""`tahrix serve` as the CLI wires it: case investigations, offline on the scripted investigator."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.app.case_service import case_integration
from tahrix_lab.jobs.http.api import create_app
from tahrix_lab.jobs.server import Settings, build

from .conftest import AppServer

JOB = "/api/v1/agent/chat-stream-job"
TOKENS = {"alice-token-123": "alice", "bob-token-4567": "bob"}


def ask(client: httpx.Client, token: str, body: dict[str, Any], out: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    out.update(follow(client, client.post(JOB, json=body, headers=headers), headers))


def follow(client: httpx.Client, created: httpx.Response, headers: dict[str, str]) -> dict[str, Any]:
    """A created job polled to its end: ``{state, chunks, meta}``."""
    assert created.status_code == 200, created.text
    job_id, since, chunks = created.json()["job_id"], 0, []
    for _ in range(500):
        state = client.get(f"{JOB}/{job_id}", params={"since": since, "wait": 10}, headers=headers).json()
        chunks += state["chunks"]
        since = state["next"]
        if state["status"] != "streaming":
            return {"state": state, "chunks": chunks, "meta": created.json()["meta"]}
    raise AssertionError("the job never ended")


def test_offline_service_runs_the_scripted_case_investigation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TAHRIX_BACKEND", raising=False)
    cfg = Settings(tokens=TOKENS, db=str(tmp_path / "t.duckdb"))
    built = build(cfg, case_integration)
    assert built.service is not None
    try:
        with (
            AppServer(create_app(built.service)) as srv,
            httpx.Client(base_url=srv.url, timeout=60) as client,
        ):
            # Two analysts at once: the scripted model keeps no state between conversations.
            results: list[dict[str, Any]] = [{}, {}]
            threads = [
                threading.Thread(
                    target=ask, args=(client, token, {"message": "Where did the funds go?"}, out)
                )
                for token, out in zip(TOKENS, results, strict=True)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            unknown: dict[str, Any] = {}  # admitted at once; the worker refuses the start
            ask(client, "alice-token-123", {"message": "hi", "case_id": "NOPE"}, unknown)
    finally:
        built.close()

    refused = unknown["chunks"][-1]
    assert unknown["state"]["status"] == "error"
    assert (refused["kind"], refused["status"], refused["field"]) == ("refused", 422, "case_id")
    assert "NOPE" in refused["message"]
    for result in results:
        assert result["state"]["status"] == "done"
        calls = [c["name"] for c in result["chunks"] if c["type"] == "tool_call"]
        assert calls[:2] == ["get_case_overview", "trace_funds"]
        assert all(
            c["status"] == "ok"
            for c in result["chunks"]
            if c["type"] == "tool_result" and c["name"] != "annotate"
        )
        assert "Findings for CASE-001" in result["state"]["content"]
        assert "0x" in result["state"]["content"]  # cites real transaction hashes from the tool results
    with TranscriptStore(tmp_path / "t.duckdb") as store:
        sessions = store.list_sessions(purpose="investigation")
        assert sorted(s.user for s in sessions) == ["alice", "bob"]
        assert len(store.case_links(case_id="CASE-001")) == 2  # the links are in the record
