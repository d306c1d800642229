"""notebooks/01_investigate_case.ipynb, Run All in a real JupyterLab and a real Notebook 7.

The notebook must end with its widgets on the page and the investigation
answered: the chat shows the answer (with the usage meter, since the notebook
sets a budget), the flags table has rows, the fund-flow graph is drawn, and
"Trace onward" from a node works through the case tools.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_jupyterlab_widget import ARTIFACTS, kernel_ready

pytestmark = pytest.mark.e2e

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_investigate_case.ipynb"
CY = "document.querySelector('.txp-graph').__cy"


def copy_notebook(server: Any, name: str) -> None:
    nb = json.loads(NOTEBOOK.read_text())
    nb["metadata"]["kernelspec"] = {
        "name": server.kernel_name,
        "display_name": "Tahrix test",
        "language": "python",
    }
    (server.root / name).write_text(json.dumps(nb))


def wait_kernel(server: Any) -> None:
    deadline = time.monotonic() + 90
    while not kernel_ready(server):
        assert time.monotonic() < deadline, "the notebook's kernel never became ready"
        time.sleep(0.3)


def run_all(page: Any) -> None:
    """Run ▸ Run All Cells, from the menu bar (the same menu in JupyterLab 4 and Notebook 7)."""
    page.locator(".jp-Notebook .jp-Cell").first.click()  # the notebook is the active widget
    for _ in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        item = page.locator(".lm-Menu-item:not(.lm-mod-disabled)", has_text="Run All Cells").first
        try:
            item.wait_for(timeout=5_000)
        except Exception:
            page.keyboard.press("Escape")
            continue
        item.click()
        return
    raise AssertionError("Run All Cells never became available")


def check_notebook_01(page: Any, server: Any, url: str, shot: str) -> None:
    page.set_default_timeout(120_000)
    page.goto(url)
    page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.wait_for()
    wait_kernel(server)
    if server.app == "jupyterlab":
        page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first.wait_for()
    else:
        page.wait_for_timeout(1_000)  # Notebook 7 has no execution indicator: the API said idle
    run_all(page)

    chat = page.locator(".tx-chat")
    chat.locator('.tx-flow[data-status="done"]').wait_for(timeout=180_000)
    # every cell ran (the last code cell is the costs table), the kernel is idle again
    page.locator(".jp-Cell:last-child").wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
        ".every(p => /\\[\\d+\\]/.test(p.textContent))",
        timeout=120_000,
    )
    assert page.locator(".jp-OutputArea-output", has_text="Failed to load model class").count() == 0
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0

    answer = chat.locator(".tx-content").last
    assert answer.is_visible()
    assert len(answer.inner_text().strip()) > 80
    assert chat.locator(".tx-tool").count() >= 3
    assert chat.locator('.tx-tool[data-status="done"]').count() >= 3
    assert chat.locator(".tx-tool-call", has_text="trace_funds(").count() >= 1
    assert chat.locator(".tx-meter").is_visible()  # the notebook sets a budget

    flags = page.locator(".txp-table tbody tr")
    assert flags.count() > 10
    assert page.locator(".txp-table").is_visible()

    graph = page.locator(".txp-graph")
    graph.scroll_into_view_if_needed()
    assert graph.is_visible()
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length > 3")
    before = page.evaluate(f"() => {CY}.nodes().length")
    labels = page.evaluate(f"() => {CY}.nodes().map(n => n.data('display'))")
    assert len(set(labels)) == len(labels)  # one node per address, told apart by the short address
    assert page.evaluate(f"() => {CY}.edges().some(e => /^[\\d,.]+ ETH · \\$/.test(e.data('display')))")

    # tap a node that is not an endpoint and trace onward from it (a real mouse
    # click on the canvas is tested in test_renderer_browser; here a click in an
    # output can make the notebook scroll to the cell under the pointer)
    node_id = page.evaluate(f"() => {CY}.nodes('[endpoint = \"no\"]').last().id()")
    page.evaluate(f"(id) => {CY}.getElementById(id).emit('tap')", node_id)
    page.locator(".txp-drawer .txp-trace").click()
    page.locator(".txp-note", has_text="Traced onward from").wait_for()
    assert page.locator(".txp-error").first.inner_text() == ""
    assert page.evaluate(f"() => {CY}.nodes().length") >= before

    # a follow-up typed into the chat's text box gets a real answer offline, from the tools it calls
    box = chat.locator(".tx-text")
    box.scroll_into_view_if_needed()
    box.click()
    page.keyboard.type("How much was stolen?")
    page.keyboard.press("Enter")
    second = chat.locator(".tx-flow").nth(1)
    second.locator(".tx-content").wait_for()
    chat.locator('.tx-flow[data-status="done"]').nth(1).wait_for(timeout=60_000)
    assert second.locator(".tx-error").count() == 0
    assert second.locator(".tx-tool-call", has_text="list_transfers(").count() == 1
    reply = second.locator(".tx-content").last.inner_text()
    assert "received 48,000 ETH ($156.6M)" in reply and "21,500,000 USDC ($21.5M)" in reply, reply

    # the assistant's grant is read-only ("please confirm it yourself"): the analyst confirms from the panel
    row = page.locator(".txp-triage tr.txp-row").first
    row.scroll_into_view_if_needed()
    row.click()
    flag = page.locator(".txp-triage tr.txp-evidence .txp-flag").first
    flag.locator('.txp-decide[data-action="confirm_flag"]').click()
    page.locator(".txp-triage tr.txp-row td.txp-status", has_text="confirmed").first.wait_for(timeout=30_000)
    assert page.locator(".txp-triage .txp-flag", has_text="confirmed").count() == 1
    assert page.locator(".txp-panel .txp-error").first.inner_text() == ""

    # a flag id in the answer is a link: the flags panel (another output of the notebook) opens it
    chip = chat.locator(".tx-content .tx-flag-chip").first
    flag_id = chip.get_attribute("data-value")
    chip.locator("button").click()
    page.locator(
        f'.txp-panel .txp-flag.txp-selected[data-flag="{flag_id}"], .txp-panel tr[data-flag="{flag_id}"]'
    ).first.wait_for(state="visible", timeout=10_000)
    assert "tx-missing" not in (chip.get_attribute("class") or "")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)


@pytest.mark.parametrize("app", ["jupyter_lab", "notebook7"], ids=["jupyterlab4", "notebook7"])
def test_notebook_01_runs_all(app: str, page: Any, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(app)
    copy_notebook(server, "investigate.ipynb")
    try:
        check_notebook_01(page, server, server.lab_url("investigate.ipynb"), f"notebook-01-{server.app}.png")
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"notebook-01-{server.app}-failure.png"), full_page=True)
        raise
    finally:
        server.shutdown_kernels()


SLOW_CHAT = """
import time
from tahrix_lab.agent import FakeBackend, TranscriptStore
from tahrix_lab.agent.backends.fake import text
from tahrix_lab.lab import ChatWidget

