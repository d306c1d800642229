"""Approve / Deny from the service page (issue 31 item 4), over real HTTP on `tahrix serve`'s case
integration: with ``TAHRIX_ASSISTANT_WRITES=approve`` the assistant's write waits, the signed-in user's
decision runs as a job of the conversation, and the transcript keeps who decided, when and why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.agent.approvals import pending_calls
from tahrix_lab.app import workplace
from tahrix_lab.app.case_service import case_integration
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.jobs.http.api import create_app
from tahrix_lab.jobs.server import Settings, build
from tests.jobs.conftest import AppServer
from tests.jobs.test_case_service import ask, follow

API = "/api/v1/agent"
TOKENS = {"alice-token-123": "alice", "bob-token-4567": "bob"}
ALICE = {"Authorization": "Bearer alice-token-123"}


def follow_alice(client: httpx.Client, created: httpx.Response) -> dict[str, Any]:
    return follow(client, created, ALICE)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[httpx.Client, Any, str]]:
    monkeypatch.delenv("TAHRIX_BACKEND", raising=False)
    monkeypatch.setenv("TAHRIX_ASSISTANT_WRITES", "approve")
    probe = Workspace(tmp_path / "probe.duckdb")  # flag ids are stable per subject: any copy names them
    case_id = probe.load_sample_case()
    flag = probe.cases.list_flags(case_id, limit=1)[0][0]["flag_id"]
    probe.close()
    script = tmp_path / "script.json"
    call = {
        "target_kind": "flag",
        "target": flag,
        "action": "confirm_flag",
        "payload": {"note": "memo checked"},
    }
    script.write_text(json.dumps({"delay": 0.0, "turns": [
        [{"kind": "tool_call", "name": "annotate", "args": call}],
        [{"kind": "text", "text": "Noted."}],
    ]}))  # fmt: skip
    cfg = Settings(tokens=TOKENS, db=str(tmp_path / "t.duckdb"), backend="fake", fake_script=str(script))
    built = build(cfg, case_integration, extend=workplace.mount)
    assert built.service is not None
    try:
        with (
            AppServer(create_app(built.service)) as srv,
            httpx.Client(base_url=srv.url, timeout=60) as client,
        ):
            yield client, built, flag
    finally:
        built.close()


def test_a_write_waits_and_the_signed_in_user_approves_it(served: tuple[httpx.Client, Any, str]) -> None:
    client, built, flag = served
    first: dict[str, Any] = {}
    ask(client, "alice-token-123", {"message": "Confirm the top flag", "case_id": "CASE-001"}, first)
    assert first["chunks"][-1] == {"type": "done", "stop_reason": "awaiting_approval"}
    waiting = [c for c in first["chunks"] if c["type"] == "approval"]
    assert len(waiting) == 1 and waiting[0]["state"] == "pending"
    session_id = first["state"]["session_id"]
    store = built.transcripts
    (call,) = pending_calls(store.load_messages(session_id))
    ws = Workspace(store.path, connection=store.connection)
    assert ws.cases.one("SELECT status FROM anomaly_flags WHERE flag_id = ?", [flag])["status"] == "new"

    # someone else cannot decide it: their conversation is not found
    bob = {"Authorization": "Bearer bob-token-4567"}
    theirs = follow(client, client.post(f"{API}/conversations/{session_id}/decisions",
                                        json={"call_id": call.id, "approve": True}, headers=bob), bob)  # fmt: skip
    assert theirs["state"]["status"] == "error"
    assert theirs["chunks"][-1]["message"] == "There is no conversation with this session_id."
    assert len(pending_calls(store.load_messages(session_id))) == 1  # still waits for alice

    done = follow_alice(client, client.post(f"{API}/conversations/{session_id}/decisions",
                                      json={"call_id": call.id, "approve": True, "reason": "I read the memo"},
                                      headers=ALICE))  # fmt: skip
    types = [c["type"] for c in done["chunks"]]
    assert done["state"]["status"] == "done" and types[0] == "approval" and "tool_result" in types
    decided = done["chunks"][0]
    assert (decided["state"], decided["by"], decided["reason"]) == (
        "approved", "alice", "I read the memo")  # fmt: skip
    assert any(c["type"] == "content" and "Noted." in c["text"] for c in done["chunks"])
    row = ws.cases.one("SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [flag])
    assert row == {
        "status": "confirmed",
        "updated_by": "alice",
    }  # under the analyst's name, never the model's
    assert pending_calls(store.load_messages(session_id)) == []

    # a second click: nothing waits any more, calmly refused, nothing changed
    again = follow_alice(client, client.post(f"{API}/conversations/{session_id}/decisions",
                                       json={"call_id": call.id, "approve": False}, headers=ALICE))  # fmt: skip
    assert again["state"]["status"] == "error"
    assert "No call with this id waits" in again["chunks"][-1]["message"]


def test_a_denial_reaches_the_model_and_changes_nothing(served: tuple[httpx.Client, Any, str]) -> None:
    client, built, flag = served
    first: dict[str, Any] = {}
    ask(client, "alice-token-123", {"message": "Confirm the top flag", "case_id": "CASE-001"}, first)
    session_id = first["state"]["session_id"]
    (call,) = pending_calls(built.transcripts.load_messages(session_id))
    bad = client.post(f"{API}/conversations/{session_id}/decisions", json={"call_id": call.id}, headers=ALICE)
    assert bad.status_code == 422  # approve is required: no default decision
    done = follow_alice(client, client.post(f"{API}/conversations/{session_id}/decisions",
                                      json={"call_id": call.id, "approve": False, "reason": "not yet"},
                                      headers=ALICE))  # fmt: skip
    assert done["chunks"][0]["state"] == "denied" and done["state"]["status"] == "done"
    result = next(c for c in done["chunks"] if c["type"] == "tool_result")
    assert "not yet" in json.dumps(result)
    ws = Workspace(built.transcripts.path, connection=built.transcripts.connection)
    assert ws.cases.one("SELECT status FROM anomaly_flags WHERE flag_id = ?", [flag])["status"] == "new"
