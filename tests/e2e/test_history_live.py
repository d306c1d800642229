"""History = live: a stored session draws exactly what the live run showed.

A real ChatWidget runs scripted conversations (tools that succeed and fail, a
follow-up, a Stop mid-answer and a Stop mid-tool) while everything it
publishes on its comm is recorded. Chromium then draws the conversation twice
through the real front end (flow.js + chat.js): once by replaying the live
messages in order, once from ``ChatWidget.from_session``'s snapshot. The DOM's
structure and text must be the same, in both follow-up modes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.lab.widget import ChatWidget
from tests.e2e.test_renderer_browser import CHAT_JS

pytestmark = pytest.mark.e2e

DOM_JS = """() => {
  const walk = (el) => ({
    tag: el.tagName, cls: el.className, status: el.dataset.status || null, hidden: el.hidden,
    open: el.tagName === 'DETAILS' ? el.open : null,
    text: el.children.length ? null : el.textContent, kids: [...el.children].map(walk),
  });
  return walk(document.querySelector('.tx-log'));
}"""


class Recorder:
    """Everything the widget publishes, in order: custom messages and trait updates."""

    def __init__(self, widget: ChatWidget) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        widget.comm.publish_msg = self.publish

    def publish(self, msg_type: str, data: Any = None, *args: Any, **kw: Any) -> None:
        if isinstance(data, dict) and data.get("method") == "custom":
            self.events.append(("message", data["content"]))
        elif isinstance(data, dict) and data.get("method") == "update":
            self.events.append(("update", dict(data.get("state", {}))))


def tools_registry(tool_started: threading.Event, tool_gate: threading.Event) -> ToolRegistry:
    reg = ToolRegistry()
    params = {"type": "object", "properties": {"address": {"type": "string"}}}

    @reg.register(parameters=params)
    def lookup_address(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Look an address up."""
        return {"label": "ExchangeA", "category": "exchange", "_effects": [{"type": "labels_changed"}]}

    @reg.register(parameters=params)
    def list_flags(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Fails on purpose."""
        raise ValueError("the flags table is locked")

    @reg.register(parameters=params)
    def slow_trace(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Waits until the test lets it go."""
        tool_started.set()
        tool_gate.wait(10)
        return {"nodes": [1, 2, 3]}

    return reg


def conversation(mode: str, tmp_path: Path) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """Run three turns live; return what was published and the stored session's snapshot."""
    tool_started, tool_gate = threading.Event(), threading.Event()
    answer_started, answer_gate = threading.Event(), threading.Event()

    def stopped_answer(messages: Any, specs: Any) -> Iterator[Any]:
        yield text("The funds went ")
        answer_started.set()
        answer_gate.wait(10)
        yield text("(a token already on its way when Stop came)")

    backend = FakeBackend(
        [
            [
                reasoning("I should look both up."),
                text("Let me check."),
                tool_call("lookup_address", {"address": "0xabc"}, id="t1"),
                tool_call("list_flags", {"address": "0xabc"}, id="t2"),
            ],
            [reasoning("Now I know."), text("It is **ExchangeA**.\n\nA deposit address.")],
            stopped_answer,
            [
                text("Tracing."),
                tool_call("slow_trace", {"address": "0xabc"}, id="t3"),
                tool_call("lookup_address", {"address": "0xdef"}, id="t4"),
            ],
        ]
    )
    store = TranscriptStore(tmp_path / f"{mode}.duckdb")
    reg = tools_registry(tool_started, tool_gate)
    chat = ChatWidget(store=store, backend=backend, model="fake-model", registry=reg, follow_up_mode=mode)
    rec = Recorder(chat)
    assert chat.ask("What is 0xabc?", timeout=30) == "It is **ExchangeA**.\n\nA deposit address."
    chat.send("Where did the funds go?")  # stopped mid-answer
    assert answer_started.wait(10)
    chat.stop()
    answer_gate.set()
    assert chat.wait(30)
    chat.send("Trace it.")  # stopped while a tool runs: the next tool never starts
    assert tool_started.wait(10)
    chat.stop()
    tool_gate.set()
    assert chat.wait(30)
    stored = ChatWidget.from_session(
        chat.session_id, store=store, backend=FakeBackend([]), model="fake-model", follow_up_mode=mode
    )
    snapshot = {"chunks": stored.chunks, "seq": stored.seq}
    stored.close()
    chat.close()
    store.close()
    return rec.events, snapshot


def draw_live(page: Any, widgets_url: str, mode: str, events: list[tuple[str, dict[str, Any]]]) -> Any:
    page.goto(widgets_url + "/blank.html")
    state = {"chunks": [], "seq": 0, "busy": False, "meter": {}, "follow_up_mode": mode}
    page.evaluate(CHAT_JS, [ChatWidget._esm, state])
    page.evaluate(
        """(events) => { for (const [kind, body] of events) {
             if (kind === 'message') window.model.message(body); else window.model.update(body); } }""",
        events,
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return page.evaluate(DOM_JS)


def draw_history(page: Any, widgets_url: str, mode: str, snapshot: dict[str, Any]) -> Any:
    page.goto(widgets_url + "/blank.html")
    state = {**snapshot, "busy": False, "meter": {}, "follow_up_mode": mode}
    page.evaluate(CHAT_JS, [ChatWidget._esm, state])
    return page.evaluate(DOM_JS)


@pytest.mark.parametrize("mode", ["keep", "replace"])
def test_from_session_draws_exactly_what_was_seen_live(
    mode: str, page: Any, widgets_url: str, tmp_path: Path
) -> None:
    events, snapshot = conversation(mode, tmp_path)
    live = draw_live(page, widgets_url, mode, events)
    text_live = page.locator(".tx-log").inner_text()
    statuses = page.evaluate("() => [...document.querySelectorAll('.tx-tool')].map(t => t.dataset.status)")
    history = draw_history(page, widgets_url, mode, snapshot)
    assert history == live
    assert page.locator(".tx-log").inner_text() == text_live
    # what the live run showed, so the comparison is about something
    assert statuses == ["done", "error", "done", "stopped"]
    assert page.locator(".tx-stopped").count() == 2
    assert page.locator(".tx-tool-error").first.inner_text() == "the flags table is locked"
    assert page.locator(".tx-effects").count() == 1
    pre_tool = page.locator(".tx-flow").first.locator(":scope > .tx-content").all_inner_texts()
    if mode == "replace":
        assert [t.strip() for t in pre_tool] == ["It is ExchangeA.\n\nA deposit address."]
    else:
        assert [t.strip() for t in pre_tool] == ["Let me check.", "It is ExchangeA.\n\nA deposit address."]
    assert page.console_errors == []
