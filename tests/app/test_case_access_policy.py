"""Who may open a case, as the service's case integration decides it, on both engines (the record's
grants in a DuckDB file or in PostgreSQL; the evidence in DuckDB)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.app.case_service import CaseIntegration, workspace_for
from tahrix_lab.case.access import open_cases
from tahrix_lab.jobs import JobRejected
from tests.agent.storage.conftest import pg_server, pg_url, store_target  # noqa: F401 - fixtures


def test_open_cases_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAHRIX_OPEN_CASES", raising=False)
    assert open_cases() == {"CASE-001"}  # the shipped sample only
    for value, expected in (("", set()), ("*", None), (" A, B ,", {"A", "B"})):
        monkeypatch.setenv("TAHRIX_OPEN_CASES", value)
        assert open_cases() == expected


@pytest.fixture
def integration(
    store_target: str,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[CaseIntegration]:
    monkeypatch.setenv("TAHRIX_EVIDENCE_DB", str(tmp_path / "evidence.duckdb"))
    monkeypatch.setenv("TAHRIX_OPEN_CASES", "")
    store = TranscriptStore(store_target)
    ws = workspace_for(store)
    ws.load_sample_case(detect=False)
    try:
        yield CaseIntegration(ws)
    finally:
        ws.close()


def refused(integration: CaseIntegration, user: str, case_id: str) -> str:
    with pytest.raises(UserFacingError) as caught:
        integration.start_session(integration.workspace.store, user=user, case_id=case_id)
    return caught.value.message


def test_grants_decide_what_a_user_sees_and_runs(
    integration: CaseIntegration, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, store = integration.workspace, integration.workspace.store
    assert integration.cases_for("alice") == []
    assert integration.case_view("alice", "CASE-001", "examples") is None
    # forbidden and unknown answer alike
    assert refused(integration, "alice", "CASE-001") == "No case named 'CASE-001'."
    assert refused(integration, "alice", "CASE-NOPE") == "No case named 'CASE-NOPE'."

    ws.grant_case("CASE-001", "alice", "viewer", by="admin")
    assert [(c["case_id"], c["role"]) for c in integration.cases_for("alice")] == [("CASE-001", "viewer")]
    assert integration.case_view("alice", "CASE-001", "examples") is not None
    assert "view" in refused(integration, "alice", "CASE-001")  # a viewer looks, never asks

    ws.grant_case("CASE-001", "alice", "investigator", by="admin")
    session = integration.start_session(store, user="alice", case_id="CASE-001")
    assert integration.context_for(store, session) is not None
    assert integration.session_cases([session.id]) == {session.id: "CASE-001"}

    assert store.revoke_case("CASE-001", "alice")
    with pytest.raises(JobRejected) as caught:  # her conversation answers as someone else's
        integration.context_for(store, session)
    assert (caught.value.status, caught.value.field) == (404, "session_id")
    assert integration.session_cases([session.id]) == {}
    assert integration.turn_citations(session.id, [{"type": "user"}]) == [None]

    monkeypatch.setenv("TAHRIX_OPEN_CASES", "*")  # the behaviour before grants, kept on request
    assert [(c["case_id"], c["role"]) for c in integration.cases_for("bob")] == [("CASE-001", "investigator")]
    with pytest.raises(UserFacingError, match="CASE-NOPE"):
        integration.start_session(store, user="bob", case_id="CASE-NOPE")
