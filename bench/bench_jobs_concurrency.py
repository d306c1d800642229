"""Many simultaneous jobs on one job service with Redis, each with its own long-poller.

Each job streams 20 tokens a second (each stamped with its sequence number and
the time it was produced); each poller long-polls with ``since``/``wait``.
Checks that no chunk is lost or reordered and prints delivery latency
(produce -> received), poll round-trip times, and the server process's CPU
and memory.

    .venv/bin/python bench/bench_jobs_concurrency.py                 # reduced: 50 jobs x 10 s
    TAHRIX_BENCH_FULL=1 .venv/bin/python bench/bench_jobs_concurrency.py   # 500 jobs x 30 s
    TAHRIX_BENCH_JOBS=200 TAHRIX_BENCH_SECONDS=20 .venv/bin/python bench/bench_jobs_concurrency.py

Target at full scale: nothing lost or reordered, p95 latency <= 50 ms. The
client (all pollers, one asyncio process) shares the machine with the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_jobs_latency import HEADERS, JOB, RedisProc, Server, parse, pct

RATE = 20.0
RETRIES: list[str] = []


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int) -> tuple[float, float]:
    rss = hwm = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


class RawConn:
    """A bare HTTP/1.1 keep-alive connection: httpx costs more CPU per request than the
    server does, and with hundreds of pollers the client would measure itself."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
        try:
            return await self._request(method, path, body)
        except (ConnectionError, asyncio.IncompleteReadError, IndexError):
            if method != "GET":
                raise
            self.close()  # the server closed an idle keep-alive connection: reconnect once
            self.writer = None
            return await self._request(method, path, body)

    async def _request(self, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                f"Authorization: {HEADERS['Authorization']}\r\nContent-Length: {len(body)}\r\n")  # fmt: skip
        if body:
            head += "Content-Type: application/json\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        status_line = await self.reader.readline()
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        data = await self.reader.readexactly(length)
        try:
            body = json.loads(data)
        except ValueError:  # e.g. a plain-text 500 from an overloaded server
            body = {"detail": data[:200].decode(errors="replace")}
        return int(status_line.split()[1]), body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def poller(conn: RawConn, job: str, got: list[tuple[int, float]], rtts: list[float]) -> str:
    since = 0
    while True:
        t0 = time.perf_counter()
        status, state = await conn.request("GET", f"{JOB}/{job}?since={since}&wait=20")
        if status == 503:  # a calm "try again" under overload; clients retry (poll.js does)
            RETRIES.append(job)
            await asyncio.sleep(0.1)
            continue
        if status != 200:
            raise RuntimeError(f"poll of job {job} answered {status}: {state}")
        rtt = time.perf_counter() - t0
        if state["chunks"]:
            rtts.append(rtt)
        parse(state["chunks"], time.time(), got)
        since = state["next"]
        if state["status"] != "streaming":
            return str(state["status"])


async def drive(url: str, jobs: int) -> tuple[list[list[tuple[int, float]]], list[float], list[str], float]:
    host, port = url.removeprefix("http://").split(":")
    conns = [RawConn(host, int(port)) for _ in range(jobs)]
    try:
        t0 = time.monotonic()
        created = await asyncio.gather(
            *(
                c.request("POST", JOB, json.dumps({"message": f"job {i}"}).encode())
                for i, c in enumerate(conns)
            )
        )
        started = time.monotonic() - t0
        refused = [(status, body) for status, body in created if status != 200]
        if refused:
            raise SystemExit(f"{len(refused)} of {jobs} jobs were refused, e.g. {refused[0]}")
        ids = [body["job_id"] for _status, body in created]
        got: list[list[tuple[int, float]]] = [[] for _ in ids]
        rtts: list[float] = []
        statuses = await asyncio.gather(*(poller(conns[i], j, got[i], rtts) for i, j in enumerate(ids)))
    finally:
        for c in conns:
            c.close()
    return got, rtts, list(statuses), started


def main() -> None:
    full = os.environ.get("TAHRIX_BENCH_FULL") == "1"
    jobs = int(os.environ.get("TAHRIX_BENCH_JOBS", "500" if full else "50"))
    seconds = float(os.environ.get("TAHRIX_BENCH_SECONDS", "30" if full else "10"))
    count = int(seconds * RATE)
    store = "memory" if os.environ.get("TAHRIX_BENCH_STORE") == "memory" else "redis"
    print(f"job concurrency: {jobs} jobs x {count} tokens ({RATE:g}/s for {seconds:g} s), {store} store, "
          f"cores={os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (shared machine; the client "
          "runs on the same machine)")  # fmt: skip
    redis_proc = RedisProc()
    memory = store == "memory"  # for comparison only
    try:
        with Server(
            redis_url=None if memory else redis_proc.url, count=count, interval=1 / RATE, workers=jobs
        ) as srv:
            cpu0, wall0 = cpu_seconds(srv.pid), time.monotonic()
            rcpu0 = cpu_seconds(redis_proc.proc.pid)
            ccpu0 = time.process_time()
            got, rtts, statuses, started = asyncio.run(drive(srv.url, jobs))
            ccpu = time.process_time() - ccpu0
            wall = time.monotonic() - wall0
            cpu = cpu_seconds(srv.pid) - cpu0
            rcpu = cpu_seconds(redis_proc.proc.pid) - rcpu0
            rss, hwm = memory_mib(srv.pid)
    finally:
        redis_proc.close()
    lost = sum(1 for g in got if [s for s, _ in g] != list(range(count)))
    lat = [d * 1000 for g in got for _, d in g]
    rtt_ms = [r * 1000 for r in rtts]
    print(f"  all {jobs} jobs started in {started:.2f} s; statuses: "
          f"{ {s: statuses.count(s) for s in set(statuses)} }")  # fmt: skip
    print(f"  jobs with a chunk lost or out of order: {lost} of {jobs} ({len(lat)} chunks received); "
          f"polls answered 503 and retried: {len(RETRIES)}")  # fmt: skip
    print(f"  delivery latency (produce -> received): p50 {pct(lat, 50):.1f} ms, p95 {pct(lat, 95):.1f} ms, "
          f"max {max(lat):.1f} ms")  # fmt: skip
    print(f"  poll round trip (polls that returned chunks): p50 {pct(rtt_ms, 50):.1f} ms, "
          f"p95 {pct(rtt_ms, 95):.1f} ms")  # fmt: skip
    print(f"  server process: CPU {cpu:.1f} s over {wall:.1f} s ({100 * cpu / wall:.0f}% of one core), "
          f"RSS {rss:.0f} MiB (peak {hwm:.0f} MiB); redis-server CPU {rcpu:.1f} s; client CPU {ccpu:.1f} s")  # fmt: skip
    summary: dict[str, Any] = {"jobs": jobs, "tokens_each": count, "lost_or_reordered_jobs": lost,
                               "latency_p95_ms": round(pct(lat, 95), 1), "poll_rtt_p95_ms": round(pct(rtt_ms, 95), 1),
                               "server_cpu_pct": round(100 * cpu / wall), "server_rss_mib": round(rss)}  # fmt: skip
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
