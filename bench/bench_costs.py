"""Benchmark: cost queries over many stored model calls.

Generates synthetic calls straight into the transcript tables with DuckDB's
``range()`` (1,000 users, 20 models — one of them unpriced — over one year,
ten calls a session), then times:

* ``costs(by=("model", "day"))`` over everything;
* one user's month-to-date spend (``month_to_date``).

Target: each <= 1 s at 10,000,000 calls. The default scale is 1,000,000 so a
run stays short; ``BENCH_CALLS=10000000`` for the full scale.

    .venv/bin/python bench/bench_costs.py
    BENCH_CALLS=10000000 .venv/bin/python bench/bench_costs.py
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.lab.costs import costs, month_to_date
from tahrix_lab.lab.costs_rates import refresh_prices

MODELS = [
    ("gpt-4o", "openai"),
    ("gpt-4o-mini", "openai"),
    ("gpt-4.1", "openai"),
    ("gpt-4.1-mini", "openai"),
    ("gpt-4.1-nano", "openai"),
    ("o3", "openai"),
    ("o4-mini", "openai"),
    ("gpt-5", "openai"),
    ("claude-sonnet-4-6", "openai"),  # priced in tiers, changed price in the year
    ("mistral-small-latest", "openai"),  # changed price in the year
    ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", "bedrock"),
    ("anthropic.claude-3-haiku-20240307-v1:0", "bedrock"),
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "bedrock"),
    ("eu.anthropic.claude-3-7-sonnet-20250219-v1:0", "bedrock"),
    ("amazon.nova-pro-v1:0", "bedrock"),
    ("amazon.nova-lite-v1:0", "bedrock"),
    ("meta.llama3-70b-instruct-v1:0", "bedrock"),
    ("mistral.mistral-large-2402-v1:0", "bedrock"),
    ("us.anthropic.claude-opus-4-20250514-v1:0", "bedrock"),
    ("my-local-llama", "openai"),  # no price known: cost stays NULL
]
USERS = 1000
CALLS_PER_SESSION = 10


def generate(store: TranscriptStore, calls: int, end: datetime) -> None:
    sessions = (calls + CALLS_PER_SESSION - 1) // CALLS_PER_SESSION
    start = end - timedelta(days=365)
    span_s = int((end - start).total_seconds())
    cur = store.cursor()
    cur.execute("CREATE TEMP TABLE bench_models (k INTEGER, model_id VARCHAR, backend VARCHAR)")
    cur.executemany(
        "INSERT INTO bench_models VALUES (?, ?, ?)", [[i, m, b] for i, (m, b) in enumerate(MODELS)]
    )
    cur.execute(
        f"""
        INSERT INTO sessions (id, "user", purpose, status, system_prompt, created_at, replay_of, title)
        SELECT 's' || j, 'user-' || ((j * 7919) % {USERS}),
               CASE WHEN j % 4 = 0 THEN 'chat' ELSE 'investigation' END, 'closed', NULL,
               TIMESTAMPTZ '{start.isoformat()}' + to_seconds((j * {CALLS_PER_SESSION} * {span_s} // {calls})::BIGINT),
               NULL, NULL
        FROM range({sessions}) t(j)
        """
    )
    columns = [r[0] for r in cur.execute("DESCRIBE messages").fetchall()]
    # the engine may keep parts inline as a JSON array (NOT NULL) or in their own table
    parts_col, parts_val = (", parts", ", '[]'") if "parts" in columns else ("", "")
    cur.execute(
        f"""
        INSERT INTO messages (session_id, position, role, created_at, backend, model_id, stop_reason,
            raw_stop_reason, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
            reasoning_tokens, tools_offered, latency_ms, ttft_ms{parts_col})
        SELECT 's' || (i // {CALLS_PER_SESSION}), (i % {CALLS_PER_SESSION})::INTEGER, 'assistant',
               TIMESTAMPTZ '{start.isoformat()}' + to_seconds((i * {span_s} // {calls})::BIGINT),
               m.backend, m.model_id, 'end_turn', 'end_turn',
               400 + (i * 37) % 6000, 20 + (i * 13) % 900,
               CASE WHEN i % 3 = 0 THEN (400 + (i * 37) % 6000) // 2 ELSE 0 END, 0, NULL,
               NULL, 800 + (i % 500), 200 + (i % 97){parts_val}
        FROM range({calls}) t(i)
        JOIN bench_models m ON m.k = hash(i // {CALLS_PER_SESSION}) % {len(MODELS)}
        """
    )


def timed(fn: object, repeat: int = 5) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    calls = int(os.environ.get("BENCH_CALLS", "1000000"))
    end = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        store = TranscriptStore(Path(tmp) / "bench.duckdb")
        t0 = time.perf_counter()
        generate(store, calls, end)
        print(f"generated {calls:,} calls in {time.perf_counter() - t0:.1f} s")
        # measure the data at rest, as an operator's queries would meet it
        store.cursor().execute("CHECKPOINT")
        store.close()
        store = TranscriptStore(Path(tmp) / "bench.duckdb")
        t0 = time.perf_counter()
        refresh_prices(store)
        print(f"first price lookup (genai-prices → prices table): {time.perf_counter() - t0:.2f} s")

        t, df = timed(lambda: costs(store, by=("model", "day")))
        print(f"costs(by=('model','day')): {t * 1000:.0f} ms median of 5 -> {len(df):,} rows")  # type: ignore[arg-type]
        user = "user-42"
        t2, mtd = timed(lambda: month_to_date(store, user, now=end))
        print(f"month_to_date({user!r}): {t2 * 1000:.0f} ms median of 5 -> {len(mtd)} models")  # type: ignore[arg-type]
        t3, _ = timed(lambda: costs(store, by=("user",)), repeat=3)
        print(f"costs(by=('user',)) [joins sessions]: {t3 * 1000:.0f} ms median of 3")
        total = df["cost_usd"].sum()  # type: ignore[index]
        unknown = int(df["unknown_cost_calls"].sum())  # type: ignore[index]
        print(f"total ${total:,.2f}; {unknown:,} calls with unknown price ({MODELS[-1][0]})")
        target = "OK" if max(t, t2) <= 1.0 else "ABOVE TARGET"
        print(f"target <= 1 s each at {calls:,} calls: {target}")
        store.close()


if __name__ == "__main__":
    main()
