"""How much the adapters add on top of the bare SDKs, per streamed event.

A loopback server streams N text deltas and M fragmented tool calls (Chat
Completions SSE for OpenAI, AWS event-stream for Bedrock). Each stream is
consumed twice in one run: by bare SDK iteration (``for chunk in stream``)
and through the adapter (``for event in backend.stream(...)``). Printed: the
best of R rounds for each, the adapter's extra time per wire event and the
ratio (target: <= 1.05).

    python bench/bench_adapters.py            # quick: 10,000 deltas, 100 tool calls
    python bench/bench_adapters.py --full     # the target scale: 100,000 and 1,000
    BENCH_ADAPTERS_DELTAS=50000 BENCH_ADAPTERS_TOOLS=500 BENCH_ADAPTERS_ROUNDS=5 python bench/bench_adapters.py
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import boto3  # noqa: E402
import botocore.config  # noqa: E402
import openai  # noqa: E402
from wire import eventstream, sse  # noqa: E402
from wire.server import Reply, WireServer  # noqa: E402

from tahrix_lab.agent.backends.bedrock import BedrockBackend  # noqa: E402
from tahrix_lab.agent.backends.bedrock import map_stream as bedrock_map_stream  # noqa: E402
from tahrix_lab.agent.backends.openai import OpenAIBackend  # noqa: E402
from tahrix_lab.agent.backends.openai import map_stream as openai_map_stream  # noqa: E402
from tahrix_lab.agent.transcript import Message  # noqa: E402

FULL = "--full" in sys.argv
DELTAS = int(os.environ.get("BENCH_ADAPTERS_DELTAS", 100_000 if FULL else 10_000))
TOOLS = int(os.environ.get("BENCH_ADAPTERS_TOOLS", 1_000 if FULL else 100))
ROUNDS = int(os.environ.get("BENCH_ADAPTERS_ROUNDS", 3))
MESSAGES = [Message.user("bench")]


def script() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"kind": "text", "text": f"tok{i} "} for i in range(DELTAS)]
    for i in range(TOOLS):
        args = {"address": f"0x{i:040x}", "chain": "eth", "hops": i % 5, "note": "x" * 40}
        events.append({"kind": "tool_use", "id": f"call_{i}", "name": "lookup", "input": args})
    return events


def body_chunks(pieces: list[bytes], size: int = 64 * 1024) -> list[bytes]:
    data = b"".join(pieces)
    return [data[i : i + size] for i in range(0, len(data), size)]


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    count = fn()
    return time.perf_counter() - start, count


def compare(
    name: str, bare: Callable[[], int], adapter: Callable[[], int], mapping: Callable[[], int]
) -> None:
    bare_best = adapter_best = float("inf")
    wire_events = events = 0
    for _ in range(ROUNDS):  # interleaved, so drift on a shared machine hits both
        t, wire_events = timed(bare)
        bare_best = min(bare_best, t)
        t, events = timed(adapter)
        adapter_best = min(adapter_best, t)
    mapping_best = min(timed(mapping)[0] for _ in range(ROUNDS))
    extra = (adapter_best - bare_best) / wire_events * 1e6
    print(
        f"{name:8s} wire events {wire_events:>8,}  adapter events {events:>8,}  "
        f"bare {bare_best:7.3f}s  adapter {adapter_best:7.3f}s  "
        f"extra {extra:+6.2f} µs/event  ratio {adapter_best / bare_best:5.3f}"
    )
    # The same mapping over the SDK's already-parsed objects: the adapter's own
    # cost without the server and the network, so machine noise cannot hide it.
    print(
        f"{'':8s} mapping alone {mapping_best:7.3f}s = {mapping_best / wire_events * 1e6:5.2f} µs/event, "
        f"ratio (bare + mapping) / bare {(bare_best + mapping_best) / bare_best:5.3f}"
    )


def bench_openai(events: list[dict[str, Any]]) -> None:
    chunks = body_chunks(sse.turn_chunks(events, fragment=8))
    reply = lambda _request: Reply(chunks=chunks, content_type="text/event-stream")  # noqa: E731
    with WireServer(reply) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
        backend = OpenAIBackend(client=client)

        def bare() -> int:
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "bench"}], stream=True
            )
            return sum(1 for _ in stream)

        def adapter() -> int:
            gen = backend.stream(system=None, messages=MESSAGES, tools=[], model="m", inference=None)
            return sum(1 for _ in gen)

        parsed = list(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "bench"}], stream=True
            )
        )

        def mapping() -> int:
            return sum(1 for _ in openai_map_stream(parsed))

        compare("openai", bare, adapter, mapping)
        client.close()


def bench_bedrock(events: list[dict[str, Any]]) -> None:
    chunks = body_chunks(eventstream.turn_frames(events, fragment=8))
    reply = lambda _request: Reply(chunks=chunks, content_type=eventstream.CONTENT_TYPE)  # noqa: E731
    with WireServer(reply) as server:
        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            config=botocore.config.Config(retries={"total_max_attempts": 1}),
        )
        backend = BedrockBackend(client=client)

        def bare() -> int:
            response = client.converse_stream(
                modelId="m", messages=[{"role": "user", "content": [{"text": "bench"}]}]
            )
            return sum(1 for _ in response["stream"])

        def adapter() -> int:
            gen = backend.stream(system=None, messages=MESSAGES, tools=[], model="m", inference=None)
            return sum(1 for _ in gen)

        response = client.converse_stream(
            modelId="m", messages=[{"role": "user", "content": [{"text": "bench"}]}]
        )
        parsed = list(response["stream"])

        def mapping() -> int:
            return sum(1 for _ in bedrock_map_stream(parsed))

        compare("bedrock", bare, adapter, mapping)
        client.close()


def main() -> None:
    events = script()
    print(f"adapters vs bare SDK: {DELTAS:,} text deltas, {TOOLS:,} fragmented tool calls, best of {ROUNDS}")
    bench_openai(events)
    bench_bedrock(events)


if __name__ == "__main__":
    main()