def slow(messages, specs):
    for i in range(120):
        time.sleep(0.1)  # a slow model: 12 s of words
        yield text(f"w{{i}} ")

chat = ChatWidget(store=TranscriptStore({db!r}), backend=FakeBackend([slow]), model="fake-model")
chat
"""
ASK = 'answer = chat.ask("Tell me slowly", timeout=120)\nprint("answer done:", len(answer.split()))'


def test_a_view_that_renders_late_streams_while_ask_blocks(jupyter_lab: Any, page: Any) -> None:
    """Run All on a freshly opened page: the chat renders after the answer started streaming (its
    first live messages are lost), yet words show while the next cell is still blocked in ask()."""
    for run in range(3):
        name = f"late-{run}.ipynb"
        jupyter_lab.write_notebook(
            name, [SLOW_CHAT.format(db=str(jupyter_lab.root / f"late-{run}.duckdb")), ASK]
        )
        try:
            page.set_default_timeout(90_000)
            page.goto(jupyter_lab.lab_url(name))  # ?reset: a fresh page, no tabs from before
            page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.wait_for()
            wait_kernel(jupyter_lab)
            page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first.wait_for()
            run_all(page)
            ask_cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
            content = page.locator(".tx-chat .tx-content")
            content.wait_for(timeout=60_000)
            page.wait_for_function(
                "() => { const c = document.querySelector('.tx-chat .tx-content');"
                " return c && c.textContent.split(' ').filter(Boolean).length >= 5; }"
            )
            shown = len(content.inner_text().split())
            # ask() still blocks: its cell runs and has not printed; the view has part of the answer
            assert "[*]" in ask_cell.locator(".jp-InputPrompt").inner_text(), f"run {run}"
            assert ask_cell.locator(".jp-OutputArea-output", has_text="answer done").count() == 0, (
                f"run {run}"
            )
            assert 5 <= shown < 120, f"run {run}: {shown} words"
            # and it keeps streaming: more words arrive while the cell is still blocked
            page.wait_for_function(
                "(n) => document.querySelector('.tx-chat .tx-content').textContent.split(' ').filter(Boolean).length > n",
                arg=shown,
            )
            assert ask_cell.locator(".jp-OutputArea-output", has_text="answer done").count() == 0, (
                f"run {run}"
            )
            if run == 0:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "late-joined-streaming.png"))  # the ask cell still [*]
            ask_cell.locator(".jp-OutputArea-output", has_text="answer done: 120").wait_for(timeout=60_000)
            page.locator('.tx-chat .tx-flow[data-status="done"]').wait_for()
            assert content.inner_text().split() == [f"w{i}" for i in range(120)]
            assert page.locator(".tx-chat .tx-flow").count() == 1  # one turn, drawn once
        except BaseException:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"late-join-{run}-failure.png"), full_page=True)
            raise
        finally:
            jupyter_lab.shutdown_kernels()
