"""Citations checked against the evidence: the finder on real-looking Markdown, the look-up on the sample case."""

from __future__ import annotations

import string
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.agent.backends import FakeBackend
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.case.citations import summary_line, verify_citations
from tahrix_lab.case.citations_find import find_citations
from tahrix_lab.case.workspace import Workspace

A0 = "0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"
THEFT = "0xa00e454744c27038e25604c3fa67aa83fc581ac37448e865275d2d96bdfd5efd"
MIXER_TX = "0xdebc108154af32affbad4bd60facd81f1e0cc6c418c08974519458f423f5a409"
BTC_TX = "325c0c8fbaa8c1db0562e51dc3ad618b9df609ea31eb990696e9eec20d94e4a3"
BTC_ADDR = "bc1qan5q0x2u2aezuyuwlmued4zgpl0tv7h828jldl"
TRON_ADDR = "TJsTUUTq5VCe2nuaBU4KQFgzBMQugDx7Zw"

ANSWER = f"""## What happened

The attacker `{A0.upper().replace("0X", "0x")}` (short **0x3373…3eb2**, elsewhere 0x3373...3eb2) drained
**48,000 ETH** and 21.5M USDC in [the forged withdrawal](https://etherscan.io/tx/{THEFT}) at 2024-03-12 02:14 UTC.

- Tornado deposit: `{MIXER_TX}`
- BTC leg: {BTC_ADDR} in tx
  {BTC_TX}
- Tron cash-out to {TRON_ADDR}; flags FLG-60401e4871, LBL-0003 and BR-0001.
- Reported loss: $190,000,000 (about $190M).
"""


def by_text(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["text"]: c for c in result["citations"]}


def test_the_finder_reads_every_form_in_markdown() -> None:
    found = {(c.kind, c.value) for c in find_citations(ANSWER)}
    assert ("address", A0) in found  # checksummed case folded
    assert ("short", "0x3373…3eb2") in found
    assert ("amount", "48000 ETH") in found and ("amount", "21500000 USDC") in found
    assert ("tx", THEFT) in found and ("tx", MIXER_TX) in found and ("tx", BTC_TX) in found
    assert ("address", BTC_ADDR) in found and ("address", TRON_ADDR) in found
    assert ("time", "2024-03-12 02:14") in found
    assert {("id", "FLG-60401e4871"), ("id", "LBL-0003"), ("id", "BR-0001")} <= found
    assert ("usd", "190000000") in found
    shorts = [c for c in find_citations(ANSWER) if c.kind == "short"]
    assert len(shorts) == 1 and len(shorts[0].spans) == 2  # both spellings, one citation


def test_numbers_carry_their_precision() -> None:
    cits = {
        c.text: c for c in find_citations("Sent $4.2M, then 1,200.50 USDT, 3k ETH and block #19,432,100.")
    }
    assert cits["$4.2M"].number == Decimal("4200000") and cits["$4.2M"].unit == Decimal("100000")
    assert cits["1,200.50 USDT"].number == Decimal("1200.50") and cits["1,200.50 USDT"].unit == Decimal(
        "0.01"
    )
    assert cits["3k ETH"].number == Decimal(3000)
    assert cits["block #19,432,100"].number == Decimal(19432100)


def test_hex_inside_longer_strings_is_not_a_citation() -> None:
    inside = "0x" + "a" * 70  # too long for a hash: not one
    assert not [c for c in find_citations(f"data {inside} end") if c.kind in ("tx", "address")]
    assert [c.kind for c in find_citations("ethereum:" + THEFT + ":native:0")] == ["tx"]


def test_the_sample_answer_checks_out(loaded: Workspace) -> None:
    result = loaded.verify_citations(ANSWER, "CASE-001")
    cits = by_text(result)
    assert result["counts"]["not_found"] == 0, [c for c in result["citations"] if c["status"] == "not_found"]
    theft = cits[THEFT]
    assert theft["status"] == "verified" and theft["match"]["table"] == "transactions"
    assert theft["match"]["chain"] == "ethereum"
    eth = cits["48,000 ETH"]
    assert (
        eth["status"] == "verified" and eth["match"]["tx_hash"] == THEFT and eth["match"]["symbol"] == "ETH"
    )
    assert cits["0x3373…3eb2"]["match"]["value"] == A0
    assert cits["FLG-60401e4871"]["match"]["flag_type"] == "pass_through"
    assert cits["LBL-0003"]["match"]["category"] == "mixing_service"
    assert cits["$190,000,000"]["match"]["table"] == "cases"
    assert cits["2024-03-12 02:14 UTC"]["status"] == "verified"
    assert result["line"] == f"{result['counts']['verified']} citations verified"


