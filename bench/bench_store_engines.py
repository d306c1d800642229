"""The record on a DuckDB file and on PostgreSQL, side by side in one run.

Figures (issue "A team on one record"):
- budget check p95 with N calls in the ledger (default 1,000,000), the budget syncing
  with the store on every check (``sync_every=0``: one indexed query each time, the worst
  case; the default syncs once a second); target ≤ 5 ms on PostgreSQL;
- the budget's first read of the 30-day ledger (once per process: the last hour call by
  call, the rest of the month summed in the engine per user, hour, model and tier);
- transcript write p95 per message (``append_message`` of an assistant answer); ≤ 5 ms;
- the cost query grouped by user, model and day over the same calls (``lab.costs.costs``;
  the median of three after a first run; ``bench_costs.py`` has it at 10,000,000 calls).

The calls: 50 users in 1,000 sessions, spread evenly over the last 40 days, each session
on one of three models (gpt-4o-mini; claude-sonnet-4-5, priced in input-token tiers; a
model with no known price), input sizes from 1,000 to 250,000 tokens. The load average
is printed before and after: other work on the machine shows in every figure.

PostgreSQL: ``$TAHRIX_BENCH_PG`` (a URL to an empty database), else a throwaway server
started here like the test suite's (initdb/pg_ctl in a temporary directory).

    python bench/bench_store_engines.py [--calls 1000000] [--writes 2000] [--checks 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tahrix_lab.agent import Budget, Message, Part, TranscriptStore, Usage  # noqa: E402
from tahrix_lab.agent.storage import PostgresStore  # noqa: E402
from tahrix_lab.lab.costs import costs  # noqa: E402

SESSIONS = 1000
SPAN = 40 * 86400  # seconds the calls are spread over
COLUMNS = "session_id, position, role, created_at, backend, model_id, input_tokens, output_tokens, parts"
MODEL = "CASE i % 3 WHEN 0 THEN 'gpt-4o-mini' WHEN 1 THEN 'claude-sonnet-4-5' ELSE 'a-model-of-our-own' END"
INPUT = "1000 + (i * 7919) % 249000"


def calls_sql(calls: int, series: str, div: str, secs: str) -> str:
    """The generating statement (session ``i % SESSIONS``, so a session keeps its model)."""
    return (
        f"INSERT INTO messages ({COLUMNS}) SELECT 's' || (i % {SESSIONS}), i {div} {SESSIONS}, 'assistant', "
        f"now() - {secs.format(e=f'({calls} - i) * {SPAN} {div} {calls}')}, 'openai', {MODEL}, {INPUT}, 100, "
        f"'[]' FROM {series}"
    )


def fill_duckdb(store: TranscriptStore, calls: int) -> None:
    with store.connection.write() as cur:
        cur.execute(
            'INSERT INTO sessions (id, "user", purpose, created_at) '
            f"SELECT 's' || i, 'u' || (i % 50), 'chat', now() FROM range({SESSIONS}) t(i)"
        )
        cur.execute(calls_sql(calls, f"range({calls}) t(i)", "//", "to_seconds(({e})::BIGINT)"))


def fill_postgres(url: str, calls: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            'INSERT INTO sessions (id, "user", purpose, created_at) '
            f"SELECT 's' || i, 'u' || (i % 50), 'chat', now() FROM generate_series(0, {SESSIONS - 1}) i"
        )
        conn.execute(
            calls_sql(
                calls,
                f"generate_series(0::BIGINT, {calls - 1}) i",
                "/",
                "make_interval(secs => ({e})::BIGINT)",
            )
        )
        conn.execute("ANALYZE messages")


def p95_ms(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[94] * 1000


def timed(n: int, fn: Callable[[int], object]) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def measure(name: str, store: TranscriptStore, writes: int, checks: int) -> dict[str, float]:
    budget = Budget(global_monthly_usd=1e9, monthly_usd=1e9, store=store, sync_every=0.0)
    t0 = time.perf_counter()
    budget.check("u1")  # the first read: the whole 30-day ledger
    first = time.perf_counter() - t0
    check = timed(checks, lambda i: budget.check(f"u{i % 50}"))
    session = store.create_session(user="bench")
    answer = [Part.of_text("An answer of a few sentences about address 0xabc. " * 4)]
    write = timed(
        writes,
        lambda i: store.append_message(
            session.id,
            Message(
                role="assistant", parts=answer, backend="openai", model_id="gpt-4o-mini", usage=Usage(900, 80)
            ),
        ),
    )
    by = ("user", "model", "day")
    query = timed(4, lambda i: costs(store, by))  # the first run also learns the models' price breaks
    figures = {
        "first_read_s": first,
        "check_p95_ms": p95_ms(check),
        "write_p95_ms": p95_ms(write),
        "costs_first_s": query[0],
        "costs_s": statistics.median(query[1:]),
    }
    print(
        f"{name:10s} ledger first read {first:7.2f} s   budget check p95 {figures['check_p95_ms']:6.2f} ms"
        f"   message write p95 {figures['write_p95_ms']:6.2f} ms   costs by user, model, day"
        f" {figures['costs_s']:6.2f} s (first {query[0]:.2f} s)   load {load()}",
        flush=True,
    )
    return figures


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--checks", type=int, default=2000)
    args = parser.parse_args()
    print(
        f"{args.calls:,} calls in the ledger; {args.checks} checks; {args.writes} writes; load {load()}",
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
            fill_duckdb(duck, args.calls)
            d = measure("duckdb", duck, args.writes, args.checks)
            duck.close()
        pg = TranscriptStore(url)
        fill_postgres(url, args.calls)
        p = measure("postgresql", pg, args.writes, args.checks)
        for key in ("first_read_s", "check_p95_ms", "write_p95_ms", "costs_s"):
            print(f"{key}: postgresql / duckdb = {p[key] / d[key]:.2f}")
        verdict = "met" if p["check_p95_ms"] <= 5 and p["write_p95_ms"] <= 5 else "NOT met"
        print(f"targets (PostgreSQL check p95 <= 5 ms, write p95 <= 5 ms): {verdict}")
    finally:
        PostgresStore.close_pools()
        if server is not None:
            server.destroy()


if __name__ == "__main__":
    main()
