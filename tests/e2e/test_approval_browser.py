"""The approval card in real Chromium: a call that waits for the analyst, Approve / Deny, the decision.

The chunks come from a real cycle on the sample case (FakeBackend, the workspace, the
transcript): the page draws what the loop emitted, the click's decision goes to
``agent.decisions.decide``, and what that emits is drawn on the same page. A reload draws the
stored history (``history_chunks``) with the card still waiting. A screenshot of the pending
card goes to docs/screens/ with TAHRIX_SCREENSHOTS=docs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.decisions import decide
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.flow import chunks, history_chunks

pytestmark = pytest.mark.e2e

SCREENS = (
    Path(__file__).resolve().parents[2] / "docs" / "screens"
    if os.environ.get("TAHRIX_SCREENSHOTS") == "docs"
    else Path(tempfile.mkdtemp(prefix="tahrix-screens-"))
)
WITH_DECIDE = """() => {
  const root = document.getElementById('root');
  root.replaceChildren();
  window.decisions = [];
  window.flow = window.flowModule.createFlow(root, { onDecide: (d) => window.decisions.push(d) });
}"""


@pytest.fixture
def proposal(tmp_path: Path) -> Iterator[tuple[Workspace, str, str, FakeBackend, list[dict[str, Any]]]]:
    """The model proposes dismissing bob's confirmed flag: (ws, flag, session id, backend, live chunks)."""
    with Workspace(tmp_path / "ws.duckdb") as ws:
        ws.load_sample_case()
        flag = str(ws.flags("CASE-001", flag_type="dusting")[0]["flag_id"])
        ws.annotate("CASE-001", "flag", flag, "confirm_flag", analyst="bob")
        s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
        args = {"target_kind": "flag", "target": flag, "action": "dismiss_flag",
                "payload": {"note": "the memo says these are all false positives"}}  # fmt: skip
        backend = FakeBackend([[text("I will dismiss it."), tool_call("annotate", args, id="c1")],
                               [text("Done: the flag is dismissed.")], [text("Understood; it stays.")]])  # fmt: skip
        live = list(chunks(ws.ask(s, "the memo says to dismiss all flags", backend=backend, model="fake")))
        yield ws, flag, s.id, backend, live


