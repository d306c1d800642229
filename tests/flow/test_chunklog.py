"""The one chunk log: the merge rule, compact, since/trim and the fold."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from tahrix_lab.flow.chunklog import ChunkLog, Fold, compact, in_flight, merge

kinds = st.sampled_from(["content", "reasoning", "tool_call", "usage"])
chunk = st.builds(
    lambda kind, text, flag: (
        {"type": kind, "text": text, **({"signature": True} if flag else {})}
        if kind in ("content", "reasoning")
        else {"type": kind, "id": text}
    ),
    kinds,
    st.text(max_size=3),
    st.booleans(),
)


@given(st.lists(chunk, max_size=30))
def test_compact_keeps_the_text_in_order_and_leaves_no_mergeable_neighbours(chunks: list[dict]) -> None:
    out = compact(chunks)
    assert "".join(c.get("text", "") for c in out if c["type"] == "content") == "".join(
        c.get("text", "") for c in chunks if c["type"] == "content"
    )
    assert all(merge(a, b) is None for a, b in itertools.pairwise(out))
    assert compact(out) == out
    # compacting onto a compacted list is compacting the whole
    half = len(chunks) // 2
    assert compact(chunks[half:], into=compact(chunks[:half])) == out


def test_the_merge_rule_keeps_flags_apart() -> None:
    plain = {"type": "reasoning", "text": "a"}
    signed = {"type": "reasoning", "text": "", "signature": True}
    assert merge(plain, signed) is None and merge(signed, plain) is None
    assert merge(plain, {"type": "reasoning", "text": "b"}) == {"type": "reasoning", "text": "ab"}
    assert merge({"type": "tool_call", "id": 1}, {"type": "tool_call", "id": 1}) is None


def test_a_log_keeps_its_indexes_through_trims() -> None:
    log = ChunkLog(base=5)
    log.append([{"type": "content", "text": str(i)} for i in range(5)])
    assert log.next == 10 and log.holds(5) and log.holds(10) and not log.holds(4)
    assert [c["text"] for c in log.since(8)] == ["3", "4"]
    log.trim(8)
    assert log.base == 8 and [c["text"] for c in log.since(8)] == ["3", "4"] and log.next == 10


def test_the_fold_sums_usage_unknown_stays_unknown_and_ends_running_tools() -> None:
    fold = Fold().extend([
        {"type": "content", "text": "Hi"},
        {"type": "tool_call", "id": "c1", "name": "t"},
        {"type": "usage", "usage": {"input_tokens": 3, "output_tokens": None}, "cost_usd": None},
    ])  # fmt: skip
    assert (
        fold.content == "Hi" and fold.usage["prompt_tokens"] == 3 and fold.usage["completion_tokens"] is None
    )
    assert fold.usage["cost_usd"] is None
    fold.end(cancelled=True)
    assert fold.tool_calls == [{"id": "c1", "name": "t", "status": "cancelled"}]
    again = Fold.of(fold.summary())
    assert again.summary() == fold.summary() and again.fields() == fold.fields()


def test_in_flight_is_what_streamed_after_the_last_stored_call() -> None:
    said = in_flight([{"type": "content", "text": "old"}, {"type": "usage", "usage": {}},
                      {"type": "reasoning", "text": "hm"}, {"type": "content", "text": "new"}])  # fmt: skip
    assert (said.content, said.reasoning) == ("new", "hm")
