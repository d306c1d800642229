"""Two hosts on one record (issue 26 items 1/2): what an analyst writes on host A (a flag
confirmed with a note, a role, a label) is seen by host B's next tool call and triage, and a
revert on B undoes A's write, audited. Each host has its own DuckDB evidence file of the same
sample case and nothing else shared but the PostgreSQL URL. The same cycle runs on one
DuckDB file (one analyst) too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import Message, Part, Session, TranscriptStore, run_tool
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import SAMPLE_CASE_ID as CASE
from tahrix_lab.case.workspace import Workspace
from tests.agent.storage.conftest import pg_server, pg_url  # noqa: F401


def call(ws: Workspace, session: Session, name: str, args: dict[str, Any]) -> dict[str, Any]:
    out = run_tool(
        Part.of_tool_use("tu", name, args), ws.context_provider(), registry=CASE_TOOLS, session=session
    )
    assert out.status == "ok", out.result
    result: dict[str, Any] = out.result
    return result


@pytest.fixture(params=["postgresql", "duckdb"])
def hosts(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        a = Workspace(tmp_path / "a.duckdb", record=TranscriptStore(url))
        b = Workspace(tmp_path / "b.duckdb", record=TranscriptStore(url))
    else:  # one analyst: one file, two handles on it
        a = Workspace(tmp_path / "one.duckdb")
        b = Workspace(tmp_path / "one.duckdb")
    a.load_sample_case()
    b.load_sample_case()
    yield a, b
    a.close()
    b.close()


def _flag(ws: Workspace, session: Session, flag: dict[str, Any]) -> dict[str, Any]:
    flags = call(ws, session, "list_flags", {"view": "raw", "address": flag["address"]})["flags"]
    return next(f for f in flags if f["flag_id"] == flag["flag_id"])


def test_what_a_writes_b_sees_and_b_reverts(hosts: tuple[Workspace, Workspace]) -> None:
    a, b = hosts
    flag = next(f for f in a.flags(CASE) if f["address"] and f["status"] == "new")
    address, chain = flag["address"], flag["chain"]
    sb = b.start_investigation(CASE, user="bob", grant={"may_write": False})
    assert _flag(b, sb, flag)["status"] == "new"  # B has read the case before A writes

    confirm = a.annotate(
        CASE, "flag", flag["flag_id"], "confirm_flag", {"note": "same cash-out desk"}, analyst="ana"
    )
    a.annotate(CASE, "address", address, "set_role", {"role": "suspect"}, analyst="ana", chain=chain)
    a.annotate(CASE, "address", address, "add_label", {"label": "Desk 7 hot wallet", "category": "exchange"},
               analyst="ana", chain=chain)  # fmt: skip

    # B's next tool calls see all three
    seen = _flag(b, sb, flag)
    assert (seen["status"], seen["analyst_note"], seen["updated_by"]) == (
        "confirmed",
        "same cash-out desk",
        "ana",
    )
    match = call(b, sb, "lookup_address", {"address": address, "chain": chain})["matches"][0]
    assert [r["role"] for r in match["roles"]] == ["suspect"]
    assert "Desk 7 hot wallet" in [lab["label"] for lab in match["labels"]]
    assert any(f["flag_id"] == flag["flag_id"] and f["status"] == "confirmed" for f in match["flags"])
    row = next(r for r in b.triage(CASE)["rows"] if f"{chain}:{address}" in r["addresses"])
    assert row["role"] == "suspect"
    assert [f["status"] for f in row["flags"] if f["flag_id"] == flag["flag_id"]] == ["confirmed"]

    # B reverts A's confirmation; A sees the flag new again, and both see who did it
    b.revert(confirm["audit_id"], actor="bob")
    assert next(f for f in a.flags(CASE) if f["flag_id"] == flag["flag_id"])["status"] == "new"
    for ws in (a, b):
        log = {e["audit_id"]: e for e in ws.audit_log(CASE)}
        undo = log[log[confirm["audit_id"]]["reverted_by"]]
        assert (undo["actor"], undo["action"]) == ("bob", "revert:confirm_flag")
        assert undo["after"]["status"] == "new" and undo["before"]["analyst_note"] == "same cash-out desk"


def test_a_review_on_a_is_the_finding_status_on_b(hosts: tuple[Workspace, Workspace]) -> None:
    a, b = hosts
    s = a.start_investigation(CASE, user="ana")
    a.store.append_message(s.id, Message(role="user", parts=[Part.of_text("Where did it go?")]))
    a.store.append_message(
        s.id, Message(role="assistant", parts=[Part.of_text("- to the bridge\n- then a mixer")])
    )
    first, second = a.report_findings(CASE, sessions=[s.id])
    a.review_finding(CASE, first["finding_id"], "edit", by="ana", text="To the bridge, 12 ETH.")
    a.review_finding(CASE, second["finding_id"], "drop", by="ana")
    seen = {f["finding_id"]: f for f in b.report_findings(CASE, sessions=[s.id])}
    assert (seen[first["finding_id"]]["status"], seen[first["finding_id"]]["text"]) == (
        "edited",
        "To the bridge, 12 ETH.",
    )
    assert (
        seen[second["finding_id"]]["status"] == "dropped"
        and seen[second["finding_id"]]["review"]["by"] == "ana"
    )
    b.review_finding(CASE, second["finding_id"], "accept", by="bob")  # the latest decision wins on both
    assert {f["finding_id"]: f["status"] for f in a.report_findings(CASE, sessions=[s.id])}[
        second["finding_id"]
    ] == "accepted"
