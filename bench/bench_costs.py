"""Benchmark: team cost queries over many stored model calls, DuckDB file and PostgreSQL side by side.

The same synthetic calls are generated inside each engine (DuckDB's ``range()``,
PostgreSQL's ``generate_series``: setup never goes through Python): a team of 50 analysts
on 5 teams, 8 models (one priced in input-token tiers, one with no known price), 50 calls
a session (an investigation's tool steps), a quarter of the sessions linked to one of 40 cases, spread over 180 days.
Then, on each engine, ``lab.costs.costs`` (the engine groups and sums; Python prices the
groups):

* grouped by user, model and day (the issue's figure; target <= 2 s at 10,000,000 calls
  on PostgreSQL);
* grouped by team and case;
* one user's month-to-date spend by model.

PostgreSQL answers these from its ``usage_daily`` rollup (kept by a trigger as messages are
written; here rebuilt once after generating, as its migration does) and DuckDB from the
calls themselves. Each is the median of a few runs after a first run (which also learns the models' price
breaks once per process; printed too). PostgreSQL: ``$TAHRIX_BENCH_PG`` (a URL to an empty
database), else a throwaway server started here like the test suite's.

    python bench/bench_costs.py                   # 1,000,000 calls (quick)
    python bench/bench_costs.py --calls 10000000  # the issue's scale
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tahrix_lab.agent import TranscriptStore  # noqa: E402
from tahrix_lab.agent.storage import PostgresStore  # noqa: E402
from tahrix_lab.lab.costs import costs, month_to_date  # noqa: E402

MODELS = [
    ("gpt-4o", "openai"),
    ("gpt-4o-mini", "openai"),
    ("gpt-4.1", "openai"),
    ("o3", "openai"),  # its price changed on 2025-06-10
    ("claude-sonnet-4-5", "openai"),  # priced in tiers: calls over 200k input tokens cost more
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "bedrock"),
    ("amazon.nova-pro-v1:0", "bedrock"),
    ("my-local-llama", "openai"),  # no price known: its cost stays NULL
]
USERS, TEAMS, CASES, DAYS, CALLS_PER_SESSION = 50, 5, 40, 180, 50


def _sql(calls: int, end: datetime, dialect: str) -> list[str]:
    """The generating statements; ``dialect`` picks the series and interval spelling."""
    sessions = (calls + CALLS_PER_SESSION - 1) // CALLS_PER_SESSION
    start = (end - timedelta(days=DAYS)).isoformat()
    span = DAYS * 86400
    if dialect == "duckdb":
        series = "range({n}) t({v})"
        secs = "to_seconds(({e})::BIGINT)"
    else:
        series = "generate_series(0::BIGINT, {n} - 1) {v}"
        secs = "make_interval(secs => ({e})::BIGINT)"
    models = " ".join(f"WHEN {i} THEN '{m}'" for i, (m, _) in enumerate(MODELS))
    backends = " ".join(f"WHEN {i} THEN '{b}'" for i, (_, b) in enumerate(MODELS))
    div = "//" if dialect == "duckdb" else "/"
    # the same model for a session on both engines (a multiplicative hash of its number)
    pick = f"((i {div} {CALLS_PER_SESSION}) * 2654435761 % 4294967296) % {len(MODELS)}"
    return [
        'INSERT INTO sessions (id, "user", team, purpose, status, created_at) '
        f"SELECT 's' || j, 'user-' || (j % {USERS}), 'team-' || (j % {USERS} % {TEAMS}), 'investigation', 'closed', "
        f"TIMESTAMPTZ '{start}' + {secs.format(e=f'j * {CALLS_PER_SESSION} * {span} {div} {calls}')} "
        f"FROM {series.format(n=sessions, v='j')}",
        'INSERT INTO session_cases (session_id, case_id, "grant", created_by, created_at) '
        f"SELECT 's' || j, 'CASE-' || (j % {CASES}), '{{}}', 'user-' || (j % {USERS}), TIMESTAMPTZ '{start}' "
        f"FROM {series.format(n=sessions, v='j')} WHERE j % 4 = 0",
        "INSERT INTO messages (session_id, position, role, created_at, backend, model_id, stop_reason, "
        "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, parts) "
        f"SELECT 's' || (i {div} {CALLS_PER_SESSION}), (i % {CALLS_PER_SESSION})::INTEGER, 'assistant', "
        f"TIMESTAMPTZ '{start}' + {secs.format(e=f'i * {span} {div} {calls}')}, "
        f"CASE {pick} {backends} END, CASE {pick} {models} END, 'end_turn', "
        # one call in 500 is a long-context one (over the 200k tier)
        f"CASE WHEN i % 500 = 0 THEN 250000 ELSE 400 + (i * 37) % 6000 END, 20 + (i * 13) % 900, "
        f"CASE WHEN i % 3 = 0 THEN (400 + (i * 37) % 6000) {div} 2 ELSE 0 END, 0, '[]' "
        f"FROM {series.format(n=calls, v='i')}",
    ]


def fill_duckdb(store: TranscriptStore, calls: int, end: datetime) -> None:
    with store.connection.write() as cur:
        for sql in _sql(calls, end, "duckdb"):
            cur.execute(sql)
    store.cursor().execute("CHECKPOINT")


def fill_postgres(url: str, calls: int, end: datetime) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        # generated rows skip the per-row rollup trigger; the rollup is then rebuilt from
        # them in one statement, as the migration that adds it does (pg_schema 0003)
        conn.execute("ALTER TABLE messages DISABLE TRIGGER usage_daily_add")
        for sql in _sql(calls, end, "postgresql"):
            conn.execute(sql)
        conn.execute("ALTER TABLE messages ENABLE TRIGGER usage_daily_add")
        conn.execute("SELECT usage_daily_rebuild()")
        conn.execute("VACUUM ANALYZE")


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """First run's seconds, the median of ``repeat`` more, and the last answer."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times), out


