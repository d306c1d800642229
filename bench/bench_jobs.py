"""The job service beside a reference of the seed's design, at several loads, in one run.

For each job count N: N jobs start at once (all POSTs fired together), each
streams 20 tokens a second from the same fake source (" seq:unix-time"), and
one client per job reads them:

* ours: ``tahrix serve`` wiring with Redis (``--role all``), clients
  long-poll with ``since``/``wait=20``/``content=false`` (as poll.js does);
* split: the same as two processes, ``--role api`` and ``--role worker`` (the
  scale-out the docs describe);
* seed: ``bench/seed_reference.py`` (FastAPI + Redis, the whole JSON state
  rewritten per chunk under ``chatjob:{id}``), clients poll every 500 ms from
  their ``lastChunkIdx``.

Prints per run: delivery latency produce -> received (p50/p95/max), the time
from the burst of POSTs to each job's first token (p50/p95), how many jobs
streamed at once at the peak, POST answer times (p95), chunks lost or
reordered, the CPU of the server, of the clients (all in this process, on bare
keep-alive connections) and of redis-server, the load average, and the
seed/ours ratios. Targets (issue 29, measured in one run): 500 jobs p95
delivery >= 4x better than the seed; 20 jobs >= 50x; POST p95 for 200
simultaneous requests >= 5x better than the seed's; nothing lost or reordered.

    .venv/bin/python bench/bench_jobs.py                        # quick: 20 and 200 jobs x 5 s
    .venv/bin/python bench/bench_jobs.py --jobs 20,200,500 --seconds 10
    .venv/bin/python bench/bench_jobs.py --designs ours,seed --jobs 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import time
from typing import Any

import redis
import uvloop

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(
    1, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # tests.agent.storage.pg_server

from bench_jobs_latency import (
    JOB,
    ChildServer,
    RawConn,
    RedisProc,
    Server,
    SplitServer,
    cpu_seconds,
    free_port,
    parse,
    pct,
)
from seed_reference import serve_seed

RATE = 20.0
# ours: one `tahrix serve --role all` process; split: `--role api` + `--role worker` on the
# same Redis (two interpreters, the documented scale-out); seed: one process, as the seed ran.
DESIGNS = ["ours", "split", "seed"]
RETRIED: list[int] = []
POLLS: list[int] = []  # one per poll answered (answers a second: how well they coalesce)
ENDS: dict[int, Any] = {}  # how each job ended, for the report of a lost one


class SeedServer(ChildServer):
    def __init__(self, redis_url: str, count: int, interval: float) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = mp.get_context("spawn").Process(
            target=serve_seed, args=(self.port, redis_url, count, interval)
        )


def mark(got: list[tuple[int, float]], seen: list[float]) -> None:
    """``seen``: when the job's first token and its latest token arrived (monotonic), then
    when each token arrived."""
    if got:
        now = time.monotonic()
        if not seen:
            seen += [now, now]
        seen[1] = now
        seen.extend([now] * (len(got) - (len(seen) - 2)))


async def long_poller(conn: RawConn, job: str, got: list[tuple[int, float]], seen: list[float]) -> None:
    since = 0
    while True:
        # as poll.js asks: the text comes once, in the chunks
        status, state = await conn.request("GET", f"{JOB}/{job}?since={since}&wait=20&content=false")
        POLLS.append(1)
        if status == 503:
            await asyncio.sleep(0.1)
            continue
        if status != 200:
            raise RuntimeError(f"poll of job {job} answered {status}: {state}")
        parse(state["chunks"], time.time(), got)
        mark(got, seen)
        since = state["next"]
        if state["status"] != "streaming":
            ENDS[id(got)] = (state["status"], state["stop_reason"],
                             [c for c in state["chunks"] if c["type"] == "error"])  # fmt: skip
            return


async def seed_poller(conn: RawConn, job: str, got: list[tuple[int, float]], seen: list[float]) -> None:
    """Written to the seed's contract only: poll every 500 ms, render after lastChunkIdx."""
    last = 0
    while True:
        status, state = await conn.request("GET", f"{JOB}/{job}")
        if status >= 500:  # overloaded: try again at the next tick
            await asyncio.sleep(0.5)
            continue
        if status != 200:
            raise RuntimeError(f"poll of job {job} answered {status}: {state}")
        chunks = state.get("chunks", [])
        parse(chunks[last:], time.time(), got)
        mark(got, seen)
        last = len(chunks)
        if state["status"] in ("done", "error"):
            return
        await asyncio.sleep(0.5)


