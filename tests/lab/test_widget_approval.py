"""The notebook widget's side of a call that waits: Approve / Deny from the view, run as the analyst."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.lab.replay import _canonical, recorded_calls
from tahrix_lab.lab.widget import ChatWidget
from tests.lab.test_widget import Recorder


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with Workspace(tmp_path / "ws.duckdb") as w:
        w.load_sample_case()
        yield w


def _widget(ws: Workspace, backend: FakeBackend) -> tuple[ChatWidget, str]:
    flag = str(ws.flags("CASE-001", flag_type="dusting")[0]["flag_id"])
    ws.annotate("CASE-001", "flag", flag, "confirm_flag", analyst="bob")
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    w = ChatWidget(store=ws.store, session=s, backend=backend, model="fake", context=ws.context_provider(),
                   registry=CASE_TOOLS)  # fmt: skip
    return w, flag


def _view_says(w: ChatWidget, content: dict[str, Any]) -> None:
    w._on_front_end(w, content, [])  # what a click in the view sends
    assert w.wait(30)


def _flag(ws: Workspace, flag: str) -> Any:
    return ws.cases.one("SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [flag])


def test_a_click_on_approve_runs_the_call_as_the_notebooks_analyst(ws: Workspace) -> None:
    args_of = {"target_kind": "flag", "action": "dismiss_flag"}
    backend = FakeBackend([])
    w, flag = _widget(ws, backend)
    backend.script += [[tool_call("annotate", {**args_of, "target": flag}, id="c1")], [text("Dismissed.")]]
    rec = Recorder(w)
    w.ask("dismiss what the memo says", timeout=30)
    assert w.busy is False and not w.running  # waiting holds no thread
    [card] = [c for c in w.chunks if c["type"] == "approval"]
    assert card["state"] == "pending" and card["args"]["target"] == flag and "bob" in card["summary"]
    assert w.chunks[-1] == {"type": "done", "stop_reason": "awaiting_approval"}
    assert _flag(ws, flag) == {"status": "confirmed", "updated_by": "bob"}
    # a widget opened later (a reload) draws the same card from the transcript
    again = ChatWidget(store=ws.store, session=w.session_id, backend=backend, model="fake",
                       context=ws.context_provider(), registry=CASE_TOOLS)  # fmt: skip
    assert [c for c in again.chunks if c["type"] == "approval"] == [card]
    _view_says(w, {"type": "decide", "id": "c1", "approve": True, "reason": "verified"})
    assert _flag(ws, flag) == {"status": "dismissed", "updated_by": "ana"}
    decided = [c for c in w.chunks if c["type"] == "approval"][-1]
    assert (decided["state"], decided["by"], decided["reason"]) == ("approved", "ana", "verified")
    assert w.answer == "Dismissed." and w.chunks[-1]["type"] == "done"
    streamed = [c["type"] for c in rec.streamed()]
    assert streamed.count("approval") == 2 and "tool_result" in streamed
    # a second click (another view) is refused calmly, and nothing runs twice
    _view_says(w, {"type": "decide", "id": "c1", "approve": False, "reason": "late"})
    assert rec.custom[-1]["type"] == "refused" and rec.custom[-1]["id"] == "c1"
    assert "No call" in rec.custom[-1]["message"]
    assert _flag(ws, flag) == {"status": "dismissed", "updated_by": "ana"}


def test_a_recorded_replay_answers_with_the_decided_result(ws: Workspace) -> None:
    backend = FakeBackend([])
    w, flag = _widget(ws, backend)
    call = {"target_kind": "flag", "action": "dismiss_flag", "target": flag}
    backend.script += [[tool_call("annotate", call, id="c1")], [text("Dismissed.")]]
    w.ask("dismiss it", timeout=30)
    _view_says(w, {"type": "decide", "id": "c1", "approve": True, "reason": "ok"})
    [(result, status)] = recorded_calls(ws.store.load_messages(w.session_id))[("annotate", _canonical(call))]
    assert status == "ok" and result["approval"]["by"] == "ana"
