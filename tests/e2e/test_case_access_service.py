"""Per-case access on `tahrix serve` (issue 31 item 3): one real service process on loopback,
two users over HTTP. The sample case is closed (``TAHRIX_OPEN_CASES=``) and granted to alice only:
for bob it answers, on every route, exactly as a case that is not loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.case.workspace import Workspace
from tests.e2e.test_service_processes import Serve

pytestmark = pytest.mark.e2e

API = "/api/v1/agent"
JOB = f"{API}/chat-stream-job"
ALICE = {"Authorization": "Bearer token-of-alice-0123456789abcdefghij"}
BOB = {"Authorization": "Bearer token-of-bob-0123456789abcdefghijkl"}


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Serve, Path]]:
    db = tmp_path / "tahrix.duckdb"
    with Workspace(db) as ws:
        ws.load_sample_case()
        ws.grant_case("CASE-001", "alice", "investigator", by="admin")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({h["Authorization"][7:]: u for h, u in ((ALICE, "alice"), (BOB, "bob"))}))
    tokens.chmod(0o600)
    monkeypatch.setenv("TAHRIX_OPEN_CASES", "")  # inherited by the service: no case is open to all
    monkeypatch.delenv("TAHRIX_DB", raising=False)
    srv = Serve("--tokens-file", str(tokens), db=db, cwd=tmp_path).wait_listening()  # fake backend
    try:
        yield srv, db
    finally:
        srv.stop()


def run_job(client: httpx.Client, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    created = client.post(JOB, json=body, headers=headers)
    assert created.status_code == 200, created.text
    job_id, since, chunks = created.json()["job_id"], 0, []
    for _ in range(300):  # bounded: each poll waits at most 10 s
        state = client.get(f"{JOB}/{job_id}", params={"since": since, "wait": 10}, headers=headers).json()
        chunks += state["chunks"]
        since = state["next"]
        if state["status"] != "streaming":
            return {"status": state["status"], "chunks": chunks, "session_id": state.get("session_id")}
    raise AssertionError("the job never ended")


def refusal(result: dict[str, Any]) -> dict[str, Any]:
    assert result["status"] == "error", result
    return dict(result["chunks"][-1])


def test_bob_meets_alices_case_as_a_missing_one(served: tuple[Serve, Path]) -> None:
    srv, db = served
    assert any("open to all: none ($TAHRIX_OPEN_CASES)" in line for line in srv.stdout)  # said at start
    with httpx.Client(base_url=srv.url, timeout=60) as client:
        alice_cases = client.get(f"{API}/cases", headers=ALICE).json()["cases"]
        assert [(c["case_id"], c["role"]) for c in alice_cases] == [("CASE-001", "investigator")]
        assert client.get(f"{API}/cases", headers=BOB).json()["cases"] == []

        # the case's routes: bob's GET of a granted-to-alice case and of no case at all answer alike
        for part in ("", "/flags", "/graph"):
            assert client.get(f"{API}/cases/CASE-001{part}", headers=ALICE).status_code == 200
            forbidden = client.get(f"{API}/cases/CASE-001{part}", headers=BOB)
            missing = client.get(f"{API}/cases/CASE-NOPE{part}", headers=BOB)
            assert forbidden.status_code == missing.status_code == 404
            assert forbidden.json() == missing.json()
        onward = {"node": {"id": "ethereum:0x0"}, "edges_in": []}
        forbidden = client.post(f"{API}/cases/CASE-001/graph/onward", json=onward, headers=BOB)
        missing = client.post(f"{API}/cases/CASE-NOPE/graph/onward", json=onward, headers=BOB)
        assert forbidden.status_code == missing.status_code == 404 and forbidden.json() == missing.json()

        # a job: bob's for alice's case is refused word for word as his for a case that is not there
        theirs = refusal(run_job(client, BOB, {"message": "hi", "case_id": "CASE-001"}))
        nope = refusal(run_job(client, BOB, {"message": "hi", "case_id": "CASE-NOPE"}))
        assert theirs["message"] == "No case named 'CASE-001'."
        assert {**theirs, "message": theirs["message"].replace("CASE-001", "CASE-NOPE")} == nope

        # alice works on it; after her grant is revoked, her conversation is closed to her
        mine = run_job(client, ALICE, {"message": "hi", "case_id": "CASE-001"})
        assert mine["status"] == "done", mine
        session_id = mine["session_id"]
        listed = client.get(f"{API}/conversations", headers=ALICE).json()["conversations"]
        assert [(c["session_id"], c["case_id"]) for c in listed] == [(session_id, "CASE-001")]
        revoked = subprocess.run(
            [sys.executable, "-m", "tahrix_lab.cli", "--db", str(db), "case", "revoke", "CASE-001", "alice"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert revoked.returncode == 0, revoked.stderr
        assert client.get(f"{API}/cases", headers=ALICE).json()["cases"] == []
        again = refusal(run_job(client, ALICE, {"message": "more", "session_id": session_id}))
        stranger = refusal(run_job(client, BOB, {"message": "more", "session_id": session_id}))
        assert again == stranger  # as someone else's conversation: no hint it is on a case
        assert (again["status"], again["field"]) == (404, "session_id")
        # nor listed, nor read back: the same 404 as someone else's conversation
        assert client.get(f"{API}/conversations", headers=ALICE).json()["conversations"] == []
        read = client.get(f"{API}/sessions/{session_id}", headers=ALICE)
        theirs_read = client.get(f"{API}/sessions/{session_id}", headers=BOB)
        assert read.status_code == theirs_read.status_code == 404
        assert read.json() == theirs_read.json()
        # granted again, the conversation is back, without the refused follow-up in it
        granted = subprocess.run(
            [sys.executable, "-m", "tahrix_lab.cli", "--db", str(db), "case", "grant", "CASE-001", "alice"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert granted.returncode == 0, granted.stderr
        past = client.get(f"{API}/sessions/{session_id}", headers=ALICE).json()
        assert [c["text"] for c in past["chunks"] if c["type"] == "user"] == ["hi"]


def test_confirm_and_dismiss_from_the_page_are_the_investigators_only(served: tuple[Serve, Path]) -> None:
    """The flags panel's Confirm / Dismiss on the service page: recorded under the signed-in name
    for an investigator; a viewer is refused (403); anyone else meets a missing case (404)."""
    srv, db = served
    with httpx.Client(base_url=srv.url, timeout=60) as client:
        panel = client.get(f"{API}/cases/CASE-001/flags", headers=ALICE).json()
        assert panel["can_decide"] is True
        flag_id = panel["rows"][0]["flags"][0]["flag_id"]
        decided = client.post(
            f"{API}/cases/CASE-001/flags/{flag_id}/decision", json={"action": "confirm_flag"}, headers=ALICE
        )
        assert decided.status_code == 200, decided.text
        flag = next(f for r in decided.json()["rows"] for f in r["flags"] if f["flag_id"] == flag_id)
        assert flag["status"] == "confirmed"

        bad = client.post(
            f"{API}/cases/CASE-001/flags/{flag_id}/decision", json={"action": "delete"}, headers=ALICE
        )
        assert bad.status_code == 422 and bad.json()["field"] == "action"
        unknown = client.post(
            f"{API}/cases/CASE-001/flags/FLG-0000000000/decision",
            json={"action": "dismiss_flag"},
            headers=ALICE,
        )
        assert unknown.status_code == 422 and unknown.json()["field"] == "flag_id"

        forbidden = client.post(
            f"{API}/cases/CASE-001/flags/{flag_id}/decision", json={"action": "dismiss_flag"}, headers=BOB
        )
        missing = client.post(
            f"{API}/cases/CASE-NOPE/flags/{flag_id}/decision", json={"action": "dismiss_flag"}, headers=BOB
        )
        assert forbidden.status_code == missing.status_code == 404 and forbidden.json() == missing.json()

        granted = subprocess.run(
            [sys.executable, "-m", "tahrix_lab.cli", "--db", str(db), "case", "grant", "CASE-001", "bob",
             "--role", "viewer"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert granted.returncode == 0, granted.stderr
        assert client.get(f"{API}/cases/CASE-001/flags", headers=BOB).json()["can_decide"] is False
        viewer = client.post(
            f"{API}/cases/CASE-001/flags/{flag_id}/decision", json={"action": "dismiss_flag"}, headers=BOB
        )
        assert viewer.status_code == 403
        assert (
            viewer.json()["detail"]
            == "You may view case 'CASE-001' but not decide on its flags (role viewer)."
        )
        still = client.get(f"{API}/cases/CASE-001/flags", headers=ALICE).json()
        assert any(
            f["flag_id"] == flag_id and f["status"] == "confirmed" for r in still["rows"] for f in r["flags"]
        )
    with Workspace(db) as ws:  # audited under the analyst's own name
        audit = ws.cases.rows("SELECT actor, action FROM audit_log WHERE target_id = ?", [flag_id])
        assert audit == [{"actor": "alice", "action": "confirm_flag"}]


def test_undo_takes_back_ones_own_decision_on_that_flag_only(served: tuple[Serve, Path]) -> None:
    """The page's Undo: the decision's answer names it (``last_decision``); the undo route takes
    back that decision of the signed-in analyst on that flag, once, and nothing else."""
    srv, db = served
    with httpx.Client(base_url=srv.url, timeout=60) as client:
        panel = client.get(f"{API}/cases/CASE-001/flags", headers=ALICE).json()
        flag_id, other_id = [f["flag_id"] for r in panel["rows"] for f in r["flags"] if f["status"] == "new"][
            :2
        ]
        decided = client.post(
            f"{API}/cases/CASE-001/flags/{flag_id}/decision", json={"action": "dismiss_flag"}, headers=ALICE
        ).json()
        last = decided["last_decision"]
        assert (last["flag_id"], last["action"]) == (flag_id, "dismiss_flag") and last["audit_id"]
        assert flag_id not in {f["flag_id"] for f in decided["raw"]}  # dismissed: out of the triage

        def undo(flag: str, audit_id: str, who: dict[str, str] = ALICE) -> httpx.Response:
            return client.post(
                f"{API}/cases/CASE-001/flags/{flag}/undo", json={"audit_id": audit_id}, headers=who
            )

        wrong_flag = undo(other_id, last["audit_id"])
        assert wrong_flag.status_code == 422 and wrong_flag.json()["field"] == "audit_id"
        assert "is not a decision of yours on" in wrong_flag.json()["detail"]
        assert undo(flag_id, "AUD-0000000000").status_code == 422
        assert undo(flag_id, last["audit_id"], BOB).status_code in (403, 404)  # a viewer or a stranger
        done = undo(flag_id, last["audit_id"])
        assert done.status_code == 200, done.text
        assert next(f for f in done.json()["raw"] if f["flag_id"] == flag_id)["status"] == "new"
        again = undo(flag_id, last["audit_id"])
        assert again.status_code == 422 and "already reverted by" in again.json()["detail"]
    with Workspace(db) as ws:
        audit = ws.cases.rows("SELECT actor, action FROM audit_log WHERE target_id = ?", [flag_id])
        assert sorted(audit, key=lambda e: e["action"]) == [
            {"actor": "alice", "action": "dismiss_flag"},
            {"actor": "alice", "action": "revert:dismiss_flag"},
        ]