def measure(name: str, store: TranscriptStore, end: datetime, repeat: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for label, fn in (
        ("user,model,day", lambda: costs(store, by=("user", "model", "day"))),
        ("team,case", lambda: costs(store, by=("team", "case"))),
        ("month_to_date", lambda: month_to_date(store, "user-7", now=end)),
    ):
        first, median, df = timed(fn, repeat)
        figures[label] = (median, df)
        print(
            f"{name:10s} costs by {label:15s} {median:7.2f} s median of {repeat} (first {first:5.2f} s) "
            f"-> {len(df):,} rows, ${df['cost_usd'].sum():,.2f}, {int(df['unknown_cost_calls'].sum()):,} "
            "calls of unknown price",
            flush=True,
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=int(os.environ.get("BENCH_CALLS", "1000000")))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    end = datetime.now(UTC).replace(microsecond=0)
    print(f"{args.calls:,} calls; {USERS} users on {TEAMS} teams, {len(MODELS)} models, {DAYS} days")
    print(
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores",
        flush=True,
    )
    server = None
    url = os.environ.get("TAHRIX_BENCH_PG")
    if not url:
        from tests.agent.storage.pg_server import PgServer

        server = PgServer()
        server.start()
        url = server.url(server.create_database())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            duck = TranscriptStore(os.path.join(tmp, "bench.duckdb"))
            t0 = time.perf_counter()
            fill_duckdb(duck, args.calls, end)
            print(f"duckdb     generated in {time.perf_counter() - t0:.1f} s", flush=True)
            d = measure("duckdb", duck, end, args.repeat)
            duck.close()
        pg = TranscriptStore(url)
        t0 = time.perf_counter()
        fill_postgres(url, args.calls, end)
        print(f"postgresql generated in {time.perf_counter() - t0:.1f} s", flush=True)
        p = measure("postgresql", pg, end, args.repeat)
        for key in d:
            same = abs(d[key][1]["cost_usd"].sum() - p[key][1]["cost_usd"].sum()) < 1e-6 * max(
                1.0, d[key][1]["cost_usd"].sum()
            )
            print(f"{key:15s} postgresql / duckdb = {p[key][0] / d[key][0]:.2f}; same total: {same}")
        verdict = "met" if p["user,model,day"][0] <= 2 else "NOT met"
        print(f"target (by user, model and day on PostgreSQL <= 2 s at {args.calls:,} calls): {verdict}")
        print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")
    finally:
        PostgresStore.close_pools()
        if server is not None:
            server.destroy()


if __name__ == "__main__":
    main()
