"""Persistence and loading on a file store (issue 2).

- median time to persist one assistant message of 50 parts (target ≤ 2 ms)
- ``load_messages`` for a 1,000-message session (target ≤ 50 ms)

Also prints the machine's raw write+fsync time, because a durable commit can
never be cheaper than that: DuckDB syncs its write-ahead log on every commit.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from tahrix_lab.agent import Message, Part, TranscriptStore, Usage


def fsync_ms(folder: Path) -> float:
    path = folder / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    times = []
    for _ in range(50):
        t = time.perf_counter()
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
        times.append(time.perf_counter() - t)
    os.close(fd)
    path.unlink()
    return statistics.median(times) * 1000


def fifty_part_message(i: int) -> Message:
    parts = []
    for k in range(50):
        if k % 5 == 4:
            parts.append(
                Part.of_tool_use(
                    f"t{i}-{k}", "lookup_address", {"address": f"0x{k:040x}", "chain": "ethereum"}
                )
            )
        else:
            parts.append(Part.of_text(f"chunk {k} of the answer, with some words in it. " * 2))
    return Message(
        role="assistant", parts=parts, backend="bedrock", model_id="m", stop_reason="tool_use",
        usage=Usage(1000, 200, 0, 0, 0), tools_offered=["lookup_address"], latency_ms=1.0, ttft_ms=0.5,
    )  # fmt: skip


def investigation_message(i: int) -> Message:
    """A realistic cycle: question, reasoning + text + two tool calls, two results, answer."""
    kind = i % 4
    if kind == 0:
        return Message.user(f"Where did the funds from tx {i} go next?")
    if kind == 1:
        return Message(
            role="assistant",
            parts=[
                Part.of_reasoning("I should trace forward two hops and check labels. " * 3, signature="c2ln" * 20),
                Part.of_text("Let me trace the funds."),
                Part.of_tool_use(f"a{i}", "trace_funds", {"start": f"0x{i:064x}", "max_hops": 2}),
                Part.of_tool_use(f"b{i}", "lookup_address", {"address": f"0x{i:040x}"}),
            ],
            backend="bedrock", model_id="m", stop_reason="tool_use", usage=Usage(3000, 300, 2000, 0, 120),
        )  # fmt: skip
    if kind == 2:
        rows = [{"tx_hash": f"0x{i:064x}", "usd": 1234.5, "label": "ExchangeA"} for _ in range(8)]
        return Message(
            role="tool",
            parts=[
                Part.of_tool_result(f"a{i}", "trace_funds", {"edges": rows, "truncated": False}),
                Part.of_tool_result(f"b{i}", "lookup_address", {"labels": rows[:2]}),
            ],
        )
    return Message(
        role="assistant", parts=[Part.of_text("The funds reached ExchangeA deposit addresses. " * 4)]
    )


def heavy_message(i: int) -> Message:
    return Message.user(f"question {i}") if i % 2 == 0 else fifty_part_message(i)


def main() -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        folder = Path(tmp)
        store = TranscriptStore(folder / "bench.duckdb")
        session = store.create_session(user="bench")
        samples = []
        for i in range(300):
            message = fifty_part_message(i)
            t = time.perf_counter()
            store.append_message(session.id, message)
            samples.append(time.perf_counter() - t)
        print(
            f"disk write+fsync (4 KiB)       {fsync_ms(folder):7.2f} ms median (the floor of any durable commit)"
        )
        print(
            f"persist a 50-part message      {statistics.median(samples) * 1000:7.2f} ms median (target ≤ 2 ms)"
        )

        for label, make in (("an investigation", investigation_message), ("half 50-part", heavy_message)):
            long = store.create_session(user="bench")
            for i in range(1000):
                store.append_message(long.id, make(i))
            loads = []
            for _ in range(10):
                t = time.perf_counter()
                messages = store.load_messages(long.id)
                loads.append(time.perf_counter() - t)
            assert len(messages) == 1000
            parts = sum(len(m.parts) for m in messages)
            median = statistics.median(loads) * 1000
            print(
                f"load_messages, 1,000 messages ({label}, {parts:,} parts) {median:7.2f} ms median (target ≤ 50 ms)"
            )
        store.close()

    mem = TranscriptStore(":memory:")
    s = mem.create_session()
    samples = []
    for i in range(300):
        message = fifty_part_message(i)
        t = time.perf_counter()
        mem.append_message(s.id, message)
        samples.append(time.perf_counter() - t)
    print(
        f"persist a 50-part message, in-memory store {statistics.median(samples) * 1000:.2f} ms median (CPU cost without the fsync)"
    )


if __name__ == "__main__":
    main()