def test_near_misses_are_close_and_inventions_not_found(loaded: Workspace) -> None:
    one_off = THEFT[:-1] + ("e" if THEFT[-1] != "e" else "f")
    text_ = (
        f"Tx {one_off} moved 48,010 ETH; on BSC the tx {MIXER_TX} and flag FLG-60401e4872; "
        f"invented 0x{'12' * 32} and 480,000 ETH; block 1."
    )
    cits = by_text(verify_citations(loaded.cases, text_, "CASE-001"))
    assert cits[one_off]["status"] == "close" and cits[one_off]["match"]["value"] == THEFT
    assert cits["48,010 ETH"]["status"] == "close"  # 48,000 in the evidence: rounding, not a match
    assert cits[MIXER_TX]["status"] == "close" and "ethereum" in cits[MIXER_TX]["note"]
    assert cits["FLG-60401e4872"]["status"] == "close"
    assert cits["0x" + "12" * 32]["status"] == "not_found"
    assert cits["480,000 ETH"]["status"] == "not_found"


def test_a_figure_a_tool_computed_is_verified_by_that_result(loaded: Workspace) -> None:
    trace = loaded.trace("CASE-001")
    mixer = trace["summary"]["endpoint_usd_by_category"]["mixing_service"]
    answer = f"The mixer received ${mixer:,.0f}."
    assert verify_citations(loaded.cases, answer, "CASE-001")["counts"]["verified"] == 0
    checked = verify_citations(loaded.cases, answer, "CASE-001", tool_results=[("trace_funds", trace)])
    (cit,) = checked["citations"]
    assert cit["status"] == "verified" and cit["match"]["tool"] == "trace_funds"
    assert cit["match"]["path"] == "summary.endpoint_usd_by_category.mixing_service"


def test_summary_line() -> None:
    assert summary_line({"verified": 14, "close": 0, "not_found": 1}) == "14 citations verified · 1 not found"
    assert summary_line({"verified": 1, "close": 2}) == "1 citation verified · 2 close"
    assert summary_line({}) == "no citations"


HEX = "0123456789abcdef"


@pytest.fixture(scope="module")
def known(loaded: Workspace) -> set[str]:
    rows = loaded.cases.rows(
        "SELECT tx_hash AS v FROM transfers WHERE case_id = 'CASE-001' UNION SELECT address FROM addresses "
        "WHERE case_id = 'CASE-001' UNION SELECT address FROM labels WHERE case_id = 'CASE-001'"
    )
    return {r["v"] for r in rows}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tx=st.text(HEX, min_size=64, max_size=64),
    addr=st.text(HEX, min_size=40, max_size=40),
    tron=st.text("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", min_size=33, max_size=33),
    upper=st.booleans(),
    glue=st.sampled_from([" ", "`", "\n", "**", "("]),
)
def test_a_value_not_in_the_case_is_never_verified(
    loaded: Workspace, known: set[str], tx: str, addr: str, tron: str, upper: bool, glue: str
) -> None:
    cited = [f"0x{tx}", f"0x{addr}", tx, "T" + tron]
    shown = [c.upper().replace("0X", "0x") if upper else c for c in cited]
    result = verify_citations(loaded.cases, glue + f"{glue} and {glue}".join(shown) + glue, "CASE-001")
    for c in result["citations"]:
        if c["value"] not in known:
            assert c["status"] != "verified", c


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pos=st.integers(2, 65), ch=st.sampled_from(string.hexdigits.lower()[:16]))
def test_a_real_hash_one_character_off_is_never_verified(loaded: Workspace, pos: int, ch: str) -> None:
    if THEFT[pos] == ch:
        return
    bad = THEFT[:pos] + ch + THEFT[pos + 1 :]
    (cit,) = verify_citations(loaded.cases, f"tx {bad}", "CASE-001")["citations"]
    assert cit["status"] == "close" and cit["match"]["value"] == THEFT


