"""Diff: alignment by user turn, tool-call alignment, word diff, figures, renderings."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest
from lab_helpers import run

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.pricing import price
from tahrix_lab.agent.transcript import Message, Part, Session
from tahrix_lab.lab.diff import diff, diff_messages
from tahrix_lab.lab.diff_align import ToolCall, align_tools, changed_fields, value_at, word_diff


def make(
    store: TranscriptStore,
    registry: ToolRegistry,
    script: list,
    questions: list[str],
    name: str = "openai",
    model: str = "gpt-4o",
) -> Session:  # type: ignore[type-arg]
    session = store.create_session(purpose="investigation")
    backend = FakeBackend(script, name=name)
    for q in questions:
        run(store, session, q, backend, model, registry)
    return session


def test_added_removed_and_changed_tool_calls_align_by_name(
    store: TranscriptStore, registry: ToolRegistry
) -> None:
    a = make(
        store,
        registry,
        [
            [
                tool_call("lookup_address", {"address": "0xabc"}),
                tool_call("trace_funds", {"address": "0xabc"}),
            ],
            [text("0xabc is an exchange hot wallet and sent funds to 0xdef.")],
        ],
        ["Who is 0xabc?"],
    )
    b = make(
        store,
        registry,
        [
            [
                tool_call("trace_funds", {"address": "0xABC"}),  # arguments changed, lookup removed
                tool_call("trace_funds", {"address": "0xdef"}),  # added after it
            ],
            [text("0xabc is an exchange wallet and sent funds to 0xdef.")],
        ],
        ["Who is 0xabc?"],
        name="bedrock",
        model="us.anthropic.claude-3-5-sonnet-20240620-v1:0",
    )
    d = diff(a.id, b.id, store=store)

    assert len(d.turns) == 1
    ops = [(c.op, c.name) for c in d.turns[0].tools]
    assert sorted(ops) == sorted(
        [("removed", "lookup_address"), ("args_changed", "trace_funds"), ("added", "trace_funds")]
    )
    changed = next(c for c in d.turns[0].tools if c.op == "args_changed")
    assert changed.changed == ["address"]
    assert not d.identical
    t = d.turns[0]
    assert 0.7 < t.similarity < 1.0
    assert ("delete", "hot ") in [(op, w) for op, w in t.words] or any(
        op == "delete" and "hot" in w for op, w in t.words
    )
    assert t.a is not None and t.b is not None
    assert t.a.stop_reason == t.b.stop_reason == "end_turn"
    assert t.a.calls == t.b.calls == 2
    tot = d.totals
    assert (tot["tools_same"], tot["tools_added"], tot["tools_removed"], tot["tools_args_changed"]) == (
        0,
        1,
        1,
        1,
    )


def test_turn_figures_match_the_transcript(store: TranscriptStore, registry: ToolRegistry) -> None:
    a = make(
        store,
        registry,
        [[tool_call("lookup_address", {"address": "0xabc"})], [text("x")], [text("y")]],
        ["q1", "q2"],
    )
    b = make(store, registry, [[text("x")]], ["q1"])
    d = diff(a.id, b.id, store=store)
    calls = [m for m in store.load_messages(a.id) if m.role == "assistant"]

    assert [t.index for t in d.turns] == [1, 2]
    t1, t2 = d.turns
    assert t1.a is not None and t1.a.input_tokens == sum(m.usage.input_tokens for m in calls[:2] if m.usage)  # type: ignore[misc]
    assert t1.a.cost_usd == pytest.approx(
        sum(price(m.model_id, m.usage, backend="openai") or 0 for m in calls[:2])
    )
    assert t1.a.latency_ms == pytest.approx(sum(m.latency_ms or 0 for m in calls[:2]))
    assert t1.a.ttft_ms == calls[0].ttft_ms
    assert [(c.op, c.name) for c in t1.tools] == [("removed", "lookup_address")]
    assert t2.b is None and t2.similarity == 0.0  # B never had a second turn
    frame = d.to_frame()
    assert list(frame["turn"]) == [1, 2]
    assert frame.loc[0, "calls_a"] == 2 and frame.loc[0, "calls_b"] == 1
    assert pd.isna(frame.loc[1, "text_b"])
    assert d.totals["turns_a"] == 2 and d.totals["turns_b"] == 1


def test_a_session_diffed_with_itself_is_identical(store: TranscriptStore, registry: ToolRegistry) -> None:
    a = make(store, registry, [[tool_call("lookup_address", {"address": "0xabc"})], [text("x")]], ["q"])
    d = diff(a.id, a.id, store=store)
    assert d.identical and d.turns[0].similarity == 1.0
    assert [c.op for c in d.turns[0].tools] == ["same"]


def test_changed_fields_nested_and_missing() -> None:
    a = {"address": "0x1", "filters": {"min": 1, "chain": "eth"}, "limit": 5}
    b = {"address": "0x1", "filters": {"min": 2, "chain": "eth"}, "page": 2}
    assert changed_fields(a, b) == ["filters.min", "limit", "page"]
    assert changed_fields(None, {"x": 1}) == ["(arguments)"]


def test_align_tools_anchors_on_identical_calls_then_pairs_names() -> None:
    a = [ToolCall("t", {"x": 1}), ToolCall("t", {"x": 2}), ToolCall("u", {}), ToolCall("w", {"k": 1})]
    b = [ToolCall("t", {"x": 2}), ToolCall("u", {}), ToolCall("v", {}), ToolCall("w", {"k": 2})]
    assert [(c.op, c.name, c.changed) for c in align_tools(a, b)] == [
        ("removed", "t", []),  # not paired with t(x=2): that one is identical further on
        ("same", "t", []),
        ("same", "u", []),
        ("added", "v", []),
        ("args_changed", "w", ["k"]),
    ]


def test_word_diff_reconstructs_both_sides() -> None:
    a, b = "The funds went to an exchange.", "The funds went to a mixer first."
    ratio, ops = word_diff(a, b)
    assert "".join(w for op, w in ops if op != "insert") == a
    assert "".join(w for op, w in ops if op != "delete") == b
    assert 0.3 < ratio < 0.9
    assert word_diff("", "") == (1.0, [])


def test_html_escapes_all_transcript_text() -> None:
    evil = "<script>alert(1)</script> & <b>"
    a = [Message.user(evil), Message(role="assistant", parts=[Part.of_text(evil)], stop_reason="end_turn")]
    b = [
        Message.user(evil),
        Message(
            role="assistant",
            parts=[
                Part.of_text("<img src=x onerror=alert(2)>"),
                Part.of_tool_use("1", "<t>", {"<k>": "<v>"}),
            ],
            stop_reason="tool_use",
        ),
    ]
    page = diff_messages(a, b, a_id="<a>", b_id="<b>")._repr_html_()
    assert "<script>" not in page and "<img" not in page and "<t>" not in page and "<a>" not in page
    assert "&lt;script&gt;" in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    # only our own markup remains
    assert set(re.findall(r"<(\w+)", page)) <= {
        "div",
        "style",
        "p",
        "b",
        "table",
        "tr",
        "th",
        "td",
        "del",
        "ins",
        "i",
        "span",
        "code",
        "br",
    }


def test_rich_table_for_the_terminal(store: TranscriptStore, registry: ToolRegistry) -> None:
    from rich.console import Console

    a = make(store, registry, [[text("x")]], ["[bold]q[/bold]"])
    b = make(store, registry, [[text("y")]], ["[bold]q[/bold]"])
    console = Console(record=True, width=200)
    console.print(diff(a.id, b.id, store=store).to_rich())
    out = console.export_text()
    assert "[bold]q[/bold]" in out  # user text is escaped, not interpreted as markup
    assert "total" in out and "differs" in out


# -- tool results ---------------------------------------------------------------------------


def registry_answering(label: str) -> ToolRegistry:
    """A lookup tool whose case data says ``label`` (updated case data between two sessions)."""
    reg = ToolRegistry()
    schema = {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}

    @reg.register(parameters=schema, purposes=("investigation",))
    def lookup_address(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Label of an address."""
        return {"address": args["address"], "label": label, "risk": 0.2}

    return reg


