"""ChatWidget on the Python side: order, transport, stop, effects, history (no browser)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import Budget, FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.lab.widget import ChatWidget, compact


@pytest.fixture
def chat_store(tmp_path: Path) -> Iterator[TranscriptStore]:
    s = TranscriptStore(tmp_path / "chat.duckdb")
    yield s
    s.close()


@pytest.fixture
def tools() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.register(parameters={"type": "object", "properties": {"address": {"type": "string"}}})
    def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Look an address up."""
        return {"label": "exchange", "_effects": [{"type": "flags_changed", "case_id": "c1"}]}

    return reg


def scripted() -> FakeBackend:
    return FakeBackend(
        [
            [
                reasoning("Need to look it up."),
                text("Checking."),
                tool_call("lookup", {"address": "0xabc"}, id="t1"),
            ],
            [reasoning("It is an exchange."), text("It is an "), text("exchange.")],
        ]
    )


class Recorder:
    """Captures what the widget publishes on its comm (custom messages and state)."""

    def __init__(self, widget: ChatWidget) -> None:
        self.custom: list[dict[str, Any]] = []
        self.states: list[dict[str, Any]] = []
        widget.comm.publish_msg = self.publish

    def publish(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **kw: Any
    ) -> None:
        if not isinstance(data, dict):
            return
        if data.get("method") == "custom":
            self.custom.append(data["content"])
        elif data.get("method") == "update":
            self.states.append(data.get("state", {}))

    def streamed(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for msg in self.custom:
            if msg.get("type") == "chunks":
                assert msg["start"] == len(out), "live chunks must arrive in order with no gap"
                out.extend(msg["chunks"])
        return out


def make(store: TranscriptStore, tools: ToolRegistry, **kw: Any) -> ChatWidget:
    return ChatWidget(
        store=store, backend=kw.pop("backend", scripted()), model="fake-model", registry=tools, **kw
    )


def test_ask_streams_chunks_in_loop_order_and_returns_the_answer(
    chat_store: TranscriptStore, tools: ToolRegistry
) -> None:
    w = make(chat_store, tools)
    rec = Recorder(w)
    answer = w.ask("What is 0xabc?", timeout=30)
    assert answer == "It is an exchange."
    types = [c["type"] for c in w.chunks]
    assert types == [
        "user", "reasoning", "content", "tool_call", "usage", "tool_result", "effects",
        "follow_up", "reasoning", "content", "usage", "done",
    ]  # fmt: skip
    assert w.chunks[5]["result"] == {"label": "exchange"}
    assert w.chunks[-3] == {"type": "content", "text": "It is an exchange."}
    assert w.chunks == w.history()
    # every chunk went out live, once, in order (one per token); when the run
    # ended the trait got the merged list under a new epoch, then busy flipped
    streamed = rec.streamed()
    assert [c["type"] for c in streamed].count("content") == 3
    assert compact(streamed) == w.chunks
    assert {m["epoch"] for m in rec.custom if m["type"] == "chunks"} == {0}
    assert rec.custom[-1] == {"type": "merged", "from_epoch": 0, "epoch": 1, "raw_length": len(streamed)}
    assert w.epoch == 1
    assert rec.states[-2] == {"epoch": 1, "chunks": w.chunks}
    assert rec.states[-1] == {"busy": False}
    assert w.busy is False
    # the transcript is in DuckDB
    roles = [m.role for m in chat_store.load_messages(w.session_id)]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_trait_is_not_resent_per_token(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    backend = FakeBackend([[text(f"t{i} ") for i in range(300)]])
    w = make(chat_store, tools, backend=backend)
    rec = Recorder(w)
    w.ask("long answer", timeout=30)
    list_syncs = [s for s in rec.states if "chunks" in s]
    assert len(rec.streamed()) == 1 + 300 + 2
    assert [c["type"] for c in w.chunks] == ["user", "content", "usage", "done"]
    assert len(list_syncs) < 20


def test_resync_resends_what_a_late_view_missed(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    w = make(chat_store, tools)
    w.ask("q", timeout=30)
    rec = Recorder(w)
    w._on_front_end(w, {"type": "resync", "since": 3}, [])
    assert rec.custom == [{"type": "chunks", "epoch": 1, "start": 3, "chunks": w.chunks[3:]}]
    w._on_front_end(w, {"type": "resync", "since": len(w.chunks)}, [])
    w._on_front_end(w, {"type": "resync", "since": "x"}, [])
    w._on_front_end(w, {"type": "resync", "since": 1, "epoch": 0}, [])  # a stale view reloads instead
    assert len(rec.custom) == 1


def test_front_end_send_and_stop_messages(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    w = make(chat_store, tools)
    w._on_front_end(w, {"type": "send", "text": "  from the text box  "}, [])
    assert w.wait(30)
    assert w.chunks[0] == {"type": "user", "text": "from the text box"}
    assert w.chunks[-1]["type"] == "done"
    w._on_front_end(w, {"type": "send", "text": "   "}, [])  # ignored calmly
    assert not w.running


def test_stop_ends_the_run_and_keeps_the_partial_answer(
    chat_store: TranscriptStore, tools: ToolRegistry
) -> None:
    started, gate = threading.Event(), threading.Event()

    def slow(messages: Any, specs: Any) -> Iterator[Any]:
        yield text("partial answer")
        started.set()
        gate.wait(10)
        yield text(" (more)")
        yield text(" never shown")

    w = make(chat_store, tools, backend=FakeBackend([slow]))
    w.send("a slow question")
    assert started.wait(10)
    assert w.running and w.busy
    with pytest.raises(RuntimeError, match="still answering"):
        w.send("another")
    w.stop()
    gate.set()
    assert w.wait(30)
    assert w.chunks[-1] == {"type": "done", "stop_reason": "cancelled"}
    assert "never shown" not in "".join(c.get("text", "") for c in w.chunks)
    stored = chat_store.load_messages(w.session_id)
    assert stored[-1].role == "assistant"
    assert stored[-1].stop_reason == "cancelled"
    assert stored[-1].text.startswith("partial answer")


def test_on_effect_callbacks_get_each_effect_and_a_broken_one_is_contained(
    chat_store: TranscriptStore, tools: ToolRegistry
) -> None:
    w = make(chat_store, tools)
    seen: list[dict[str, Any]] = []

    @w.on_effect
    def broken(effect: dict[str, Any]) -> None:
        raise ValueError("listener bug")

    w.on_effect(seen.append)
    assert w.ask("q", timeout=30) == "It is an exchange."
    assert seen == [{"type": "flags_changed", "case_id": "c1"}]


def test_from_session_renders_history_like_a_live_run_and_continues(
    chat_store: TranscriptStore, tools: ToolRegistry
) -> None:
    first = make(chat_store, tools)
    first.ask("What is 0xabc?", timeout=30)
    backend = FakeBackend([[text("Still an exchange.")]])
    again = ChatWidget.from_session(
        first.session_id, store=chat_store, backend=backend, model="fake-model", registry=tools
    )
    live: list[str] = []
    for c in first.chunks:  # history keeps blocks, not tokens: one content chunk per text part
        if c["type"] not in ("effects", "follow_up", "done") and not (
            live and live[-1] == c["type"] == "content"
        ):
            live.append(c["type"])
    assert [c["type"] for c in again.chunks] == live
    assert again.chunks[-2] == {"type": "content", "text": "It is an exchange."}
    assert again.chunks[0] == {"type": "user", "text": "What is 0xabc?"}
    assert again.ask("And now?", timeout=30) == "Still an exchange."
    assert [m.role for m in chat_store.load_messages(first.session_id)][-2:] == ["user", "assistant"]
    # the model saw the whole earlier conversation
    assert len(backend.requests[0].messages) == 5


def test_budget_meter_updates_after_usage(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    budget = Budget(per_minute_tokens=200, per_hour_tokens=100_000)
    w = make(chat_store, tools, budget=budget)
    assert w.meter == {"per_minute_tokens": 0.0, "per_hour_tokens": 0.0}
    w.ask("q", timeout=30)
    assert w.meter["per_minute_tokens"] > 0.0
    assert set(w.meter) == {"per_minute_tokens", "per_hour_tokens"}


def test_compact_merges_only_runs_of_the_same_kind() -> None:
    chunks = [
        {"type": "user", "text": "q"},
        {"type": "reasoning", "text": "a"}, {"type": "reasoning", "text": "b"},
        {"type": "reasoning", "text": "", "redacted": True},
        {"type": "content", "text": "x"}, {"type": "content", "text": "y"},
        {"type": "tool_call", "id": "1", "name": "t", "args": {}},
        {"type": "content", "text": "z"},
    ]  # fmt: skip
    assert compact(chunks) == [
        {"type": "user", "text": "q"},
        {"type": "reasoning", "text": "ab"},
        {"type": "reasoning", "text": "", "redacted": True},
        {"type": "content", "text": "xy"},
        {"type": "tool_call", "id": "1", "name": "t", "args": {}},
        {"type": "content", "text": "z"},
    ]
    assert chunks[1] == {"type": "reasoning", "text": "a"}  # the input is not changed


def test_bad_arguments_give_clear_errors(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="follow_up_mode"):
        make(chat_store, tools, follow_up_mode="merge")
    w = make(chat_store, tools)
    with pytest.raises(ValueError, match="empty"):
        w.send("  ")


def test_the_front_end_bundle_joins_renderer_and_glue() -> None:
    esm = ChatWidget._esm
    assert "export function createFlow" in esm
    assert "export default { render: renderChat }" in esm
    assert "import " not in esm.replace("// ", "")  # anywidget's blob URL cannot resolve imports
    assert ".tx-flow" in ChatWidget._css
