"""Delivery latency of the job service: plain polling every 500 ms vs long-polling.

A fake backend produces a chunk every 50 ms, each stamped with the time it was
produced; a client polls the job API and records produce -> received for each
chunk. Both clients run in one run, one after the other, against the same
server process (uvicorn on loopback).

    .venv/bin/python bench/bench_jobs_latency.py            # 100 chunks each, in-memory store
    TAHRIX_BENCH_CHUNKS=400 .venv/bin/python bench/bench_jobs_latency.py
    TAHRIX_BENCH_REDIS=1 .venv/bin/python bench/bench_jobs_latency.py   # jobs in a real redis-server

Target: long-poll p95 <= 30 ms and at least 10x better than plain polling.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx

JOB = "/api/v1/agent/chat-stream-job"
TOKEN = "bench-token-123456"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


class StampBackend:
    """Yields ``" {seq}:{unix time}"`` text events at ``rate`` per second for ``count`` events."""

    name = "fake"

    def __init__(self, count: int, interval: float) -> None:
        self.count = count
        self.interval = interval

    def stream(
        self, *, system: Any, messages: Sequence[Any], tools: Any, model: str, inference: Any
    ) -> Iterator[Any]:
        start = time.monotonic()
        for seq in range(self.count):
            delay = start + seq * self.interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            yield {"kind": "text", "text": f" {seq}:{time.time():.6f}"}
        yield {"kind": "done", "stop_reason": "end_turn", "raw_stop_reason": "end_turn", "usage": None}

    async def astream(
        self, *, system: Any, messages: Sequence[Any], tools: Any, model: str, inference: Any
    ) -> AsyncIterator[Any]:
        """The same tokens for an event loop (the job service reads such streams on one)."""
        start = time.monotonic()
        for seq in range(self.count):
            delay = start + seq * self.interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield {"kind": "text", "text": f" {seq}:{time.time():.6f}"}
        yield {"kind": "done", "stop_reason": "end_turn", "raw_stop_reason": "end_turn", "usage": None}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_child(
    port: int, redis_url: str | None, db: str, count: int, interval: float, workers: int, role: str = "all"
) -> None:
    """A server process: the real service wiring with the stamping backend. ``role`` as for
    ``tahrix serve --role``: ``all`` (API and jobs in this process), ``api`` or ``worker``."""
    import logging
    import threading

    from tahrix_lab.jobs.server import Settings, build, listen_socket, run_http, settle_heap

    logging.basicConfig(level=logging.WARNING)
    if os.environ.get("TAHRIX_BENCH_SWITCH"):
        import sys

        sys.setswitchinterval(float(os.environ["TAHRIX_BENCH_SWITCH"]))
    settings = Settings(tokens={TOKEN: "bench"}, db=db, redis_url=redis_url, workers=workers,
                        max_running_per_user=None, role=role)  # type: ignore[arg-type]  # fmt: skip
    built = build(settings, backend=StampBackend(count, interval))
    settle_heap()  # as tahrix serve does
    if os.environ.get("TAHRIX_BENCH_LINGER") and built.service is not None:  # tuning probes
        built.service.linger_s = float(os.environ["TAHRIX_BENCH_LINGER"])
    if role == "worker":
        threading.Event().wait()  # the runner's threads do the work until terminated
    assert built.service is not None
    # As tahrix serve listens.
    run_http(built.service, listen_socket("127.0.0.1", port))


def wait_healthy(url: str, timeout: float = 60) -> None:
    """Until ``url``/healthz answers (a server process starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url + "/healthz", timeout=1)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bench server at {url} did not start") from None
            time.sleep(0.1)


