"""ChatWidget end to end: real JupyterLab, real kernel, real Chromium, real keystrokes."""

from __future__ import annotations

import json
import time
import urllib.error
from pathlib import Path
from typing import Any

import duckdb
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
JupyterLab = Any  # the jupyter_lab fixture's type, see conftest.py

CELL = """
import time
from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.lab.widget import ChatWidget

store = TranscriptStore({db!r})
tools = ToolRegistry()

@tools.register(parameters={{"type": "object", "properties": {{"address": {{"type": "string"}}}}, "required": ["address"]}})
def lookup_address(args, ctx):
    "Look an address up in the case labels."
    time.sleep(1.0)  # slow enough to see it running
    return {{"address": args["address"], "label": "Exchange hot wallet", "category": "exchange"}}

def paced(*events):
    def turn(messages, specs):
        for event in events:
            time.sleep(0.15)  # stream like a model, so chunks arrive live one by one
            yield event
    return turn

backend = FakeBackend([
    paced(reasoning("The analyst asks about 0xabc. "), reasoning("I should look it up."),
          tool_call("lookup_address", {{"address": "0xabc"}}, id="call_1")),
    paced(text("The address **0xabc** is an "), text("exchange hot wallet."), text(" It is labelled as such.")),
])
chat = ChatWidget(store=store, backend=backend, model="fake-model", registry=tools)
chat
"""

ORDER_JS = """() => [...document.querySelectorAll('.tx-chat .tx-flow')].map(flow =>
  [...flow.children].filter(el => !el.hidden).map(el =>
    [...el.classList].find(c => c !== 'tx-block' && c.startsWith('tx-')).slice(3)))"""


def open_notebook(page: Any, lab: JupyterLab, name: str) -> None:
    page.set_default_timeout(90_000)
    page.goto(lab.lab_url(name))
    page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.wait_for()
    # The toolbar names the kernel before it is connected: wait for the server
    # to see the page's connection and for the page to show the kernel idle.
    deadline = time.monotonic() + 90
    while not kernel_ready(lab):
        assert time.monotonic() < deadline, "the notebook's kernel never became ready"
        time.sleep(0.3)
    page.locator(".jp-Toolbar-kernelName", has_text="Tahrix test").first.wait_for()
    page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first.wait_for()


def kernel_ready(lab: JupyterLab) -> bool:
    try:
        kernels = lab.api("GET", "/api/kernels")
    except urllib.error.HTTPError:  # the server fails to list a kernel that is still starting
        return False
    return any(k.get("connections", 0) >= 1 and k.get("execution_state") == "idle" for k in kernels)


def run_first_cell(page: Any) -> None:
    """Shift+Enter in the first cell; pressed again only if the cell never started."""
    prompt = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt")
    for _ in range(3):
        page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(
                "(el) => /\\[(\\*|\\d+)\\]/.test(el.textContent)", arg=prompt.element_handle(), timeout=10_000
            )
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError("the notebook never ran the cell")


def test_chat_widget_in_jupyterlab(jupyter_lab: JupyterLab, page: Any) -> None:
    try:
        check_chat_widget(jupyter_lab, page)
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab-chat-widget-failure.png"), full_page=True)
        raise


def check_chat_widget(jupyter_lab: JupyterLab, page: Any) -> None:
    db = jupyter_lab.root / "chat.duckdb"
    jupyter_lab.write_notebook("chat.ipynb", [CELL.format(db=str(db))])
    open_notebook(page, jupyter_lab, "chat.ipynb")
    run_first_cell(page)

    box = page.locator(".tx-chat .tx-text")
    box.wait_for()
    assert page.locator(".jp-OutputArea-output", has_text="Failed to load model class").count() == 0
    box.click()
    page.keyboard.type("What is 0xabc?")
    page.locator(".tx-chat .tx-send").click()

    # live: the tool shows as running before its result arrives
    page.locator('.tx-chat .tx-tool[data-status="running"]').wait_for()
    page.evaluate("() => { window.__tool = document.querySelector('.tx-chat .tx-tool'); }")
    page.locator('.tx-chat .tx-flow[data-status="done"]').wait_for()
    # the run's snapshot arrived at the seq this view had drawn, so it kept its DOM
    page.wait_for_function("() => !document.querySelector('.tx-chat .tx-send').disabled")
    assert page.evaluate("() => window.__tool.isConnected")

    assert page.locator(".tx-chat .tx-bubble").inner_text() == "What is 0xabc?"
    order = page.evaluate(ORDER_JS)
    assert order == [["reasoning", "tool", "usage", "content", "usage"]]
    assert "I should look it up." in page.locator(".tx-chat .tx-reasoning-text").text_content()
    tool = page.locator(".tx-chat .tx-tool")
    assert tool.get_attribute("data-status") == "done"
    assert tool.locator(".tx-tool-name").inner_text() == "lookup_address"
    assert "Exchange hot wallet" in tool.locator(".tx-tool-result pre").text_content()
    answer = page.locator(".tx-chat .tx-content")
    assert (
        answer.inner_text().strip() == "The address 0xabc is an exchange hot wallet. It is labelled as such."
    )
    assert answer.locator("strong").inner_text() == "0xabc"
    assert page.locator(".tx-chat .tx-dots").is_hidden()
    assert page.locator(".tx-chat .tx-send").is_enabled()

    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".tx-chat .tx-tool-result > summary").click()  # show the result in the screenshot
    page.locator(".tx-chat").screenshot(path=str(ARTIFACTS / "jupyterlab-chat-widget.png"))
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-chat-page.png"))

    # The conversation lives in a synced trait: after saving (so the output
    # refers to the widget) a reloaded page shows it all again from the kernel.
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')")
    page.reload()
    page.locator('.tx-chat .tx-flow[data-status="done"]').wait_for()
    assert page.evaluate(ORDER_JS) == [["reasoning", "tool", "usage", "content", "usage"]]

    # the transcript is in DuckDB (read once the kernel has released the file)
    jupyter_lab.shutdown_kernels()
    assert_transcript(db)


