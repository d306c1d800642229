"""Budget check cost with 1,000,000 stored calls across 1,000 users (issue 2).

Calls are spread over one year in time order, across 20 models (some priced,
one unknown). Printed: the first check (loads the last 30 days), and the p50 /
p95 of ``check(user)`` when each check follows a new call by that user — the
loop's real pattern. Target: p95 ≤ 5 ms. BENCH_CALLS scales it down.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tahrix_lab.agent import Budget, BudgetExceeded, Message, TranscriptStore, Usage

CALLS = int(os.environ.get("BENCH_CALLS", 1_000_000))
USERS = 1000
MODELS = [
    "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o3-mini", "deepseek-reasoner", "deepseek-chat",
    "us.anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic.claude-3-haiku-20240307-v1:0",
    "us.amazon.nova-micro-v1:0", "amazon.nova-lite-v1:0", "amazon.nova-pro-v1:0", "gpt-3.5-turbo",
    "eu.anthropic.claude-3-haiku-20240307-v1:0", "o1-mini", "gpt-4-turbo", "gpt-4o-2024-08-06",
    "claude-3-5-haiku-20241022", "meta.llama3-70b-instruct-v1:0", "my-local-llama",
]  # fmt: skip
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def populate(store: TranscriptStore) -> None:
    cur = store.cursor()
    cur.execute(
        "INSERT INTO sessions SELECT 'sess-' || i, 'user-' || (i % ?), 'chat', 'active', NULL, ?::TIMESTAMPTZ, NULL, NULL "
        "FROM range(?) t(i)",
        [USERS, NOW - timedelta(days=366), USERS * 10],
    )
    cur.execute(
        "CREATE TEMP TABLE models AS SELECT * FROM (SELECT unnest(?) AS model_id, unnest(range(?)) AS k)",
        [MODELS, len(MODELS)],
    )
    cur.execute(
        """
        INSERT INTO messages (
            session_id, position, role, created_at, backend, model_id, stop_reason, raw_stop_reason,
            input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
            tools_offered, latency_ms, ttft_ms, parts)
        SELECT 'sess-' || (i % ?), i // ?, 'assistant',
               ?::TIMESTAMPTZ + to_microseconds((i * ?)::BIGINT),
               CASE WHEN m.model_id LIKE '%:%' THEN 'bedrock' ELSE 'openai' END, m.model_id, 'end_turn', 'end_turn',
               2000 + i % 3000, 100 + i % 700, (i % 4) * 200, 0, NULL, ['lookup_address'], 900.0, 200.0, '[]'
        FROM range(?) t(i) JOIN models m ON m.k = i % ?
        """,
        [
            USERS * 10,
            USERS * 10,
            NOW - timedelta(days=365),
            int(365 * 86400 * 1e6 / CALLS),
            CALLS,
            len(MODELS),
        ],
    )


def main() -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        store = TranscriptStore(Path(tmp) / "budget.duckdb")
        t = time.perf_counter()
        populate(store)
        print(f"populated {CALLS:,} calls for {USERS:,} users in {time.perf_counter() - t:.1f} s")
        clock_now = [NOW]
        budget = Budget(
            per_minute_tokens=200_000, per_hour_tokens=2_000_000, monthly_usd=500.0, global_monthly_usd=1e7,
            clock=lambda: clock_now[0], store=store,
        )  # fmt: skip
        t = time.perf_counter()
        budget.check("user-1")
        print(f"first check (loads the last 30 days): {(time.perf_counter() - t) * 1000:.0f} ms")

        rng = random.Random(7)
        samples = []
        for i in range(500):
            user = f"user-{rng.randrange(USERS)}"
            sessions = store.list_sessions(user=user, limit=1)
            clock_now[0] = NOW + timedelta(seconds=i)
            store.append_message(
                sessions[0].id,
                Message(
                    role="assistant",
                    created_at=clock_now[0],
                    backend="openai",
                    model_id="gpt-4o-mini",
                    usage=Usage(3000, 400),
                    stop_reason="end_turn",
                ),
            )
            t = time.perf_counter()
            with contextlib.suppress(BudgetExceeded):
                budget.check(user)
            samples.append((time.perf_counter() - t) * 1000)
        samples.sort()
        p95 = samples[int(len(samples) * 0.95)]
        print(
            f"check(user) after a new call: p50 {statistics.median(samples):.2f} ms, p95 {p95:.2f} ms (target ≤ 5 ms)"
        )
        store.close()


if __name__ == "__main__":
    main()