def _mount(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate(WITH_DECIDE)


def _feed(page: Any, items: list[dict[str, Any]]) -> None:
    page.evaluate("(chunks) => chunks.forEach(c => window.flow.push(c))", items)


def _decide(ws: Workspace, sid: str, backend: FakeBackend, d: dict[str, Any]) -> list[dict[str, Any]]:
    events = decide(ws.store, sid, d["id"], approve=d["approve"], by="ana", reason=d["reason"] or None,
                    backend=backend, model="fake", context=ws.context_provider(), registry=CASE_TOOLS)  # fmt: skip
    return list(chunks(events))


def test_the_pending_call_shows_its_arguments_and_approve_runs_it(
    page: Any, mount_flow: Any, proposal: Any
) -> None:
    ws, flag, sid, backend, live = proposal
    _mount(page, mount_flow)
    page.evaluate("() => window.flow.startTurn('the memo says to dismiss all flags')")
    _feed(page, live)
    tool = page.locator(".tx-tool")
    assert tool.get_attribute("data-status") == "pending"
    assert tool.locator(".tx-tool-status").inner_text() == "awaiting approval"
    card = tool.locator(".tx-approval")
    assert card.get_attribute("data-state") == "pending"
    summary = card.locator(".tx-approval-summary").inner_text()
    assert flag in summary and "confirmed by bob" in summary
    shown = card.locator(".tx-approval-args").inner_text()
    assert '"dismiss_flag"' in shown and flag in shown and "false positives" in shown
    assert card.locator(".tx-approve").is_enabled() and card.locator(".tx-deny").is_enabled()
    card.locator(".tx-approval-reason").fill("checked the memo against the chain")
    tool.screenshot(path=str(SCREENS / "approval-pending.png"))
    card.locator(".tx-approve").click()
    [decision] = page.evaluate("() => window.decisions")
    assert decision == {"id": "c1", "approve": True, "reason": "checked the memo against the chain"}
    assert (
        card.locator(".tx-approve").is_disabled()
        and "Approving" in card.locator(".tx-approval-note").inner_text()
    )
    _feed(page, _decide(ws, sid, backend, decision))
    assert tool.get_attribute("data-status") == "done"
    assert card.get_attribute("data-state") == "approved"
    assert card.locator(".tx-approval-decision").inner_text().startswith("Approved by ana at ")
    assert "checked the memo against the chain" in card.locator(".tx-approval-decision").inner_text()
    assert card.locator("button").count() == 0
    assert page.locator(".tx-content").last.inner_text().strip() == "Done: the flag is dismissed."
    row = ws.cases.one("SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [flag])
    assert row == {"status": "dismissed", "updated_by": "ana"}
    assert page.console_errors == []


def test_deny_with_a_reason_and_a_reload_keeps_the_wait(page: Any, mount_flow: Any, proposal: Any) -> None:
    ws, flag, sid, backend, _ = proposal
    # a reload: the stored history draws the card still waiting, buttons live
    _mount(page, mount_flow)
    page.evaluate("(chunks) => window.flow.load(chunks)", history_chunks(ws.store.load_messages(sid),
                                                                        ws.store.load_turn_ends(sid)))  # fmt: skip
    card = page.locator(".tx-approval")
    assert card.get_attribute("data-state") == "pending" and card.locator(".tx-deny").is_enabled()
    assert page.locator(".tx-tool").get_attribute("data-status") == "pending"  # not "not run"
    # a refusal from the other end gives the buttons back with its sentence
    card.locator(".tx-deny").click()
    page.evaluate("() => window.flow.refuseDecision('c1', 'The assistant is still answering.')")
    assert card.locator(".tx-deny").is_enabled()
    assert card.locator(".tx-approval-note").inner_text() == "The assistant is still answering."
    card.locator(".tx-approval-reason").fill("memos are attacker-written")
    card.locator(".tx-deny").click()
    decision = page.evaluate("() => window.decisions")[-1]
    assert decision == {"id": "c1", "approve": False, "reason": "memos are attacker-written"}
    backend.script.pop(1)  # the model's answer to a denial is the script's last turn
    _feed(page, _decide(ws, sid, backend, decision))
    assert card.get_attribute("data-state") == "denied"
    assert "Denied by ana" in card.locator(".tx-approval-decision").inner_text()
    assert page.locator(".tx-tool").get_attribute("data-status") == "error"
    assert "memos are attacker-written" in page.locator(".tx-tool-error").inner_text()
    row = ws.cases.one("SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [flag])
    assert row == {"status": "confirmed", "updated_by": "bob"}
    assert page.console_errors == []


FAKE_MODEL_JS = """async ([bundle, css, state]) => {
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
  const url = URL.createObjectURL(new Blob([bundle], { type: 'text/javascript' }));
  const widget = (await import(url)).default;
  const handlers = {};
  window.sentToKernel = [];
  window.model = {
    get: (key) => state[key],
    on: (name, fn) => { handlers[name] = fn; },
    off: () => {},
    send: (msg) => window.sentToKernel.push(msg),
  };
  window.fromKernel = (msg) => handlers['msg:custom'](msg);
  widget.render({ model: window.model, el: document.getElementById('root') });
}"""


def test_the_notebook_glue_sends_the_decision_to_the_kernel(
    page: Any, mount_flow: Any, proposal: Any
) -> None:
    """chat.js, as anywidget loads it (the joined bundle), over a stand-in for the widget's model."""
    from tahrix_lab.lab.widget import ChatWidget

    ws, _, sid, _, _ = proposal
    drawn = history_chunks(ws.store.load_messages(sid), ws.store.load_turn_ends(sid))
    state = {
        "chunks": drawn,
        "live": [],
        "seq": len(drawn),
        "busy": False,
        "meter": {},
        "follow_up_mode": "keep",
    }
    mount_flow(page)
    page.evaluate("() => document.getElementById('root').replaceChildren()")
    page.evaluate(FAKE_MODEL_JS, [ChatWidget._esm, ChatWidget._css, state])
    card = page.locator(".tx-chat .tx-approval")
    assert card.get_attribute("data-state") == "pending"
    card.locator(".tx-approval-reason").fill("not on this evidence")
    card.locator(".tx-deny").click()
    sent = [m for m in page.evaluate("() => window.sentToKernel") if m["type"] == "decide"]
    assert sent == [{"type": "decide", "id": "c1", "approve": False, "reason": "not on this evidence"}]
    page.evaluate(
        "() => window.fromKernel({type: 'refused', id: 'c1', message: 'The assistant is still answering.'})"
    )
    assert card.locator(".tx-deny").is_enabled()
    assert card.locator(".tx-approval-note").inner_text() == "The assistant is still answering."
    assert page.console_errors == []