def test_a_scripted_answer_with_a_fabricated_hash_and_a_tenfold_amount(loaded: Workspace) -> None:
    fabricated = "0x" + "ab" * 32
    answer = (
        f"The attacker {A0} withdrew 48,000 ETH in {THEFT}, then 21.5M USDC. It later sent ETH "
        f"to the mixer in {fabricated}."
    )
    wrong = "480,000 ETH"  # ten times the evidence
    answer = answer.replace("48,000 ETH", wrong, 1)
    backend = FakeBackend([[tool_call("get_case_overview", {})], [text(answer)]])
    session = loaded.start_investigation("CASE-001", user="ana")
    events = list(loaded.ask(session, "Where did it go?", backend=backend, model="fake"))
    kinds = [e for e, _ in events]
    assert kinds[-2:] == ["citations", "done"]
    result = events[-2][1]
    cits = by_text(result)
    assert cits[fabricated]["status"] == "not_found"
    assert cits[wrong]["status"] == "not_found"
    assert cits[THEFT]["status"] == "verified" and cits[A0]["status"] == "verified"
    assert result["counts"]["not_found"] == 2 and "2 not found" in result["line"]


def test_the_assistant_checks_its_draft_with_the_tool(loaded: Workspace) -> None:
    from tahrix_lab.agent.tools import run_tool
    from tahrix_lab.agent.transcript import Part
    from tahrix_lab.case.tools import CASE_TOOLS

    session = loaded.start_investigation("CASE-001", user="ana", grant={"tools": ["verify_citations"]})
    draft = f"Stolen in {THEFT}; the fake {'0x' + 'cd' * 32}."
    out = run_tool(
        Part.of_tool_use("t1", "verify_citations", {"text": draft}),
        loaded.context_provider(),
        registry=CASE_TOOLS,
        session=session,
    )
    assert out.status == "ok", out.result
    assert out.result["counts"] == {"verified": 1, "close": 0, "not_found": 1, "total": 2}
    assert [p["text"] for p in out.result["problems"]] == ["0x" + "cd" * 32]
    assert out.result["verified"][0]["match"]["tx_hash"] == THEFT
    assert not CASE_TOOLS.get("verify_citations").writes


def test_the_terminal_prints_the_line_and_the_problems(loaded: Workspace) -> None:
    from rich.console import Console

    from tahrix_lab.flow import to_chunk
    from tahrix_lab.flow.terminal import FlowPrinter, chunk_event

    result = verify_citations(loaded.cases, f"Sent in {THEFT} and {'0x' + 'ef' * 32}.", "CASE-001")
    chunk = to_chunk("citations", result)
    assert chunk is not None and chunk["type"] == "citations" and chunk["counts"]["not_found"] == 1
    assert chunk_event(chunk) == ("citations", {k: v for k, v in chunk.items() if k != "type"})
    console = Console(record=True, width=300)
    FlowPrinter(console)("citations", result)
    out = console.export_text()
    assert "§ 1 citation verified · 1 not found" in out and f"not found: 0x{'ef' * 32}" in out
    assert THEFT not in out  # verified citations stay in the list, not on the terminal


def test_the_notebook_widget_checks_each_answer_of_a_case_session(loaded: Workspace) -> None:
    """ChatWidget on a case-linked session ends each answer with its citations chunk."""
    from tahrix_lab.lab.widget import ChatWidget

    fabricated = "0x" + "ef" * 32
    backend = FakeBackend([[text(f"Stolen in {THEFT}; then {fabricated}.")]])
    session = loaded.start_investigation("CASE-001", user="ana")
    chat = ChatWidget(store=loaded.store, session=session, backend=backend, model="fake",
                      registry=loaded.registry(), context=loaded.context_provider())  # fmt: skip
    chat.ask("Where did it go?")
    cites = [c for c in chat.chunks if c.get("type") == "citations"]
    assert len(cites) == 1
    assert by_text(cites[0])[fabricated]["status"] == "not_found"
    assert by_text(cites[0])[THEFT]["status"] == "verified"
