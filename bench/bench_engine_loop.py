"""Loop overhead per streamed event, over iterating the fake backend alone.

Scenario (issue 2): the fake backend streams 100,000 text events and 200 tool
round trips through ``run_agent`` with a file store. Printed: the total
overhead per event (which includes persisting 401 messages and running 200
tools) and, apart, the pure streaming overhead of 100,000 text events in one
answer. Scale with BENCH_EVENTS / BENCH_TOOL_TRIPS.

``--record postgresql`` measures the same loop with the record in PostgreSQL (a
fresh database per run on a server of its own, or $TAHRIX_BENCH_PG) beside the
DuckDB file in one run: the loop writes per message, never per token, so the
per-event overhead stays the same on either engine (issue 26).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.agent.storage.pg_server

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


def through_loop(turns: list[list[Any]], db: Path | str) -> float:
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


def measure(label: str, events: int, trips: int, records: dict[str, Callable[[], Path | str]]) -> None:
    turns = script(events, trips)
    t_bare = min(bare(turns) for _ in range(3))
    print(f"{label}: {events:,} text events, {trips} tool round trips")
    print(f"  bare fake backend   {t_bare * 1000:9.1f} ms")
    for name, fresh in records.items():
        t_loop = min(through_loop(turns, fresh()) for _ in range(3))
        per_event = (t_loop - t_bare) / events * 1e6
        print(f"  through run_agent, record in {name}: {t_loop * 1000:9.1f} ms, "
              f"overhead {per_event:6.2f} µs per event (target ≤ 2 µs)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", choices=["duckdb", "postgresql"], action="append",
                    help="where the record is (repeatable; default: the DuckDB file)")  # fmt: skip
    args = ap.parse_args()
    wanted = args.record or ["duckdb"]
    server = None
    with tempfile.TemporaryDirectory() as tmp:
        files = iter(range(1_000_000))
        records: dict[str, Callable[[], Path | str]] = {}
        if "duckdb" in wanted:
            records["a DuckDB file"] = lambda: Path(tmp) / f"loop-{next(files)}.duckdb"
        if "postgresql" in wanted:
            url = os.environ.get("TAHRIX_BENCH_PG")
            if url:
                records["PostgreSQL"] = lambda: url
            else:
                from tests.agent.storage.pg_server import PgServer

                server = PgServer()
                server.start()
                pg = server
                records["PostgreSQL"] = lambda: pg.url(pg.create_database())
        try:
            measure("streaming only", EVENTS, 0, records)
            measure("with tools", EVENTS, TRIPS, records)
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
