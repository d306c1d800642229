"""The running answer's synced snapshot (``live`` + ``seq``): a view that renders at any moment of a
run (late after Run All, re-displayed, a reloaded page) draws it and goes on with the next live
message, ending with exactly the conversation; and an error row carries the run's log records."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.agent.errors import BackendError
from tahrix_lab.lab.widget import SNAPSHOT_S, ChatWidget, compact


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TranscriptStore]:
    s = TranscriptStore(tmp_path / "chat.duckdb")
    yield s
    s.close()


class Wire:
    """Everything the widget publishes, in order: ("custom", content) and ("update", state)."""

    def __init__(self, widget: ChatWidget) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        widget.comm.publish_msg = self.publish

    def publish(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **kw: Any
    ) -> None:
        if isinstance(data, dict) and data.get("method") in ("custom", "update"):
            with self.lock:
                self.log.append((data["method"], data.get("content") or data.get("state") or {}))


def late_view(wire: Wire, start: int, state: dict[str, Any]) -> list[dict[str, Any]]:
    """What chat.js draws when it renders after wire.log[:start]: the synced state, then the
    live messages that start where it is (one that does not is a gap it leaves to the next snapshot)."""
    drawn = list(state.get("chunks", [])) + list(state.get("live", []))
    seen = state.get("seq", 0)
    for kind, body in wire.log[start:]:
        if kind == "custom" and body.get("type") == "chunks" and body["from"] == seen:
            drawn += [{k: v for k, v in c.items() if k != "nonce"} for c in body["chunks"]]
            seen = body["to"]
        elif kind == "update" and "seq" in body and body["seq"] != seen:
            drawn = list(body.get("chunks", state.get("chunks", []))) + list(body.get("live", []))
            state = {**state, **body}
            seen = body["seq"]
        elif kind == "update":
            state = {**state, **body}
    return compact([{k: v for k, v in c.items() if k != "nonce"} for c in drawn])


def slow_backend(words: int = 60, delay: float = 0.02) -> FakeBackend:
    def answer(messages: Any, specs: Any) -> Iterator[Any]:
        for i in range(words):
            threading.Event().wait(delay)
            yield text(f"w{i} ")

    def look(messages: Any, specs: Any) -> Iterator[Any]:
        yield reasoning("Look it up first.")
        threading.Event().wait(0.3)
        yield tool_call("pause", {}, id="p1")

    return FakeBackend([look, answer])


def tools() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.register(parameters={"type": "object", "properties": {}})
    def pause(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Wait a little."""
        threading.Event().wait(0.6)  # a tool slower than the snapshot interval
        return {"headline": "waited", "ok": True}

    return reg


RESYNC = {"method": "custom", "content": {"type": "resync", "since": 0}}


def test_a_view_that_asks_while_ask_blocks_gets_the_running_answer(store: TranscriptStore) -> None:
    w = ChatWidget(store=store, backend=slow_backend(), model="fake-model", registry=tools())
    initial = {"chunks": list(w.chunks), "live": [], "seq": w.seq}
    wire = Wire(w)
    done = threading.Event()

    def views_render() -> None:  # a view renders every 0.2 s; the kernel sees its request early
        while not done.wait(0.2):
            w._early(RESYNC)  # what kernel_wait.route_early calls on the shell-channel thread

    asker = threading.Thread(target=views_render)
    w.send("Where did it go?")
    asker.start()
    w.wait(30)
    done.set()
    asker.join()
    updates = [(i, body) for i, (kind, body) in enumerate(wire.log) if kind == "update" and "live" in body]
    running = [(i, b) for i, b in updates if b["live"]]
    # answered while it streamed (the run takes > 1.5 s), at most about every SNAPSHOT_S
    assert len(running) >= 4
    assert len(running) <= 2 + 3.0 / SNAPSHOT_S
    # each snapshot ends where a live message already sent ended
    for i, body in running:
        ends = [b["to"] for kind, b in wire.log[:i] if kind == "custom" and b.get("type") == "chunks"]
        assert ends and body["seq"] == ends[-1]
    # while the slow tool ran (no live message for 0.6 s), a request was still answered
    assert any(any(c["type"] == "tool_call" for c in b["live"]) for _, b in running)
    # the question keeps its nonce in the snapshot, so the view that asked it does not draw it twice
    assert running[0][1]["live"][0]["type"] == "user" and running[0][1]["live"][0].get("nonce")
    # a view that renders at ANY point (and asks) ends with exactly the conversation
    state = dict(initial)
    for i, (kind, body) in enumerate(wire.log):
        assert late_view(wire, i, state) == w.chunks, f"a view rendered after message {i} ends wrong"
        if kind == "update":
            state = {**state, **body}
    assert w.live == [] and w.chunks == w.history()


def test_views_that_are_current_cost_no_snapshot_traffic(store: TranscriptStore) -> None:
    w = ChatWidget(store=store, backend=slow_backend(), model="fake-model", registry=tools())
    wire = Wire(w)
    w.ask("Where did it go?", timeout=30)
    updates = [b for kind, b in wire.log if kind == "update" and "seq" in b]
    assert updates == [{"chunks": w.chunks, "seq": w.seq}]  # only the settled snapshot, at the end
    # a Stop seen early cancels the run
    w2 = ChatWidget(store=store, backend=slow_backend(words=500), model="fake-model", registry=tools())
    w2.send("long")
    w2._early({"method": "custom", "content": {"type": "stop"}})
    assert w2.wait(30)
    assert any(c["type"] == "done" and c.get("stop_reason") == "cancelled" for c in w2.chunks) or any(
        c.get("type") == "tool_result" and c.get("status") == "error" for c in w2.chunks
    )


def test_an_error_row_carries_the_runs_log_for_the_analyst(store: TranscriptStore) -> None:
    logging.getLogger("tahrix_lab").addHandler(logging.NullHandler())  # as notebook 01 does

    def failing(messages: Any, specs: Any) -> Iterator[Any]:
        other = threading.Thread(target=lambda: logging.getLogger("tahrix_lab.x").warning("other thread"))
        other.start()
        other.join()
        yield BackendError("upstream said 529: overloaded (request id r-123)", status=529)

    w = ChatWidget(store=store, backend=FakeBackend([failing]), model="fake-model", retry=None)
    w.ask("q", timeout=30)
    error = next(c for c in w.chunks if c["type"] == "error")
    assert "operator" in error["message"] or "provider" in error["message"]  # the calm sentence stays
    assert "request id r-123" in error["details"]  # the raw provider error, on demand
    # another thread's records are not this run's
    assert "other thread" not in error["details"]


def test_without_error_details_the_row_has_none(store: TranscriptStore) -> None:
    backend = FakeBackend([[BackendError("raw provider text", status=500)]])
    w = ChatWidget(store=store, backend=backend, model="fake-model", retry=None, error_details=False)
    w.ask("q", timeout=30)
    assert "details" not in next(c for c in w.chunks if c["type"] == "error")
