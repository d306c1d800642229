"""The service page as a place to work, in real headless Chromium against a real `tahrix serve`.

Sign in, pick the sample case, start from an example question, see the status before the first
token, read the answer with its citations line (one fabricated hash: "1 not found", marked in the
answer), the flags panel on the triage rows, the graph drawn, the conversations list across
"New conversation" and a reload. Screenshots go to docs/screens/ with TAHRIX_SCREENSHOTS=docs.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.case.workspace import Workspace, sample_case_dir

pytestmark = pytest.mark.e2e

_spec = importlib.util.spec_from_file_location(
    "_svc_helpers", Path(__file__).parent / "test_service_processes.py"
)
assert _spec is not None and _spec.loader is not None
_svc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_svc)

SCREENS = (
    Path(__file__).resolve().parents[2] / "docs" / "screens"
    if os.environ.get("TAHRIX_SCREENSHOTS") == "docs"
    else Path(tempfile.mkdtemp(prefix="tahrix-screens-"))
)
TOKEN = "work-token-abcdef0123456789abcdefghijk"
FABRICATED = "0x" + "7" * 63 + "3"  # no such transaction in the sample case
CY = "document.querySelector('#graph-panel .txp-graph').__cy"

# Every chunk the page sees, in order, and each status line it showed (a MutationObserver).
WATCH = """() => {
  window.seen = [];
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) {
      if (!(n instanceof HTMLElement)) continue;
      if (n.matches('.tx-status')) window.seen.push('status');
      if (n.matches('.tx-reasoning, .tx-content, .tx-tool')) window.seen.push('chunk');
    }
    for (const s of document.querySelectorAll('.tx-status')) window.seen.push('status:' + s.textContent);
  }).observe(document.getElementById('chat'), { childList: true, subtree: true, characterData: true });
}"""


def real_hash() -> str:
    with (sample_case_dir() / "transactions.csv").open() as f:
        return next(r["tx_hash"] for r in csv.DictReader(f) if r["chain"] == "ethereum")


@pytest.fixture(scope="module")
def triage_rows(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The sample case's triage row ids, from a workspace of its own (the server holds its database)."""
    with Workspace(str(tmp_path_factory.mktemp("triage") / "ws.duckdb")) as ws:
        return [str(r["row_id"]) for r in ws.triage(ws.load_sample_case())["rows"]]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    tokens.chmod(0o600)
    script = tmp_path / "script.json"
    answer = f"The stolen ETH left in tx {real_hash()} and then in tx {FABRICATED} to the mixer."
    script.write_text(json.dumps({"delay": 0.15, "turns": [[
        {"kind": "reasoning", "text": "Reading the case first."}, {"kind": "text", "text": answer}]]}))  # fmt: skip
    srv = _svc.Serve("--tokens-file", str(tokens), "--fake-script", str(script),
                     db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    srv.db = tmp_path / "t.duckdb"
    try:
        yield srv
    finally:
        srv.stop()


def signed_in(page: Any, url: str) -> None:
    """The page at ``url`` in a 1400x1000 window, signed in as alice."""
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(url)
    page.locator("#token").fill(TOKEN)
    page.locator("#login button[type=submit]").click()
    page.get_by_text("Signed in as alice").wait_for(timeout=15_000)


def idle(page: Any) -> None:
    page.wait_for_function(
        "() => { const r = document.querySelector('#chat .tx-flow-root'); return r && !r.classList.contains('tx-busy'); }",
        timeout=30_000,
    )


def conversation_texts(page: Any) -> list[str]:
    return list(page.locator("#conv-list .conv-q").all_inner_texts())


def test_the_page_is_a_place_to_work(page: Any, server: Any, triage_rows: list[str]) -> None:
    signed_in(page, server.url + "/")

    # the case picker holds the workspace's cases; picking one shows its examples and panels
    assert page.locator("#case option").evaluate_all("os => os.map(o => o.value)") == ["CASE-001"]
    page.locator("#case").select_option("CASE-001")
    page.locator("#examples button.example").first.wait_for(timeout=15_000)
    assert "case=CASE-001" in page.url
    assert page.locator("#conv-empty").is_visible()

    # the flags panel opens on the triage rows, the same rows the assistant works from
    page.locator("#flags-panel tr.txp-row").first.wait_for(timeout=15_000)
    shown = page.locator("#flags-panel tr.txp-row").evaluate_all("rs => rs.map(r => r.dataset.row)")
    assert shown == triage_rows and len(shown) > 5
    # the graph is drawn beside the chat, inside the window at 1400x1000
    page.wait_for_function(
        f"() => {CY} && {CY}.nodes().length > 5 && {CY}.edges().length > 5", timeout=15_000
    )
    box = page.locator("#graph-panel .txp-graph").bounding_box()
    chat_box = page.locator("#chat").bounding_box()
    assert box is not None and chat_box is not None
    assert box["x"] >= chat_box["x"] + chat_box["width"] - 1 and box["x"] + box["width"] <= 1400
    assert box["width"] >= 400 and box["height"] >= 400

    page.screenshot(path=str(SCREENS / "service-page-start.png"))

    # an example question is sent on a click; its status shows before the first token
    page.evaluate(WATCH)
    example = page.locator("#examples button.example").nth(2)
    question = example.inner_text()
    example.click()
    page.locator("#chat .tx-user").get_by_text(question).wait_for(timeout=10_000)
    page.locator("#chat .tx-content").first.wait_for(timeout=30_000)
    seen = page.evaluate("window.seen")
    first_chunk = seen.index("chunk")
    statuses = [s for s in seen[:first_chunk] if s.startswith("status:")]
    assert statuses, seen
    assert {s.split(":", 1)[1].split("…")[0] for s in statuses} <= {"Queued", "Loading the case", "Thinking"}
    assert page.locator(".tx-status").count() == 0  # gone once the answer speaks

    # the answer ends with its citations line; the fabricated hash is marked in the answer
    line = page.locator("#chat .tx-citations-line")
    line.wait_for(timeout=30_000)
    idle(page)
    assert line.inner_text() == "1 citation verified · 1 not found"
    marked = page.locator('#chat .tx-content mark.tx-cite-mark[data-status="not_found"]')
    assert marked.count() == 1
    assert marked.first.get_attribute("data-text") == FABRICATED
    line.click()  # opens the list: the not-found citation first
    assert page.locator("#chat .tx-citation").first.get_attribute("data-status") == "not_found"
    page.screenshot(path=str(SCREENS / "service-page.png"))

    # the conversation is listed; "New conversation" keeps it reachable, and a click loads it
    page.wait_for_function("() => document.querySelectorAll('#conv-list li').length === 1", timeout=15_000)
    first_session = page.evaluate("window.tahrixChat.sessionId")
    assert conversation_texts(page) == [question]
    assert page.locator("#conv-list li.active").count() == 1
    page.locator("#new-chat").click()
    assert page.locator("#chat .tx-user").count() == 0
    assert "session=" not in page.url
    assert conversation_texts(page) == [question]
    page.locator("#chat textarea.tx-text").fill("Which flags matter most?")
    page.locator("#chat textarea.tx-text").press("Enter")
    page.wait_for_function("() => document.querySelectorAll('#conv-list li').length === 2", timeout=30_000)
    idle(page)
    assert conversation_texts(page) == ["Which flags matter most?", question]  # newest first
    assert page.locator("#conv-list .conv-meta").first.inner_text().startswith("CASE-001 · ")
    page.locator("#conv-list li").nth(1).locator("button").click()
    page.locator("#chat .tx-user").get_by_text(question).wait_for(timeout=15_000)
    assert page.evaluate("window.tahrixChat.sessionId") == first_session
    assert f"session={first_session}" in page.url
    assert page.locator("#chat .tx-user").count() == 1
    # read again, the answer keeps its citations line and its mark
    assert page.locator("#chat .tx-citations-line").inner_text() == "1 citation verified · 1 not found"
    assert page.locator('#chat .tx-content mark.tx-cite-mark[data-status="not_found"]').count() == 1

    # a reload keeps the list, the case, the conversation
    page.reload()
    page.wait_for_function("() => document.querySelectorAll('#conv-list li').length === 2", timeout=15_000)
    assert conversation_texts(page) == ["Which flags matter most?", question]
    page.locator("#chat .tx-user").get_by_text(question).wait_for(timeout=15_000)
    assert page.locator("#case").input_value() == "CASE-001"
    page.locator("#flags-panel tr.txp-row").first.wait_for(timeout=15_000)
    assert page.console_errors == []


def test_a_row_click_focuses_the_graph_and_an_unknown_case_is_refused(page: Any, server: Any) -> None:
    signed_in(page, server.url + "/?case=NOPE")
    # a case one may not open falls back to the first one listed
    page.locator("#flags-panel tr.txp-row").first.wait_for(timeout=15_000)
    assert page.locator("#case").input_value() == "CASE-001"
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length > 5", timeout=15_000)
    row = page.locator("#flags-panel tr.txp-row").first
    addresses = page.evaluate(
        "async (t) => (await (await fetch('/api/v1/agent/cases/CASE-001/flags',"
        " {headers: {Authorization: 'Bearer ' + t}})).json()).rows[0].addresses",
        TOKEN,
    )
    row.click()
    page.wait_for_function(f"() => {CY}.nodes(':selected').length > 0", timeout=10_000)
    selected = page.evaluate(f"() => {CY}.nodes(':selected').map(n => n.id())")
    assert set(selected) <= set(addresses) and selected
    # one node selected: its details are open, with "Trace onward" as in a notebook
    assert len(selected) == 1  # the first triage row is one address (the suspect)
    before = page.evaluate(f"() => {CY}.nodes().length")
    page.locator("#graph-panel .txp-trace").click()
    page.locator("#graph-panel .txp-note").get_by_text("Traced onward from").wait_for(timeout=20_000)
    assert page.evaluate(f"() => {CY}.nodes().length") >= before
    assert page.locator("#graph-panel .txp-error").is_hidden()
    assert page.console_errors == []


def test_an_analyst_confirms_a_flag_on_the_page(page: Any, server: Any) -> None:
    signed_in(page, server.url + "/?case=CASE-001")
    row = page.locator("#flags-panel tr.txp-row").first
    row.wait_for(timeout=15_000)
    row.click()
    flag = page.locator("#flags-panel tr.txp-evidence .txp-flag").first
    flag_id = flag.get_attribute("data-flag")
    # the side panel is narrower than the table's columns: nothing of the opened row is out of view
    assert page.locator("#flags-panel .txp-triage-scroll").evaluate("s => s.scrollWidth <= s.clientWidth")
    flag.locator('.txp-decide[data-action="confirm_flag"]').click()
    page.locator("#flags-panel tr.txp-row td.txp-status", has_text="confirmed").first.wait_for(timeout=15_000)
    confirmed = page.locator(f'#flags-panel .txp-flag[data-flag="{flag_id}"]')
    assert "confirmed" in confirmed.inner_text()
    assert confirmed.locator('.txp-decide[data-action="confirm_flag"]').count() == 0  # done: Dismiss is left
    assert page.locator("#flags-panel .txp-error").is_hidden()
    # a refusal shows calmly in the panel and gives the buttons back (the service stops answering)
    page.route(
        "**/decision", lambda route: route.fulfill(status=503, json={"detail": "The service is busy."})
    )
    confirmed.locator('.txp-decide[data-action="dismiss_flag"]').click()
    error = page.locator("#flags-panel .txp-error")
    error.wait_for(timeout=10_000)
    assert error.inner_text() == f"Dismissing {flag_id} was not recorded: The service is busy."
    assert confirmed.locator(".txp-decide:not(:disabled)").count() == 1
    assert [
        e for e in page.console_errors if "status of 503" not in e
    ] == []  # the browser logs the 503 itself
    # the service answers again: the dismissed flag leaves the triage, and Undo brings it back
    page.unroute("**/decision")
    kind = confirmed.locator(".txp-flag-type").inner_text()
    confirmed.locator('.txp-decide[data-action="dismiss_flag"]').click()
    notice = page.locator("#flags-panel .txp-notice")
    notice.get_by_text(f"Dismissed {flag_id} ({kind}).").wait_for(timeout=15_000)  # what it was, too
    assert page.locator("#flags-panel .txp-error").is_hidden()
    notice.locator(".txp-undo").click()
    notice.wait_for(state="hidden", timeout=15_000)
    assert "confirmed" in page.locator(f'#flags-panel .txp-flag[data-flag="{flag_id}"]').inner_text()


def test_a_plain_chat_service_shows_the_chat_without_case_panels(page: Any, tmp_path: Path) -> None:
    from tahrix_lab.app import workplace
    from tahrix_lab.jobs.http.api import create_app
    from tahrix_lab.jobs.server import Settings, build
    from tests.jobs.conftest import AppServer

    built = build(
        Settings(tokens={TOKEN: "bob"}, db=str(tmp_path / "t.duckdb"), backend="fake", fake_script="echo"),
        extend=workplace.mount,
    )
    assert built.service is not None
    try:
        with AppServer(create_app(built.service)) as srv:
            page.set_viewport_size({"width": 1400, "height": 1000})
            page.goto(srv.url + "/")
            page.locator("#token").fill(TOKEN)
            page.locator("#login button[type=submit]").click()
            page.get_by_text("Signed in as bob").wait_for(timeout=15_000)
            page.wait_for_function("() => document.getElementById('work').classList.contains('no-cases')")
            assert page.locator("#case-picker").is_hidden() and page.locator("#side").is_hidden()
            assert page.locator("#examples").is_hidden()
            box = page.locator("#chat textarea.tx-text")
            box.fill("Hello there")
            box.press("Enter")
            page.get_by_text("You asked: Hello there").wait_for(timeout=20_000)
            idle(page)
            page.wait_for_function(
                "() => document.querySelectorAll('#conv-list li').length === 1", timeout=15_000
            )
            assert conversation_texts(page) == ["Hello there"]
            assert page.locator("#chat .tx-citations").count() == 0  # plain chat: no case to check against
            assert page.console_errors == []
    finally:
        built.close()


@pytest.fixture(scope="module")
def fourth_row(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The sample case's fourth triage row and its first flag (flag ids are the same on every load)."""
    with Workspace(str(tmp_path_factory.mktemp("fourth") / "ws.duckdb")) as ws:
        row = ws.triage(ws.load_sample_case())["rows"][3]
        return {"row_id": str(row["row_id"]), "flag_id": str(row["flags"][0]["flag_id"])}


def test_a_flag_id_in_the_answer_opens_its_row_in_the_flags_panel(
    page: Any, tmp_path: Path, fourth_row: dict[str, str]
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    tokens.chmod(0o600)
    script = tmp_path / "script.json"
    answer = f"Start with flag {fourth_row['flag_id']}; flag `FLG-0000000000` is not in this case."
    script.write_text(json.dumps({"turns": [[{"kind": "text", "text": answer}]]}))
    srv = _svc.Serve("--tokens-file", str(tokens), "--fake-script", str(script),
                     db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        signed_in(page, srv.url + "/?case=CASE-001")
        page.locator("#flags-panel tr.txp-row").first.wait_for(timeout=15_000)
        assert page.locator("#flags-panel tr.txp-row.txp-selected").count() == 0
        page.locator("#chat textarea.tx-text").fill("Which flag first?")
        page.locator("#chat textarea.tx-text").press("Enter")
        page.locator("#chat .tx-content .tx-flag-chip").first.wait_for(timeout=30_000)
        idle(page)
        chips = page.locator("#chat .tx-content .tx-flag-chip")
        assert chips.evaluate_all("cs => cs.map(c => c.dataset.value)") == [
            fourth_row["flag_id"],
            "FLG-0000000000",
        ]

        chips.nth(0).locator("button").click()  # its row opens, selected, the flag marked in it
        selected = page.locator("#flags-panel tr.txp-row.txp-selected")
        selected.wait_for(timeout=5_000)
        assert selected.get_attribute("data-row") == fourth_row["row_id"]
        marked = page.locator(f'#flags-panel .txp-flag.txp-selected[data-flag="{fourth_row["flag_id"]}"]')
        assert marked.count() == 1 and marked.is_visible()
        assert "tx-missing" not in (chips.nth(0).get_attribute("class") or "")
        assert chips.locator("a").count() == 0  # no explorer knows a flag id (verified: its chain is bsc)

        chips.nth(1).locator("button").click()  # no panel holds it: the chip says so, nothing moves
        page.wait_for_function("() => document.querySelectorAll('.tx-flag-chip.tx-missing').length === 1")
        assert (
            chips.nth(1).locator("button").get_attribute("title")
            == "No flags panel of this case is open here"
        )
        assert selected.get_attribute("data-row") == fourth_row["row_id"]
        page.screenshot(path=str(SCREENS / "service-page-flag-link.png"))
        assert page.console_errors == []
    finally:
        srv.stop()