async def drive(url: str, jobs: int, seed: bool) -> tuple[list[list[tuple[int, float]]], list[float]]:
    host, port = url.removeprefix("http://").split(":")
    conns = [RawConn(host, int(port)) for _ in range(jobs)]
    post_ms: list[float] = []

    async def post(i: int, c: RawConn) -> tuple[int, Any]:
        t0 = time.perf_counter()
        while True:  # a 503 ("try again") is retried, as a client would; the time counts it
            try:
                out = await c.request("POST", JOB, json.dumps({"message": f"job {i}"}).encode())
            except (ConnectionError, asyncio.IncompleteReadError):  # reset under overload: again
                c.close()
                c.writer = None
                out = (503, {})
            if out[0] < 500:
                break
            RETRIED.append(i)
            await asyncio.sleep(0.1)
        post_ms.append((time.perf_counter() - t0) * 1000)
        return out

    got: list[list[tuple[int, float]]] = [[] for _ in conns]
    seen: list[list[float]] = [[] for _ in conns]
    reader = seed_poller if seed else long_poller
    started = time.monotonic()

    async def job(i: int, c: RawConn) -> None:  # each client polls as soon as its POST answers
        status, body = await post(i, c)
        if status != 200:
            raise SystemExit(f"a job was refused: {status} {body}")
        await reader(c, body["job_id"], got[i], seen[i])

    try:
        for c in conns:  # connect first: the POSTs then leave together
            c.reader, c.writer = await asyncio.open_connection(c.host, c.port)
        await asyncio.gather(*(job(i, c) for i, c in enumerate(conns)))
    finally:
        for c in conns:
            c.close()
    first = [(sn[0] - started) * 1000 for sn in seen if sn]
    edges = sorted([(sn[0], 1) for sn in seen if sn] + [(sn[1], -1) for sn in seen if sn])
    peak = running = 0
    for _t, step in edges:
        running += step
        peak = max(peak, running)
    return got, post_ms, first, peak, seen


def tree_cpu(pid: int) -> float:
    """CPU seconds of a server and all its children, living and reaped (PostgreSQL's backends)."""
    tck = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15]) / tck  # utime, stime, cutime, cstime
    for child in os.listdir("/proc"):
        if child.isdigit():
            try:
                with open(f"/proc/{child}/stat") as f:
                    cf = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(cf[1]) == pid:
                total += (int(cf[11]) + int(cf[12])) / tck
    return total


PG_PID: list[int] = []  # the PostgreSQL server's postmaster, when the record is there


