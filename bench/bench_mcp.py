"""Round trips to ``tahrix mcp serve``: ``tools/list`` and a ``lookup_address`` call, over stdio and HTTP.

The official SDK's client talks to our server as a real process (the sample
case in a temporary DuckDB file); each call is one request and its answer,
and every ``lookup_address`` is also recorded in the workspace, as in use.
Printed: p50 and p95 per operation and transport, beside the same
``lookup_address`` run in-process with the same grant and recording
(``CaseMcpServer.call``, no MCP), so the difference is what MCP and the
transport add.

    python bench/bench_mcp.py              # 200 round trips per operation
    BENCH_MCP_N=1000 python bench/bench_mcp.py
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tahrix_lab.agent.transcript import Part
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.mcp.server import CaseMcpServer

N = int(os.environ.get("BENCH_MCP_N", 200))
WARMUP = 10
TOKEN = "bench-token-0123456789"


def _percentiles(samples: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples), q[94]


def _report(label: str, samples: list[float]) -> None:
    p50, p95 = _percentiles(samples)
    print(f"{label:38} p50 {p50 * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   (n={len(samples)})")


async def _measure(call: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(WARMUP):
        await call()
    out = []
    for _ in range(N):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


async def _both(client: Client, address: str, transport: str) -> None:
    async def listing() -> None:
        assert len((await client.list_tools()).tools) == 12

    async def lookup() -> None:
        result = await client.call_tool("lookup_address", {"address": address})
        assert not result.is_error

    _report(f"{transport}: tools/list", await _measure(listing))
    _report(f"{transport}: tools/call lookup_address", await _measure(lookup))


def _serve_args(db: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tahrix_lab.cli",
        "--db",
        str(db),
        "mcp",
        "serve",
        "--case",
        "CASE-001",
        *extra,
    ]


def _stdio(db: Path, address: str) -> None:
    args = _serve_args(db)
    params = StdioServerParameters(command=args[0], args=args[1:])

    async def main() -> None:
        async with Client(params, cache=None) as client:  # no client-side cache: every list is a round trip
            await _both(client, address, "stdio")

    anyio.run(main)


@asynccontextmanager
async def _transport(url: str) -> Any:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _http(db: Path, tmp: Path, address: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "bench"}))
    proc = subprocess.Popen(_serve_args(db, "--http", str(port), "--tokens-file", str(tokens)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the HTTP server did not start")
            time.sleep(0.1)

        async def main() -> None:
            async with Client(_transport(f"http://127.0.0.1:{port}/mcp"), cache=None) as client:
                await _both(client, address, "http")

        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _in_process(ws: Workspace, address: str) -> None:
    """The same call, grant and recording as the server does, minus MCP and the transport."""
    server = CaseMcpServer(ws, "CASE-001", user="bench-in-process")
    samples = []
    for i in range(WARMUP + N):
        started = time.perf_counter()
        out = server.call(
            Part.of_tool_use(f"b{i}", "lookup_address", {"address": address}), "bench-in-process"
        )
        assert out.status == "ok"
        if i >= WARMUP:
            samples.append(time.perf_counter() - started)
    _report("in-process: lookup_address, recorded", samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        db = tmp / "bench.duckdb"
        with Workspace(db) as ws:
            ws.load_sample_case()
            address = ws.cases.rows("SELECT address FROM case_addresses WHERE case_id = 'CASE-001' LIMIT 1")[
                0
            ]["address"]
            print(
                f"MCP round trips, {N} per operation (load average {os.getloadavg()[0]:.1f}; a loaded machine reads high)"
            )
            _in_process(ws, address)
        _stdio(db, address)
        _http(db, tmp, address)


if __name__ == "__main__":
    main()