def assert_transcript(db: Path) -> None:
    with duckdb.connect(str(db), read_only=True) as conn:
        sessions = conn.execute("SELECT id FROM sessions").fetchall()
        assert len(sessions) == 1
        rows = conn.execute(
            "SELECT m.position, m.role, p.type, p.text, p.tool_name, p.tool_result "
            "FROM messages m JOIN parts p ON p.session_id = m.session_id AND p.message_position = m.position "
            "ORDER BY m.position, p.position"
        ).fetchall()
    shape = [(pos, role, kind) for pos, role, kind, *_ in rows]
    assert shape == [
        (0, "user", "text"),
        (1, "assistant", "reasoning"),
        (1, "assistant", "tool_use"),
        (2, "tool", "tool_result"),
        (3, "assistant", "text"),
    ]
    assert rows[0][3] == "What is 0xabc?"
    assert json.loads(rows[3][5])["label"] == "Exchange hot wallet"
    assert rows[4][3] == "The address **0xabc** is an exchange hot wallet. It is labelled as such."


PANELS_CELL = """
import time
from IPython.display import display
from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.lab import ChatWidget, FlagsPanel, FlowGraphPanel

store = TranscriptStore({db!r})
tools = ToolRegistry()
flags_data, graph_data = [], {{"nodes": [], "edges": []}}
ADDRESS = {{"type": "object", "properties": {{"address": {{"type": "string"}}}}, "required": ["address"]}}

@tools.register(parameters=ADDRESS)
def flag_address(args, ctx):
    "Flag an address."
    flags_data.append({{"flag_id": "F1", "flag_type": "peel_chain", "severity": "high", "score": 0.9,
                       "address": args["address"], "status": "new"}})
    return {{"flag_id": "F1", "_effects": [{{"type": "flags_changed", "case_id": "demo"}}]}}

@tools.register(parameters=ADDRESS)
def trace(args, ctx):
    "Trace funds from an address."
    graph_data["nodes"] = [{{"id": args["address"], "label": "Thief", "category": "perpetrator"}},
                           {{"id": "0xcex", "label": "Exchange", "category": "exchange"}}]
    graph_data["edges"] = [{{"source": args["address"], "target": "0xcex", "usd": 1000, "tx_hash": "0x1"}}]
    return {{"nodes": 2, "_effects": [{{"type": "trace_ready", "case_id": "demo"}}]}}

def paced(*events, delay=0.15):
    def turn(messages, specs):
        for event in events:
            time.sleep(delay)
            yield event
    return turn

backend = FakeBackend([
    paced(tool_call("flag_address", {{"address": "0xthief"}}), tool_call("trace", {{"address": "0xthief"}})),
    paced(text("Flagged and traced.")),
    paced(*[text(f"word{{i}} ") for i in range(300)], delay=0.2),
    paced(text("Asked "), text("from a cell, "), *[text(f"more{{i}} ") for i in range(300)], delay=0.2),
    paced(text("Answered once the kernel was free.")),
])
chat = ChatWidget(store=store, backend=backend, model="fake-model", registry=tools)
flags = FlagsPanel(lambda: flags_data, title="Flags").follow(chat)
flow = FlowGraphPanel(lambda: graph_data, title="Fund flow").follow(chat)
display(chat, flags, flow)
"""


def test_panels_follow_the_chat_and_stop_works(jupyter_lab: JupyterLab, page: Any) -> None:
    try:
        check_panels_and_stop(jupyter_lab, page)
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab-panels-failure.png"), full_page=True)
        raise


