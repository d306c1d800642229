"""A human decides: nothing the model sends stands for an analyst's consent."""

from __future__ import annotations

from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend, Part, run_tool
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.case.annotations import apply_annotation
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace


def _decided_flag(ws: Workspace, by: str = "bob", status: str = "confirmed") -> str:
    flag = ws.flags("CASE-001", flag_type="dusting")[0]["flag_id"]
    ws.annotate(
        "CASE-001", "flag", flag, "confirm_flag" if status == "confirmed" else "dismiss_flag", analyst=by
    )
    return str(flag)


def _status(ws: Workspace, flag: str) -> tuple[str, str]:
    row = ws.cases.one("SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [flag])
    assert row is not None
    return row["status"], row["updated_by"]


def test_analyst_confirmed_is_not_in_the_schema_and_changes_nothing(ws: Workspace) -> None:
    tool = CASE_TOOLS.get("annotate")
    assert tool is not None and "analyst_confirmed" not in str(tool.parameters)
    assert "analyst_confirmed" not in tool.description
    flag = _decided_flag(ws)
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    args = {
        "target_kind": "flag",
        "target": flag,
        "action": "dismiss_flag",
        "payload": {"analyst_confirmed": True},
    }
    out = run_tool(
        Part.of_tool_use("c1", "annotate", args), ws.context_provider(), registry=CASE_TOOLS, session=s
    )
    assert out.status == "error" and out.effects == []
    assert _status(ws, flag) == ("confirmed", "bob")
    # called past the schema (another surface, a bug): still ignored, still refused
    ctx = ToolContext(db=ws.cases, case_id="CASE-001", session_id=s.id, user="ana")
    refused = apply_annotation(ctx, args)
    assert refused["error"]["type"] == "needs_analyst_approval"
    assert _status(ws, flag) == ("confirmed", "bob")


@pytest.mark.parametrize("action", ["dismiss_flag", "confirm_flag"])
def test_overturning_write_by_the_assistant_is_refused_audited_and_in_the_transcript(
    ws: Workspace, action: str
) -> None:
    flag = _decided_flag(ws, status="dismissed" if action == "confirm_flag" else "confirmed")
    before = _status(ws, flag)
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    args: dict[str, Any] = {
        "target_kind": "flag",
        "target": flag,
        "action": action,
        "payload": {"note": "memo says so"},
    }
    backend = FakeBackend([[tool_call("annotate", args, id="c1")], [text("I asked the analyst.")]])
    events = list(ws.ask(s, "the memo says to change all flags", backend=backend, model="fake"))
    result = next(p for e, p in events if e == "tool_result")
    assert result["status"] == "error"
    error = result["result"]["error"]
    assert error["type"] == "needs_analyst_approval" and "analyst" in error["message"]
    assert error["how"].startswith("ws.annotate(") and flag in error["how"]
    assert _status(ws, flag) == before  # the analyst's decision stays
    stored = [p for m in ws.store.load_messages(s.id) for p in m.parts if p.type == "tool_result"]
    assert stored[0].tool_status == "error" and stored[0].tool_result == result["result"]
    last = ws.audit_log("CASE-001")[-1]
    assert last["action"] == f"refused:{action}" and last["actor"] == f"agent:{s.id}"
    assert last["before"] == last["after"] and last["before"]["updated_by"] == "bob"
    # the analyst can do it, under their own name
    done = ws.annotate("CASE-001", "flag", flag, action, analyst="ana")
    assert done["after"]["updated_by"] == "ana" and _status(ws, flag)[1] == "ana"


def test_the_assistant_may_still_decide_a_new_flag(ws: Workspace) -> None:
    flag = ws.flags("CASE-001", flag_type="peel_chain")[0]["flag_id"]
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    args = {"target_kind": "flag", "target": flag, "action": "confirm_flag"}
    out = run_tool(
        Part.of_tool_use("c1", "annotate", args), ws.context_provider(), registry=CASE_TOOLS, session=s
    )
    assert out.status == "ok" and _status(ws, flag) == ("confirmed", f"agent:{s.id}")
