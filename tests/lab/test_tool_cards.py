"""What a tool card says, shared by every surface: the tool's headline, the analyst's sentence for an
error (the model keeps its own), and a neutral count for a tool that writes no headline."""

from __future__ import annotations

import io

from rich.console import Console

from tahrix_lab.flow import to_chunk
from tahrix_lab.flow.terminal import FlowPrinter, summarise
from tahrix_lab.flow.vocabulary import analyst_message

DENIED = {"error": {"type": "denied", "message": "The tool 'annotate' changes case data and this session's grant is "
                    "read-only. Describe the change you would make and ask the analyst to make it or to allow writes."}}  # fmt: skip


def test_the_terminal_prints_the_tools_headline_whole() -> None:
    headline = (
        "$167.1M traced · $138.6M reached 6 endpoints: mixer $131.7M, exchanges $6.6M, OTC desks $202.4k"
    )
    assert summarise({"headline": headline, "case": {"a": 1}, "endpoints": [1, 2]}) == headline


def test_without_a_headline_the_line_is_a_neutral_count() -> None:
    assert summarise({"case": {"x": 1}, "rows": [1, 2, 3], "_effects": []}) == "2 fields"
    assert summarise({"value": 1}) == "1 field"


def test_a_long_line_is_cut_at_a_word_with_an_ellipsis() -> None:
    line = summarise({"headline": "word " * 100}, limit=40)
    assert line.endswith("…") and len(line) <= 40 and "wor…" not in line


def test_an_error_reads_for_the_analyst_and_the_model_keeps_its_own() -> None:
    note = analyst_message("annotate", DENIED)
    assert note is not None and note.startswith(
        "annotate was not run: this session's grant does not allow it."
    )
    assert "Describe the change you would make" not in note
    chunk = to_chunk("tool_result", {"id": "t", "name": "annotate", "status": "error", "result": DENIED})
    assert chunk is not None and chunk["analyst_message"] == note
    assert chunk["result"] == DENIED  # the model's text is untouched
    assert summarise(DENIED, "annotate") == f"error: {note}"


def test_error_kinds_each_have_a_sentence() -> None:
    retry = {
        "error": {
            "type": "retry",
            "message": "The address '0xabc' does not appear in case CASE-001. Check the chain.",
        }
    }
    assert analyst_message("lookup_address", retry) == (
        "lookup_address could not answer: The address '0xabc' does not appear in case CASE-001."
    )
    own = {"error": {"type": "denied", "message": "for the model", "analyst_message": "Written by the tool."}}
    assert analyst_message("x", own) == "Written by the tool."
    crash = {"error": {"type": "ValueError", "message": "the flags table is locked"}}
    assert analyst_message("list_flags", crash) == "the flags table is locked"
    for kind in ("invalid_arguments", "invalid_json", "unknown_tool", "timeout"):
        assert "list_flags" in (
            analyst_message("list_flags", {"error": {"type": kind, "message": "m"}}) or ""
        )
    assert analyst_message("x", {"rows": []}) is None
    ok = to_chunk("tool_result", {"id": "t", "name": "x", "status": "ok", "result": {"rows": []}})
    assert ok is not None and "analyst_message" not in ok


def test_the_printer_shows_the_headline_of_each_result() -> None:
    out = io.StringIO()
    printer = FlowPrinter(Console(file=out, width=200, highlight=False))
    printer("tool_result", {"id": "t", "name": "list_flags", "status": "ok",
                            "result": {"headline": "15 of 28 triage rows shown", "rows": []}})  # fmt: skip
    printer("tool_result", {"id": "u", "name": "annotate", "status": "error", "result": DENIED})
    text = out.getvalue()
    assert "list_flags: 15 of 28 triage rows shown" in text
    assert "annotate: error: annotate was not run" in text
