"""Diff: alignment by user turn, tool-call alignment, word diff, figures, renderings."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from lab_helpers import run

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.pricing import price
from tahrix_lab.agent.transcript import Message, Part, Session
from tahrix_lab.lab.diff import diff, diff_messages
from tahrix_lab.lab.diff_align import ToolCall, align_tools, changed_fields, word_diff


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
