"""What reading the record's annotations costs a case tool call (issue 26 items 1/2).

One run, the same ``list_flags`` tool call (raw view of one address's flags) on host B:
- one DuckDB file (one analyst: the record is the file, nothing synced; the reference);
- the record on PostgreSQL, nothing changed since B's last call (two small queries);
- the record on PostgreSQL, host A confirming or dismissing a flag before each of B's calls
  (B's call also writes the change into its evidence file).
Prints p50 and p95 per call, and the ratio to the one-file reference.

PostgreSQL: ``$TAHRIX_BENCH_PG`` (a URL to an empty database), else a throwaway server
started here like the test suite's.

    python bench/bench_team_annotations.py [--calls 300]
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

from tahrix_lab.agent import Part, TranscriptStore, run_tool  # noqa: E402
from tahrix_lab.agent.storage.postgres import PostgresStore  # noqa: E402
from tahrix_lab.case.tools import CASE_TOOLS  # noqa: E402
from tahrix_lab.case.workspace import SAMPLE_CASE_ID as CASE  # noqa: E402
from tahrix_lab.case.workspace import Workspace  # noqa: E402


def timed(b: Workspace, calls: int, before: Callable[[int], None] = lambda i: None) -> tuple[float, float]:
    flag = next(f for f in b.flags(CASE) if f["address"])
    session = b.start_investigation(CASE, user="bob", grant={"may_write": False})
    provider = b.context_provider()
    samples = []
    for i in range(calls):
        before(i)
        t = time.perf_counter()
        out = run_tool(Part.of_tool_use("tu", "list_flags", {"view": "raw", "address": flag["address"]}),
                       provider, registry=CASE_TOOLS, session=session)  # fmt: skip
        samples.append(time.perf_counter() - t)
        assert out.status == "ok", out.result
    q = statistics.quantiles(samples, n=100)
    return q[49] * 1000, q[94] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    server = None
    url = os.environ.get("TAHRIX_BENCH_PG")
    if not url:
        from tests.agent.storage.pg_server import PgServer

        server = PgServer()
        server.start()
        url = server.url(server.create_database())
    print(f"{args.calls} list_flags calls per case; load average {os.getloadavg()[0]:.2f}", flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            one = Workspace(os.path.join(tmp, "one.duckdb"))
            one.load_sample_case()
            ref = timed(one, args.calls)
            one.close()
            a = Workspace(os.path.join(tmp, "a.duckdb"), record=TranscriptStore(url))
            b = Workspace(os.path.join(tmp, "b.duckdb"), record=TranscriptStore(url))
            a.load_sample_case()
            b.load_sample_case()
            quiet = timed(b, args.calls)
            flag_id = a.flags(CASE)[0]["flag_id"]

            def a_writes(i: int) -> None:
                action = "confirm_flag" if i % 2 == 0 else "dismiss_flag"
                a.annotate(CASE, "flag", flag_id, action, {"note": f"call {i}"}, analyst="ana")

            busy = timed(b, args.calls, a_writes)
            a.close()
            b.close()
        for name, (p50, p95) in (("one DuckDB file", ref), ("PostgreSQL record, no change", quiet),
                                 ("PostgreSQL record, A wrote before each call", busy)):  # fmt: skip
            print(f"{name:45s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  (p95 / one file {p95 / ref[1]:.2f})")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        PostgresStore.close_pools()
        if server is not None:
            server.destroy()


if __name__ == "__main__":
    main()
