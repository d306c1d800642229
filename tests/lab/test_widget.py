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

    def streamed(self, since: int = 0) -> list[dict[str, Any]]:
        """The live chunks, checked to arrive in order with no gap and no overlap."""
        out: list[dict[str, Any]] = []
        seen = since
        for msg in self.custom:
            if msg.get("type") == "chunks":
                assert msg["from"] == seen, "live chunks must arrive in order with no gap"
                assert msg["to"] > msg["from"]
                seen = msg["to"]
                out.extend({k: v for k, v in c.items() if k != "nonce"} for c in msg["chunks"])
        return compact(out)


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
        "user", "reasoning", "content", "tool_call", "usage", "tool_start", "tool_result", "effects",
        "follow_up", "reasoning", "content", "usage", "done",
    ]  # fmt: skip
    assert w.chunks[6]["result"] == {"label": "exchange"}
    assert w.chunks[-3] == {"type": "content", "text": "It is an exchange."}
    assert w.chunks == w.history()
    # every chunk went out live, once, in order; the settled snapshot was sent
    # once, when the run ended (with its seq), then busy flipped (the running
    # answer's snapshot, `live`, is tests/lab/test_widget_live.py's subject)
    assert rec.streamed() == w.chunks
    assert w.seq == 14  # 3 content tokens became one block
    snapshots = [st for st in rec.states if "chunks" in st]
    assert snapshots == [{"chunks": w.chunks, "seq": 14}]
    assert rec.states[-1] == {"busy": False}
    assert w.busy is False
    roles = [m.role for m in chat_store.load_messages(w.session_id)]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_traffic_is_linear_tokens_are_batched_and_the_snapshot_is_sent_once(
    chat_store: TranscriptStore, tools: ToolRegistry
) -> None:
    def paced(messages: Any, specs: Any) -> Iterator[Any]:
        for i in range(300):
            if i % 50 == 0:
                threading.Event().wait(0.06)  # a pause longer than a flush interval
            yield text(f"t{i} ")

    w = make(chat_store, tools, backend=FakeBackend([paced]))
    rec = Recorder(w)
    w.ask("long answer", timeout=30)
    assert rec.streamed() == w.chunks
    assert [c["type"] for c in w.chunks] == ["user", "content", "usage", "done"]
    assert w.chunks[1]["text"] == "".join(f"t{i} " for i in range(300))
    live = [m for m in rec.custom if m["type"] == "chunks"]
    assert 3 <= len(live) < 40  # batched: not one message per token, but still live
    assert sum(len(m["chunks"]) for m in live) < 60
    assert len([st for st in rec.states if "chunks" in st]) == 1


def test_resync_resends_what_a_late_view_missed(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    started, gate = threading.Event(), threading.Event()

    def slow(messages: Any, specs: Any) -> Iterator[Any]:
        yield text("first ")
        yield text("second")
        started.set()
        gate.wait(10)
        yield text(" third")

    w = make(chat_store, tools, backend=FakeBackend([slow]))
    w.send("q")
    assert started.wait(10)
    rec = Recorder(w)
    w._on_front_end(w, {"type": "resync", "since": 0}, [])  # mid-run, from the start of this run
    assert rec.custom[-1] == {
        "type": "chunks", "from": 0, "to": 3,
        "chunks": [{"type": "user", "text": "q"}, {"type": "content", "text": "first second"}],
    }  # fmt: skip
    sent = len(rec.custom)  # what was pending went out first, so live messages go on from `to`
    w._on_front_end(w, {"type": "resync", "since": 3}, [])  # nothing missing
    w._on_front_end(w, {"type": "resync", "since": "x"}, [])
    assert len(rec.custom) == sent
    gate.set()
    assert w.wait(30)
    rest = [m for m in rec.custom[sent:] if m["type"] == "chunks"]
    assert rest[0]["from"] == 3
    assert compact([c for m in rest for c in m["chunks"]])[0] == {"type": "content", "text": " third"}
    # after the run, an older view gets the whole compact snapshot
    rec.custom.clear()
    w._on_front_end(w, {"type": "resync", "since": 1}, [])
    assert rec.custom == [{"type": "snapshot", "seq": w.seq, "chunks": w.chunks}]


def test_front_end_send_and_stop_messages(chat_store: TranscriptStore, tools: ToolRegistry) -> None:
    w = make(chat_store, tools)
    rec = Recorder(w)
    w._on_front_end(w, {"type": "send", "text": "  from the text box  ", "nonce": "n1"}, [])
    assert w.wait(30)
    assert w.chunks[0] == {"type": "user", "text": "from the text box"}
    assert w.chunks[-1]["type"] == "done"
    # the live copy names the front end's nonce, so the view that showed it does not draw it twice
    assert rec.custom[0]["chunks"][0] == {"type": "user", "text": "from the text box", "nonce": "n1"}
    w._on_front_end(w, {"type": "send", "text": "   ", "nonce": "n2"}, [])  # refused calmly
    assert not w.running
    assert rec.custom[-1]["type"] == "refused" and rec.custom[-1]["nonce"] == "n2"


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
    # the stored transcript maps back to exactly the chunks the live run sent:
    # follow-up boundary, tool start, duration, effects and the turn's end included
    assert again.chunks == first.chunks
    assert again.chunks[-3] == {"type": "content", "text": "It is an exchange."}
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