def ask(page: Any, text: str) -> None:
    page.locator(".tx-chat .tx-text").click()
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def check_panels_and_stop(jupyter_lab: JupyterLab, page: Any) -> None:
    db = jupyter_lab.root / "panels.duckdb"
    jupyter_lab.write_notebook(
        "panels.ipynb",
        [
            PANELS_CELL.format(db=str(db)),
            'answer = chat.ask("And from Python?")\nprint("answer:", answer[:30])',
            'import time\ntime.sleep(6)\nprint("slept")',
        ],
    )
    open_notebook(page, jupyter_lab, "panels.ipynb")
    run_first_cell(page)
    page.locator(".tx-chat .tx-text").wait_for()
    assert page.locator(".txp-table .txp-empty").inner_text() == "No flags."
    assert page.locator(".txp-panel .txp-empty").last.inner_text() == "No traced flows yet."

    ask(page, "Flag 0xthief and trace it")
    page.locator('.tx-chat .tx-flow[data-status="done"]').wait_for()
    # the tools' effects refreshed both panels
    page.locator(".txp-table td.txp-flag_id", has_text="F1").wait_for()
    assert page.locator(".txp-table td.txp-subject").all_inner_texts() == ["0xthief"]
    page.wait_for_function(
        "() => { const g = document.querySelector('.txp-graph'); return g && g.__cy && g.__cy.nodes().length === 2; }"
    )
    assert "Changed: flags changed" in page.locator(".tx-chat .tx-effects").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".jp-OutputArea").first.screenshot(path=str(ARTIFACTS / "jupyterlab-panels.png"))

    # the stop button ends a run mid-stream; the partial answer stays
    ask(page, "Write a long report")
    page.locator(".tx-chat .tx-flow").nth(1).locator(".tx-content").wait_for()
    page.locator(".tx-chat .tx-stop").click()
    page.locator('.tx-chat .tx-flow[data-status="cancelled"]').wait_for()
    assert page.locator(".tx-chat .tx-stopped").is_visible()
    assert page.locator(".tx-chat .tx-stop").is_hidden()
    shown = page.locator(".tx-chat .tx-flow").nth(1).locator(".tx-content").inner_text()
    assert shown.startswith("word0 ")
    assert "word299" not in shown

    # ask() from a cell blocks that cell, yet the widget streams while it runs,
    # and its Stop button works (the wait keeps handling the widget's messages)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    third = page.locator(".tx-chat .tx-flow").nth(2)
    third.locator(".tx-content", has_text="more3 ").wait_for()
    assert "[*]" in cell.locator(".jp-InputPrompt").inner_text()  # the cell is still running
    page.locator(".tx-chat .tx-stop").click()
    cell.locator(".jp-OutputArea-output", has_text="answer: Asked from a cell, more0").wait_for(
        timeout=20_000
    )
    assert third.get_attribute("data-status") == "cancelled"
    assert "more299" not in third.inner_text()

    # Send while another cell keeps the kernel busy: the question shows at once, waiting
    sleeper = page.locator(".jp-Notebook .jp-Cell").nth(2)
    sleeper.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        "(el) => /\\[\\*\\]/.test(el.textContent)", arg=sleeper.locator(".jp-InputPrompt").element_handle()
    )
    ask(page, "Are you there?")
    fourth = page.locator(".tx-chat .tx-flow").nth(3)
    assert page.locator(".tx-chat .tx-bubble").last.inner_text() == "Are you there?"
    fourth.locator(".tx-waiting", has_text="Waiting for the kernel").wait_for(timeout=2_000)
    fourth.locator(".tx-content", has_text="Answered once the kernel was free.").wait_for()
    assert fourth.locator(".tx-waiting").count() == 0
    assert sleeper.locator(".jp-OutputArea-output", has_text="slept").count() == 1
    assert page.locator(".tx-chat .tx-bubble").count() == 4  # the waiting question was not drawn twice

    jupyter_lab.shutdown_kernels()
    with duckdb.connect(str(db), read_only=True) as conn:
        calls = conn.execute(
            "SELECT m.stop_reason, string_agg(p.text, '' ORDER BY p.position) FROM messages m "
            "LEFT JOIN parts p ON p.session_id = m.session_id AND p.message_position = m.position AND p.type = 'text' "
            "WHERE m.role = 'assistant' GROUP BY m.position, m.stop_reason ORDER BY m.position"
        ).fetchall()
    assert [reason for reason, _ in calls] == ["tool_use", "end_turn", "cancelled", "cancelled", "end_turn"]
    partial = calls[2][1]
    assert partial.startswith("word0 ") and "word299" not in partial
    assert calls[3][1].startswith("Asked from a cell, more0") and "more299" not in calls[3][1]
    assert calls[4][1] == "Answered once the kernel was free."
