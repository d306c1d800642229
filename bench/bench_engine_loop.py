"""Loop overhead per streamed event, over iterating the fake backend alone.

Scenario (issue 2): the fake backend streams 100,000 text events and 200 tool
round trips through ``run_agent`` with a file store. Printed: the total
overhead per event (which includes persisting 401 messages and running 200
tools) and, apart, the pure streaming overhead of 100,000 text events in one
answer. Scale with BENCH_EVENTS / BENCH_TOOL_TRIPS.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore, ask
from tahrix_lab.agent.backends.fake import text, tool_call

EVENTS = int(os.environ.get("BENCH_EVENTS", 100_000))
TRIPS = int(os.environ.get("BENCH_TOOL_TRIPS", 200))


def script(events: int, trips: int) -> list[list[Any]]:
    per_turn = events // (trips + 1)
    turns: list[list[Any]] = [[text("x")] * per_turn + [tool_call("noop", {"i": i})] for i in range(trips)]
    turns.append([text("x")] * (events - per_turn * trips))
    return turns


def bare(turns: list[list[Any]]) -> float:
    backend = FakeBackend(turns, usage=False)
    started = time.perf_counter()
    for _ in turns:
        for _event in backend.stream(system=None, messages=[], tools=[], model="m", inference=None):
            pass
    return time.perf_counter() - started


def through_loop(turns: list[list[Any]], db: Path) -> float:
    registry = ToolRegistry()
    registry.register(name="noop")(lambda args, ctx: {"ok": True})
    store = TranscriptStore(db)
    session = store.create_session(user="bench")
    backend = FakeBackend(turns, usage=False)
    started = time.perf_counter()
    for _event in ask(
        store, session, "go", backend=backend, model="m", registry=registry, max_tool_cycles=10_000
    ):
        pass
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def measure(label: str, events: int, trips: int) -> None:
    turns = script(events, trips)
    with tempfile.TemporaryDirectory() as tmp:
        t_bare = min(bare(turns) for _ in range(3))
        t_loop = min(through_loop(turns, Path(tmp) / f"{label}-{i}.duckdb") for i in range(3))
    per_event = (t_loop - t_bare) / events * 1e6
    print(f"{label}: {events:,} text events, {trips} tool round trips")
    print(f"  bare fake backend   {t_bare * 1000:9.1f} ms")
    print(f"  through run_agent   {t_loop * 1000:9.1f} ms")
    print(f"  loop overhead       {per_event:9.2f} µs per event (target ≤ 2 µs)")


if __name__ == "__main__":
    measure("streaming only", EVENTS, 0)
    measure("with tools", EVENTS, TRIPS)