def one(
    name: str, jobs: int, count: int, redis_url: str, redis_pid: int, record: Any = None
) -> dict[str, Any]:
    interval = 1 / RATE
    seed = name == "seed"
    db = record() if record and not seed else None
    server: Any
    if seed:
        server = SeedServer(redis_url, count, interval)
    elif name == "split":
        server = SplitServer(redis_url=redis_url, count=count, interval=interval, workers=jobs, db=db)
    else:
        server = Server(redis_url=redis_url, count=count, interval=interval, workers=jobs, db=db)
    RETRIED.clear()
    POLLS.clear()
    with server as srv:
        pids = getattr(srv, "pids", None) or [srv.pid]
        each0 = [cpu_seconds(pid) for pid in pids]
        wall0, ccpu0 = time.monotonic(), time.process_time()
        rcpu0 = cpu_seconds(redis_pid)
        pcpu0 = tree_cpu(PG_PID[0]) if PG_PID else 0.0
        got, post_ms, first, peak, seen = uvloop.run(drive(srv.url, jobs, seed))
        each = [cpu_seconds(pid) - c0 for pid, c0 in zip(pids, each0, strict=True)]
        cpu, wall = sum(each), time.monotonic() - wall0
        ccpu, rcpu = time.process_time() - ccpu0, cpu_seconds(redis_pid) - rcpu0
        pcpu = tree_cpu(PG_PID[0]) - pcpu0 if PG_PID else 0.0
    lost = sum(1 for g in got if [s for s, _ in g] != list(range(count)))
    if db:  # every job's transcript reached the record once: a user turn and one answer each
        import psycopg

        with psycopg.connect(db) as conn:
            sessions, answers = conn.execute(
                "SELECT count(DISTINCT session_id), count(*) FILTER (WHERE role = 'assistant') FROM messages"
            ).fetchone()  # type: ignore[misc]
        print(f"    record (PostgreSQL): {sessions} sessions, {answers} answers for {jobs} jobs", flush=True)
        lost += abs(jobs - answers)
    for g in got:
        seqs = [s for s, _ in g]
        if seqs != list(range(count)):
            bad = next((i for i, s in enumerate(seqs) if s != i), len(seqs))
            print(
                f"    a job lost or reordered its tokens: {len(seqs)} of {count}, first wrong at "
                f"{bad}: {seqs[max(0, bad - 2) : bad + 3]}; ended {ENDS.get(id(g))}"
            )
    lat = [d * 1000 for g in got for _, d in g]
    # Steady state: from the moment every job streams until the first one ends (no starts or
    # ends competing for the worker); empty when the jobs never all streamed at once.
    all_in = max((sn[0] for sn in seen if sn), default=0.0)
    first_out = min((sn[1] for sn in seen if sn), default=0.0)
    steady = [d * 1000 for g, sn in zip(got, seen, strict=True) for (_, d), at in zip(g, sn[2:], strict=False)
              if all_in <= at <= first_out]  # fmt: skip
    row = {"design": name, "jobs": jobs, "p50_ms": round(pct(lat, 50), 1), "p95_ms": round(pct(lat, 95), 1),
           "max_ms": round(max(lat), 1), "post_p95_ms": round(pct(post_ms, 95), 1),
           "steady_p95_ms": round(pct(steady, 95), 1) if steady else None,
           "first_token_p50_ms": round(pct(first, 50)), "first_token_p95_ms": round(pct(first, 95)),
           "peak_streaming_jobs": peak, "lost_or_reordered_jobs": lost,
           "server_cpu_pct": round(100 * cpu / wall),
           "server_cpu_pct_each": [round(100 * c / wall) for c in each], "client_cpu_pct": round(100 * ccpu / wall),
           "redis_cpu_pct": round(100 * rcpu / wall), "postgres_cpu_pct": round(100 * pcpu / wall),
           "post_503_retries": len(RETRIED),
           "answers_per_s": round(len(POLLS) / wall)}  # fmt: skip
    print(f"  {name:5s} {jobs:4d} jobs: delivery p50 {row['p50_ms']:8.1f} ms  p95 {row['p95_ms']:8.1f} ms  "
          f"max {row['max_ms']:8.1f} ms (all streaming: p95 {row['steady_p95_ms']} ms) | first token p50 {row['first_token_p50_ms']} ms, p95 "
          f"{row['first_token_p95_ms']} ms, peak {peak} streaming | POST p95 {row['post_p95_ms']:7.1f} ms ({len(RETRIED)} 503 retried) | lost/reordered jobs {lost} | "
          f"CPU server {'+'.join(f'{c}%' for c in row['server_cpu_pct_each'])}, clients {row['client_cpu_pct']}%, redis {row['redis_cpu_pct']}%"
          f"{', postgres ' + str(row['postgres_cpu_pct']) + '%' if PG_PID else ''} | "
          f"{row['answers_per_s']} poll answers/s | "
          f"load avg {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="20,200", help="comma-separated job counts (default 20,200)")
    ap.add_argument("--seconds", type=float, default=5.0, help="how long each job streams (default 5)")
    ap.add_argument("--only", choices=DESIGNS, default=None, help="run one design only")
    ap.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated designs (default: all)")
    ap.add_argument("--record", choices=["duckdb", "postgresql"], default="duckdb",
                    help="where our service keeps the record: a DuckDB file (default), or a fresh database "
                         "on a PostgreSQL server started here (initdb/pg_ctl, as the tests do)")  # fmt: skip
    args = ap.parse_args()
    counts = [int(n) for n in args.jobs.split(",") if n]
    designs = [args.only] if args.only else [d for d in args.designs.split(",") if d]
    unknown = set(designs) - set(DESIGNS)
    if unknown:
        ap.error(f"unknown designs: {', '.join(sorted(unknown))}")
    count = int(args.seconds * RATE)
    print(f"jobs vs the seed design: {count} tokens per job at {RATE:g}/s, cores={os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f} at start (shared machine; clients on the same machine)")  # fmt: skip
    rows: list[dict[str, Any]] = []
    redis_proc = RedisProc()
    pg = record = None
    if args.record == "postgresql":
        from tests.agent.storage.pg_server import PgServer

        pg = PgServer()
        pg.start()
        PG_PID.append(int((pg.data / "postmaster.pid").read_text().split()[0]))
        record = lambda: pg.url(pg.create_database())  # noqa: E731  # a fresh record per run
        print("our record: PostgreSQL (a fresh database per run)", flush=True)
    try:
        for jobs in counts:
            for name in designs:
                if args.only in (None, name):
                    redis.Redis.from_url(redis_proc.url).flushall()
                    rows.append(one(name, jobs, count, redis_proc.url, redis_proc.proc.pid, record))
    finally:
        redis_proc.close()
        if pg is not None:
            pg.destroy()
    # issue 29: delivery p95 ratio per job count, POST p95 ratio at 200 simultaneous requests
    targets = {20: 50.0, 500: 4.0}
    for jobs in counts:
        seed = next((r for r in rows if r["design"] == "seed" and r["jobs"] == jobs), None)
        for design in ("ours", "split"):
            ours = next((r for r in rows if r["design"] == design and r["jobs"] == jobs), None)
            if ours is None:
                continue
            bits = [f"lost/reordered jobs {ours['lost_or_reordered_jobs']} "
                    f"({'met' if ours['lost_or_reordered_jobs'] == 0 else 'NOT met'})"]  # fmt: skip
            if seed:
                ratio = seed["p95_ms"] / max(ours["p95_ms"], 0.001)
                bit = f"seed/{design} delivery p95 ratio {ratio:.1f}x"
                if jobs in targets:
                    bit += (
                        f" (target >= {targets[jobs]:g}x: {'met' if ratio >= targets[jobs] else 'NOT met'})"
                    )
                bits.append(bit)
                post = seed["post_p95_ms"] / max(ours["post_p95_ms"], 0.001)
                bit = f"POST p95 ratio {post:.1f}x"
                if jobs == 200:
                    bit += f" (target >= 5x: {'met' if post >= 5 else 'NOT met'})"
                bits.append(bit)
            print(f"  {jobs} jobs, {design}: " + "; ".join(bits))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
