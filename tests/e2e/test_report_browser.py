"""The citations line and the case report in real headless Chromium."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.backends import FakeBackend
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.flow import chunks

pytestmark = pytest.mark.e2e

A0 = "0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"
THEFT = "0xa00e454744c27038e25604c3fa67aa83fc581ac37448e865275d2d96bdfd5efd"
FABRICATED = "0x" + "ab" * 32
ANSWER = (
    f"The attacker `{A0}` withdrew **480,000 ETH** in [the forged withdrawal](https://etherscan.io/tx/{THEFT}) "
    f"and 21.5M USDC.\n\nIt then sent funds to the mixer in {FABRICATED}."
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    w = Workspace(tmp_path_factory.mktemp("report") / "ws.duckdb")
    w.load_sample_case()
    yield w
    w.close()


def scripted_chunks(ws: Workspace) -> list[dict[str, Any]]:
    backend = FakeBackend([[tool_call("get_case_overview", {})], [text(ANSWER)]])
    session = ws.start_investigation("CASE-001", user="ana")
    return [
        {"type": "user", "text": "Where did it go?"},
        *chunks(ws.ask(session, "Where did it go?", backend=backend, model="fake")),
    ]


MOUNT_CITATIONS = """async (base) => {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = base + '/citations.css';
  document.head.appendChild(link);
  await new Promise((resolve) => { link.onload = resolve; link.onerror = resolve; });
  await import(base + '/citations.js');
  return typeof globalThis.txCitations;
}"""


def test_the_citations_line_opens_the_list_and_marks_the_answer(
    page: Any, mount_flow: Any, widgets_url: str, ws: Workspace
) -> None:
    feed = scripted_chunks(ws)
    assert [c["type"] for c in feed][-2:] == ["citations", "done"]
    mount_flow(page)
    assert page.evaluate(MOUNT_CITATIONS, widgets_url) == "function"
    page.evaluate("(chunks) => chunks.forEach(c => window.flow.push(c))", feed)
    line = page.locator(".tx-citations summary")
    assert line.inner_text().strip() == "3 citations verified · 2 not found"
    before = "el => getComputedStyle(el, '::before').content"
    assert page.eval_on_selector(".tx-citations-line", before) == '"✗ "'  # the CSS marks a line with problems
    marks = page.eval_on_selector_all(
        ".tx-content mark.tx-cite-mark", "els => els.map(e => [e.dataset.text, e.dataset.status])"
    )
    assert sorted(marks) == sorted([[FABRICATED, "not_found"], ["480,000 ETH", "not_found"]])
    assert not page.locator(".tx-citations-list").is_visible()  # closed until asked
    line.click()
    rows = page.eval_on_selector_all(
        ".tx-citation", "els => els.map(e => [e.dataset.status, e.querySelector('code').textContent])"
    )
    assert rows[:2] == [["not_found", "480,000 ETH"], ["not_found", FABRICATED]]
    assert {r[1] for r in rows[2:]} == {A0, THEFT, "21.5M USDC"}
    evidence = page.locator(".tx-citation[data-status=verified]", has_text=THEFT).inner_text()
    assert "transactions" in evidence and "ethereum" in evidence
    assert page.console_errors == []


def test_a_bare_hash_in_the_answer_is_a_chip_linked_to_the_chain_the_case_holds_it_on(
    page: Any, mount_flow: Any, widgets_url: str, ws: Workspace
) -> None:
    """A Bitcoin or Tron hash is 64 hex digits with no prefix: the text alone cannot say which
    explorer shows it. It is a chip (short, copied whole on a click) at once, and gets its
    explorer link when the citations line says which chain the case holds it on."""
    btc, tron = (
        ws.cases.scalar(
            "SELECT min(tx_hash) FROM transfers WHERE case_id = 'CASE-001' AND chain = ?", [chain]
        )
        for chain in ("bitcoin", "tron")
    )
    unknown = "cd" * 32  # a bare hash the case does not hold: a chip, never linked, marked not found
    answer = f"The peel chain starts in tx {btc}; the Tron leg is {tron}. Also {unknown}."
    backend = FakeBackend([[text(answer)]])
    session = ws.start_investigation("CASE-001", user="ana")
    feed = [{"type": "user", "text": "q"}, *chunks(ws.ask(session, "q", backend=backend, model="fake"))]
    mount_flow(page)
    assert page.evaluate(MOUNT_CITATIONS, widgets_url) == "function"
    page.evaluate(
        "(chunks) => chunks.slice(0, -2).forEach(c => window.flow.push(c))", feed
    )  # before the line
    chips = page.locator(".tx-content .tx-chip")
    assert [c.get_attribute("data-value") for c in chips.all()] == [btc, tron, unknown]
    assert chips.nth(0).locator(".tx-chip-text").inner_text() == f"{btc[:5]}…{btc[-4:]}"
    assert page.locator(".tx-content .tx-chip-link").count() == 0  # no chain said: no link yet

    page.evaluate("(chunks) => chunks.slice(-2).forEach(c => window.flow.push(c))", feed)
    links = [c.locator(".tx-chip-link") for c in chips.all()]
    assert links[0].get_attribute("href") == f"https://mempool.space/tx/{btc}"
    assert links[1].get_attribute("href") == f"https://tronscan.org/#/transaction/{tron}"
    assert links[2].count() == 0
    assert (
        page.locator(".tx-content mark.tx-cite-mark[data-status=not_found] .tx-chip").get_attribute(
            "data-value"
        )
        == unknown
    )
    assert page.console_errors == []


def test_without_citations_js_the_chunk_is_ignored(page: Any, mount_flow: Any, ws: Workspace) -> None:
    mount_flow(page)
    page.evaluate("(chunks) => chunks.forEach(c => window.flow.push(c))", scripted_chunks(ws))
    assert page.locator(".tx-citations").count() == 0
    assert page.locator(".tx-content").count() >= 1 and page.console_errors == []


# Screenshots for docs/ are written only when asked (TAHRIX_SCREENSHOTS=docs), so a test run leaves the tree clean.
DOCS = Path(__file__).resolve().parents[2] / "docs"
SECTIONS = ["summary", "findings", "graph", "exposure", "timeline", "triage", "attribution",
            "appendix-citations", "appendix-evidence", "provenance"]  # fmt: skip


@pytest.fixture(scope="module")
def report_file(ws: Workspace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tahrix_lab.case.investigator import QUESTION, scripted_backend

    session = ws.start_investigation("CASE-001", user="ana", title="scripted investigation")
    question = QUESTION.format(case_id="CASE-001")
    list(ws.ask(session, question, backend=scripted_backend(ws, "CASE-001"), model="scripted-investigator"))
    scripted_chunks(ws)  # a second session: one fabricated hash, one tenfold amount
    bad = ws.cases.sessions_of("CASE-001")[-1]["session_id"]
    path = tmp_path_factory.mktemp("out") / "report.html"
    ws.report("CASE-001", sessions=[bad, session.id], path=path)
    return path


def test_the_report_opens_offline_with_every_section_and_the_graph(
    page: Any, report_file: Path, tmp_path: Path
) -> None:
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort()
    )
    page.goto(report_file.as_uri())
    assert requests == [report_file.as_uri()]  # nothing else is fetched: no font, image, style or script
    for sid in SECTIONS:
        assert page.locator(f"section#{sid} h2").is_visible(), sid
    graph = page.locator("section#graph svg").bounding_box()
    assert graph is not None and graph["width"] > 600 and graph["height"] > 300
    assert page.locator("section#graph svg g.g-node").count() >= 10
    drawn = page.eval_on_selector("section#graph svg rect[stroke]", "r => r.getBBox().width")
    assert drawn > 100  # the boxes are laid out, not collapsed
    bad = page.eval_on_selector_all(
        "section#findings a.cite[data-status=not_found]", "els => els.map(e => e.textContent)"
    )
    assert sorted(bad) == sorted([FABRICATED, "480,000 ETH"])
    page.locator("section#findings a.cite[data-status=verified]").first.click()  # a citation leads to its row
    assert page.evaluate("location.hash").startswith("#ev-C")
    page.goto(report_file.as_uri())
    page.set_viewport_size({"width": 1280, "height": 900})
    height = page.evaluate("document.querySelector('section#exposure').getBoundingClientRect().top + scrollY")
    shots = DOCS if os.environ.get("TAHRIX_SCREENSHOTS") == "docs" else tmp_path
    page.screenshot(path=str(shots / "report.png"), clip={"x": 0, "y": 0, "width": 1280, "height": height},
                    full_page=True)  # fmt: skip
    assert page.console_errors == []
    assert len(requests) == 2 and set(requests) == {report_file.as_uri()}


def test_the_report_prints_to_pdf(page: Any, report_file: Path, tmp_path: Path) -> None:
    page.goto(report_file.as_uri())
    pdf = tmp_path / "report.pdf"
    page.pdf(path=str(pdf), format="A4", print_background=True, margin={"top": "14mm", "bottom": "14mm",
                                                                       "left": "12mm", "right": "12mm"})  # fmt: skip
    assert pdf.read_bytes()[:5] == b"%PDF-"
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    pages = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert int(next(line.split()[-1] for line in pages.splitlines() if line.startswith("Pages:"))) >= 5
    flat = " ".join(text.split())
    for title in ("Summary", "Findings", "Fund-flow graph", "Exposure by endpoint category", "Timeline of key movements",
                  "Flag triage", "Attribution", "Appendix A", "Appendix B", "Appendix C"):  # fmt: skip
        assert title in flat, title
    assert "CASE-001" in flat and "Tornado Cash" in flat  # the graph's labels are text in the PDF too
    assert "not found" in flat and "480,000 ETH" in flat