@pytest.fixture
def relabelled(store: TranscriptStore) -> tuple[Session, Session]:
    """The same question, the same call, the same arguments; the tool answers differently."""
    script = [[tool_call("lookup_address", {"address": "0xabc"})], [text("0xabc is labelled.")]]
    a = make(store, registry_answering("exchange hot wallet"), script, ["Who is 0xabc?"])
    b = make(store, registry_answering("mixer deposit"), script, ["Who is 0xabc?"])
    return a, b


def test_a_call_whose_result_differs_is_reported_changed_with_its_keys(
    store: TranscriptStore, relabelled: tuple[Session, Session]
) -> None:
    a, b = relabelled
    d = diff(a.id, b.id, store=store)
    [call] = d.turns[0].tools
    assert (call.op, call.name, call.changed, call.result_changed) == (
        "result_changed",
        "lookup_address",
        [],
        ["label"],
    )
    assert not d.identical and d.turns[0].a is not None and d.turns[0].b is not None
    assert d.turns[0].a.text == d.turns[0].b.text  # only the tool's answer differs
    assert d.tool_changes() == [(1, call)]
    assert d.totals["tools_result_changed"] == 1 and d.totals["tools_same"] == 0
    # the same session against itself stays identical: results are compared, not just present
    assert diff(a.id, a.id, store=store).identical