class ChildServer:
    """A server in a spawned process (``proc``), answering at ``url`` once entered."""

    proc: Any
    url: str

    def __enter__(self) -> Any:
        self.proc.start()
        wait_healthy(self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.join(10)

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return int(self.proc.pid)


class Server(ChildServer):
    def __init__(
        self, *, redis_url: str | None, count: int, interval: float, workers: int = 8, db: str | None = None
    ) -> None:
        self.port = free_port()
        self.tmp = tempfile.TemporaryDirectory()
        ctx = mp.get_context("spawn")
        db = db or os.path.join(self.tmp.name, "bench.duckdb")  # the record: a file, or a PostgreSQL URL
        self.proc = ctx.Process(target=serve_child, args=(self.port, redis_url, db, count, interval, workers))
        self.url = f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.tmp.cleanup()


class SplitServer:
    """``tahrix serve --role worker`` and ``--role api`` as two processes on one Redis (the
    documented way to use both cores); ``pid``/``pids`` are the API's / all. ``processes``
    workers; ``apis`` API processes sharing the port (``--api-processes``)."""

    def __init__(
        self,
        *,
        redis_url: str,
        count: int,
        interval: float,
        workers: int,
        processes: int = 1,
        apis: int = 1,
        db: str | None = None,
    ) -> None:
        ctx = mp.get_context("spawn")
        self.tmp = tempfile.TemporaryDirectory()
        db = db or os.path.join(self.tmp.name, "bench.duckdb")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = [ctx.Process(target=serve_child,
                                    args=(0, redis_url, db, count, interval, workers, "worker"))
                        for _ in range(processes)]  # fmt: skip
        self.apis = [ctx.Process(target=serve_child,
                                 args=(self.port, redis_url, db, count, interval, workers, "api"))
                     for _ in range(apis)]  # fmt: skip
        self.api = self.apis[0]

    def __enter__(self) -> SplitServer:
        for proc in (*self.workers, *self.apis):
            proc.start()
        wait_healthy(self.url)
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while len(seen) < len(self.apis):  # every API process listens (new connections spread)
            if time.monotonic() > deadline:
                raise RuntimeError("the bench API processes did not all start")
            seen.add(httpx.get(self.url + "/healthz", timeout=2).json()["pid"])
        deadline = time.monotonic() + 60
        while httpx.get(self.url + "/readyz", timeout=2).status_code != 200:  # the worker runs
            if time.monotonic() > deadline:
                raise RuntimeError("the bench worker did not become ready")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in (*self.apis, *self.workers):
            proc.terminate()
            proc.join(10)
        self.tmp.cleanup()

    @property
    def pids(self) -> list[int]:
        return [int(p.pid) for p in (*self.apis, *self.workers) if p.pid is not None]


class RedisProc:
    """A throw-away redis-server on a free loopback port, no persistence."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("redis-server is not installed")
        self.port = free_port()
        self.tmp = tempfile.TemporaryDirectory()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.tmp.name, "--maxclients", "10000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"redis://127.0.0.1:{self.port}/0"
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.tmp.cleanup()


def parse(chunks: list[dict[str, Any]], received: float, out: list[tuple[int, float]]) -> None:
    """Each token is " seq:stamp"; under load several arrive merged in one chunk."""
    for c in chunks:
        if c["type"] == "content":
            for token in c["text"].split():
                seq, stamp = token.split(":")
                out.append((int(seq), received - float(stamp)))


def run_client(url: str, *, wait: float, interval: float) -> list[tuple[int, float]]:
    """One job; poll with ``wait`` (long-poll) or every ``interval`` seconds (plain)."""
    got: list[tuple[int, float]] = []
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as client:
        job = client.post(JOB, json={"message": "go"}).json()["job_id"]
        since = 0
        while True:
            r = client.get(f"{JOB}/{job}", params={"since": since, "wait": wait})
            state = r.json()
            parse(state["chunks"], time.time(), got)
            since = state["next"]
            if state["status"] != "streaming":
                return got
            if wait == 0:
                time.sleep(interval)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    count = int(os.environ.get("TAHRIX_BENCH_CHUNKS", "100"))
    use_redis = os.environ.get("TAHRIX_BENCH_REDIS") == "1"
    redis_proc = RedisProc() if use_redis else None
    store = "redis" if use_redis else "memory"
    print(f"job delivery latency: {count} chunks, one every 50 ms, store={store}, cores={os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f} (shared machine)")  # fmt: skip
    try:
        with Server(redis_url=redis_proc.url if redis_proc else None, count=count, interval=0.05) as srv:
            run_client(srv.url, wait=5, interval=0)  # warm-up
            plain = run_client(srv.url, wait=0, interval=0.5)
            long = run_client(srv.url, wait=20, interval=0)
    finally:
        if redis_proc:
            redis_proc.close()
    rows = []
    for name, got in (("plain polling every 500 ms", plain), ("long-polling (wait=20)", long)):
        seqs = [s for s, _ in got]
        assert seqs == list(range(count)), f"{name}: chunks lost or reordered"
        ms = [d * 1000 for _, d in got]
        rows.append((name, pct(ms, 50), pct(ms, 95), max(ms)))
        print(f"  {name:28s} p50 {pct(ms, 50):7.1f} ms   p95 {pct(ms, 95):7.1f} ms   max {max(ms):7.1f} ms")
    ratio = rows[0][2] / rows[1][2] if rows[1][2] > 0 else float("inf")
    print(f"  p95 ratio plain/long-poll: {ratio:.1f}x  (target: long-poll p95 <= 30 ms and >= 10x)")
    print(json.dumps({"store": store, "chunks": count, "plain_p95_ms": round(rows[0][2], 1),
                      "long_p95_ms": round(rows[1][2], 1), "ratio": round(ratio, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
