"""The citations line and the case report in real headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
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
        ".tx-content mark.tx-cite-mark", "els => els.map(e => [e.textContent, e.dataset.status])"
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


def test_without_citations_js_the_chunk_is_ignored(page: Any, mount_flow: Any, ws: Workspace) -> None:
    mount_flow(page)
    page.evaluate("(chunks) => chunks.forEach(c => window.flow.push(c))", scripted_chunks(ws))
    assert page.locator(".tx-citations").count() == 0
    assert page.locator(".tx-content").count() >= 1 and page.console_errors == []