def test_the_frame_html_and_terminal_show_the_changed_result_keys(
    store: TranscriptStore, relabelled: tuple[Session, Session]
) -> None:
    from rich.console import Console

    a, b = relabelled
    d = diff(a.id, b.id, store=store)

    frame = d.to_frame()
    assert frame.loc[0, "tools_result_changed"] == 1 and frame.loc[0, "tools_same"] == 0
    assert frame.loc[0, "tool_changes"] == "≠ lookup_address result: label"

    page = d._repr_html_()
    assert "result changed: label = &quot;exchange hot wallet&quot;" in page
    assert "result changed: label = &quot;mixer deposit&quot;" in page

    console = Console(record=True, width=250)
    console.print(d.to_rich())
    out = console.export_text()
    assert "tools =/+/−/~/≠" in out and "0/0/0/0/1" in out
    assert "≠ lookup_address result: label" in out


def test_tahrix_diff_shows_the_changed_result(
    store: TranscriptStore,
    relabelled: tuple[Session, Session],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tahrix_lab.cli import main

    a, b = relabelled
    path = store.path
    store.close()
    monkeypatch.delenv("TAHRIX_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["--db", path, "diff", a.id, b.id, "--tools"]) == 0
    out = capsys.readouterr().out
    assert "≠ lookup_address result: label" in out  # in the table
    assert "turn 1: result_changed ≠ lookup_address result: label" in out
    assert 'label: "exchange hot wallet" → "mixer deposit"' in out


def test_changed_arguments_and_results_are_both_listed() -> None:
    a = [ToolCall("trace_funds", {"address": "0xabc"}, "ok", {"hops": [{"to": "0x1", "value": 1.5}]})]
    b = [ToolCall("trace_funds", {"address": "0xABC"}, "ok", {"hops": [{"to": "0x2", "value": 1.5}]})]
    [c] = align_tools(a, b)
    assert (c.op, c.changed, c.result_changed) == ("args_changed", ["address"], ["hops[0].to"])
    failed = [ToolCall("trace_funds", {"address": "0xabc"}, "error", {"error": "timeout"})]
    [c] = align_tools(a, failed)
    assert (c.op, c.result_changed) == ("result_changed", ["(status)", "error", "hops"])
    assert value_at({"hops": [{"to": "0x1"}]}, "hops[0].to") == "0x1"
    with pytest.raises(KeyError):
        value_at({"hops": []}, "hops[0].to")


def test_an_exported_and_reimported_session_still_diffs_identical_with_results() -> None:
    """Equal results (key order aside) are the same: JSON objects compare by content."""
    a = [ToolCall("t", {"x": 1}, "ok", {"a": 1, "b": [1, 2]})]
    b = [ToolCall("t", {"x": 1}, "ok", {"b": [1, 2], "a": 1})]
    assert [(c.op, c.result_changed) for c in align_tools(a, b)] == [("same", [])]
