"""The offline investigator answers any question from the tools it calls: the investigation, then
follow-ups about flags, an address, a transaction, the trace, the bridges, the theft, or anything."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tahrix_lab.agent import Session
from tahrix_lab.agent.transcript import Message, Part
from tahrix_lab.case.investigator import QUESTION, scripted_backend
from tahrix_lab.case.workspace import Workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    w = Workspace(tmp_path_factory.mktemp("inv") / "ws.duckdb")
    w.load_sample_case()
    yield w
    w.close()


@pytest.fixture(scope="module")
def session(ws: Workspace) -> Session:
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": False})
    ask(ws, s, QUESTION.format(case_id="CASE-001"))  # follow-ups come after the investigation
    return s


def ask(ws: Workspace, session: Session, question: str) -> tuple[str, list[str], list[dict[str, Any]]]:
    events = list(ws.ask(session, question, backend=scripted_backend(ws, "CASE-001"), model="scripted"))
    assert not [p for e, p in events if e == "error"], [p for e, p in events if e == "error"]
    tools = [p["name"] for e, p in events if e == "tool_use"]
    results = [p for e, p in events if e == "tool_result"]
    return "".join(p["text"] for e, p in events if e == "token"), tools, results


def cited_hashes_exist(ws: Workspace, answer: str) -> None:
    hashes = re.findall(r"(?<![0-9a-fA-Fx])(?:0x)?[0-9a-f]{64}(?![0-9a-f])", answer)
    for h in hashes:
        assert ws.cases.scalar("SELECT count(*) FROM transactions WHERE tx_hash = ?", [h]), h


def test_the_investigation_states_native_amounts_and_true_counts(ws: Workspace) -> None:
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": False})
    answer, tools, results = ask(ws, s, QUESTION.format(case_id="CASE-001"))
    assert tools[:4] == ["get_case_overview", "trace_funds", "list_transfers", "list_flags"]
    assert "48,000 ETH ($156.6M)" in answer and "21,500,000 USDC ($21.5M)" in answer
    trace = next(r["result"] for r in results if r["name"] == "trace_funds")
    mixer = next(e for e in trace["summary"]["top_endpoints"] if e["category"] == "mixing_service")
    assert f"received $131.7M in {mixer['evidence_count']} deposits" in answer  # deposits, not one tx
    assert "the perpetrator and suspect addresses" in answer
    assert "address(es)" not in answer
    cited_hashes_exist(ws, answer)


@pytest.mark.parametrize(
    ("question", "tool", "expect"),
    [
        ("Which flags matter most?", "list_flags", r"The triage has 29 rows from 725 flags"),
        ("Tell me about 0x17420e940144702bc6b789ef81365acc3f88af59", "lookup_address",
         r"0x17420e940144702bc6b789ef81365acc3f88af59 \(the case's suspect\): received \$6\.5M in 1 transfer"),
        ("What happened in 0xa00e454744c27038e25604c3fa67aa83fc581ac37448e865275d2d96bdfd5efd?", "get_transaction",
         r"48,000 ETH \(\$156\.6M\) from 0x"),
        ("Where did the money go?", "trace_funds", r"Mixer: \$131\.7M in total"),
        ("What about the bridges?", "find_bridge_events", r"BR-\d{4} \(\w+, (matched|pending)\): \w+ [\d,.]+ "),
        ("How much was stolen?", "list_transfers", r"received 48,000 ETH \(\$156\.6M\) in tx 0x[0-9a-f]{64}"),
        ("Explain FLG-60401e4871", "run_sql", r"flag_id FLG-60401e4871, flag_type pass_through"),
        ("Show me the peel chain", "list_flags", r"- 1 flag matches:\n  - FLG-[0-9a-f]{10}: peel_chain \(high, "),
        ("Any dusting or address poisoning?", "list_flags", r"flags? match.*\n  - FLG-[0-9a-f]{10}: address_poisoning"),
        ("Thanks! Anything else?", "get_case_overview", r"CASE-001: Aurora Gate"),
    ],
)  # fmt: skip
def test_any_follow_up_is_answered_from_the_tools_it_calls(
    ws: Workspace, session: Session, question: str, tool: str, expect: str
) -> None:
    answer, tools, results = ask(ws, session, question)
    assert tool in tools
    assert all(r["status"] == "ok" for r in results), results
    assert re.search(expect, answer), answer
    assert "ran out" not in answer and "went wrong" not in answer
    cited_hashes_exist(ws, answer)


def test_a_question_about_an_unknown_address_says_so(ws: Workspace, session: Session) -> None:
    answer, tools, results = ask(ws, session, "Who is 0x000000000000000000000000000000000000dead?")
    assert tools == ["lookup_address"] and results[0]["status"] == "error"
    assert "lookup_address could not answer" in answer and "does not appear in case CASE-001" in answer


def test_the_service_model_never_runs_out_of_script() -> None:
    inv = scripted_backend()
    assert inv.name == "fake"
    # more calls than any script has: a closing turn, never an error
    messages = [Message(role="user", parts=[Part.of_text("hello")])]
    messages += [Message(role="assistant", parts=[Part.of_text("x")])] * 5
    events = list(inv.stream(system=None, messages=messages, tools=[], model="m", inference=None))
    assert events[-1]["kind"] == "done" and any(e["kind"] == "text" for e in events)


def test_every_kind_of_flag_has_words_that_ask_for_it() -> None:
    from tahrix_lab.case.detectors import DETECTORS
    from tahrix_lab.case.investigator import FLAG_WORDS, picked_tools

    assert set(FLAG_WORDS) == set(DETECTORS)
    for flag_type in DETECTORS:
        asked = picked_tools(f"Show me the {flag_type.replace('_', ' ')} flags", [])
        assert ("list_flags", {"view": "raw", "flag_type": flag_type, "limit": 5}) in asked, flag_type
