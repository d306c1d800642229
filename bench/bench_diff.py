"""Benchmark: diff two 500-message sessions (target <= 200 ms).

Each session has 100 user turns; each turn is a tool call, its result and a
~60-word answer (5 messages per turn). B differs from A in wording, in some
tool arguments and in an extra tool call every fifth turn. Prices come from
genai-prices for every call, as in a real diff.

    .venv/bin/python bench/bench_diff.py
"""

from __future__ import annotations

import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from tahrix_lab.agent.transcript import Message, Part, Usage
from tahrix_lab.lab.diff import diff_messages

WORDS = [
    "the",
    "funds",
    "moved",
    "from",
    "the",
    "exchange",
    "wallet",
    "through",
    "a",
    "bridge",
    "into",
    "a",
    "mixer",
    "deposit",
    "address",
    "and",
    "then",
    "split",
    "across",
    "several",
    "fresh",
    "addresses",
    "before",
    "reaching",
    "another",
    "exchange",
    "where",
    "they",
    "were",
    "cashed",
    "out",
]


def session(seed: int, turns: int = 100, variant: bool = False) -> list[Message]:
    rng = random.Random(seed)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    out: list[Message] = []
    for t in range(turns):
        at += timedelta(minutes=1)
        out.append(
            Message(
                role="user",
                parts=[Part.of_text(f"Question {t}: where did 0x{t:04x} send funds?")],
                created_at=at,
            )
        )
        calls = [
            Part.of_tool_use(
                f"c{t}a", "trace_funds", {"address": f"0x{t:04x}", "depth": 2 + (variant and t % 3 == 0)}
            )
        ]
        if variant and t % 5 == 0:
            calls.append(Part.of_tool_use(f"c{t}b", "lookup_address", {"address": f"0x{t:04x}"}))
        model = "us.anthropic.claude-3-5-sonnet-20240620-v1:0" if variant else "gpt-4o"
        backend = "bedrock" if variant else "openai"
        out.append(Message(role="assistant", parts=calls, backend=backend, model_id=model, stop_reason="tool_use",
                           usage=Usage(2000 + t * 40, 60, cache_read_tokens=1000), latency_ms=800.0, ttft_ms=300.0, created_at=at))  # fmt: skip
        out.append(Message(role="tool", parts=[Part.of_tool_result(p.tool_use_id or "", p.tool_name, {"hops": [{"to": "0x1", "value": 1.5}] * 5}) for p in calls], created_at=at))  # fmt: skip
        words = [rng.choice(WORDS) for _ in range(60)]
        out.append(Message(role="assistant", parts=[Part.of_text(" ".join(words))], backend=backend, model_id=model,
                           stop_reason="end_turn", usage=Usage(2100 + t * 40, 90), latency_ms=1200.0, ttft_ms=250.0, created_at=at))  # fmt: skip
        out.append(Message(role="tool", parts=[], created_at=at))  # keeps 5 messages a turn
    return out


def main() -> None:
    a = session(1)
    b = session(2, variant=True)
    assert len(a) == len(b) == 500
    diff_messages(a, b)  # warm the price lookups once
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        d = diff_messages(a, b)
        d.to_frame()
        times.append(time.perf_counter() - t0)
    html_t0 = time.perf_counter()
    d._repr_html_()
    html_ms = (time.perf_counter() - html_t0) * 1000
    med = statistics.median(times) * 1000
    tot = d.totals
    print(
        f"diff of two 500-message sessions (+ to_frame): {med:.0f} ms median of 7 (min {min(times) * 1000:.0f} ms)"
    )
    print(f"_repr_html_: {html_ms:.0f} ms")
    print(
        f"{len(d.turns)} turns, mean similarity {tot['mean_similarity']:.0%}, tools =/+/-/~/≠ "
        f"{tot['tools_same']}/{tot['tools_added']}/{tot['tools_removed']}/{tot['tools_args_changed']}/"
        f"{tot['tools_result_changed']}, "
        f"cost ${tot['cost_usd_a']:.4f} -> ${tot['cost_usd_b']:.4f}"
    )
    print(f"target <= 200 ms: {'OK' if med <= 200 else 'ABOVE TARGET'}")


if __name__ == "__main__":
    main()
