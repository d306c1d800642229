"""Issue 31 items 1 and 2 on a real `tahrix serve` on loopback: admission on the SSE route, a
default budget for a real model, server timeouts, the concurrency limit, throttled sign-ins."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_service_processes import Serve, poll_to_end
from tests.slow_clients import closed_by_server

pytestmark = pytest.mark.e2e

API = "/api/v1/agent"
ALICE = {"Authorization": "Bearer alice-token-0123456789abcdefghijklm"}


def tokens_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE["Authorization"][7:]: "alice"}))
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def slow_serve(tmp_path: Path) -> Iterator[Serve]:
    """A service whose answers take a while (60 words, 0.2 s apart), two per user at once."""
    script = tmp_path / "script.json"
    words = " ".join(f"w{i}" for i in range(60))
    script.write_text(json.dumps({"delay": 0.2, "turns": [[{"kind": "text", "text": words}]]}))
    srv = Serve("--tokens-file", tokens_file(tmp_path), "--fake-script", str(script),
                "--max-running-per-user", "2", db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        yield srv
    finally:
        srv.stop()


def test_sse_streams_go_through_admission(slow_serve: Serve) -> None:
    url = f"{slow_serve.url}{API}/chat-stream"
    statuses: list[int] = []
    refusals: list[str] = []
    jobs: list[str] = []
    held: list[Iterator[str]] = []
    with ExitStack() as open_streams, httpx.Client(timeout=30) as client:
        for i in range(45):  # one user, 45 streams, a cap of 2
            r = open_streams.enter_context(
                client.stream("POST", url, json={"message": f"q{i}"}, headers=ALICE)
            )
            statuses.append(r.status_code)
            if r.status_code == 200:
                assert r.headers["content-type"].startswith("text/event-stream")
                jobs.append(r.headers["x-job-id"])
                lines = r.iter_lines()
                held.append(lines)  # dropping the iterator would close the connection (httpcore)
                first = next(line for line in lines if line.startswith("data: "))
                assert json.loads(first[6:])["type"]  # it streams
            else:
                r.read()
                refusals.append(r.json()["detail"])
        assert statuses.count(200) == 2 and statuses.count(429) == 43
        assert all("running" in d or "at once" in d for d in refusals), refusals[0]
        # While the two run, the server still answers a static file and the job API.
        with httpx.Client(timeout=30) as other:
            js = other.get(f"{slow_serve.url}/static/poll.js")
            assert js.status_code == 200 and "createPollingChat" in js.text
            assert other.get(f"{slow_serve.url}{API}/me", headers=ALICE).json() == {"user": "alice"}
        # A question in a URL is refused with a pointer, not run.
        moved = client.get(url, params={"message": "secret question"}, headers=ALICE)
        assert moved.status_code == 405 and "POST" in moved.json()["detail"]
    # The two streams were closed mid-answer: their jobs were stopped, the partial answer kept.
    with httpx.Client(timeout=30) as client:
        for job in jobs:
            state = poll_to_end(client, slow_serve.url, ALICE, job)
            assert (state["status"], state["stop_reason"]) == ("done", "cancelled")


def test_a_real_model_without_a_budget_gets_a_capped_default(tmp_path: Path) -> None:
    # A real (OpenAI-compatible) backend at an address nobody answers: serve starts, no call is made.
    srv = Serve("--tokens-file", tokens_file(tmp_path), "--backend", "http://127.0.0.1:9/v1",
                "--model", "m", db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        out = "".join(srv.stdout)
        assert "WARNING: no budget was set" in out and "20 USD a month" in out
        assert "--budget-monthly-usd" in out
    finally:
        srv.stop()
    raised = Serve("--tokens-file", tokens_file(tmp_path), "--backend", "http://127.0.0.1:9/v1", "--model", "m",
                   "--budget-monthly-usd", "500", db=tmp_path / "u.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        assert "no budget was set" not in "".join(raised.stdout)
    finally:
        raised.stop()


def open_sockets(url: str, n: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=10)
        socks.append(s)
    return socks


@pytest.fixture
def strict_serve(tmp_path: Path) -> Iterator[Serve]:
    srv = Serve("--tokens-file", tokens_file(tmp_path), "--header-timeout", "2", "--body-timeout", "2",
                "--keep-alive-timeout", "1", "--limit-concurrency", "250",
                db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        yield srv
    finally:
        srv.stop()


def test_slow_and_idle_clients_are_closed(strict_serve: Serve) -> None:
    url = strict_serve.url
    # 200 slowloris connections: a header that never ends, a byte at a time.
    slow = open_sockets(url, 200)
    try:
        # Past the concurrency limit a new request answers 503 (calm), not a hang.
        extra = open_sockets(url, 60)
        with httpx.Client(timeout=10) as client:
            assert client.get(f"{url}/healthz").status_code == 503
        for s in extra:
            s.close()
        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(lambda s: closed_by_server(s, b"GET / HTTP/1.1\r\nX-a: "), slow))
        assert all(results), f"{results.count(False)} slow-header connections still open"
    finally:
        for s in slow:
            s.close()
    # 50 slow bodies: headers at once, then a body byte now and then.
    bodies = open_sockets(url, 50)
    head = b"POST /api/v1/agent/chat-stream-job HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    for s in bodies:
        s.sendall(head + b"Content-Length: 1000\r\n" + ALICE_HEADER + b"\r\n")
    with ThreadPoolExecutor(50) as pool:
        closed = list(pool.map(lambda s: closed_by_server(s, b'{"message": "aaaa'), bodies))
    for s in bodies:
        s.close()
    assert all(closed), f"{closed.count(False)} slow-body connections still open"
    # 50 idle keep-alive connections after one answered request each.
    idle = open_sockets(url, 50)
    for s in idle:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(read_until_closed, idle))
    for s in idle:
        s.close()
    assert all(a.startswith(b"HTTP/1.1 200") for a in answers)
    # The server still answers.
    with httpx.Client(timeout=10) as client:
        assert client.get(f"{url}/healthz").status_code == 200


ALICE_HEADER = b"Authorization: " + ALICE["Authorization"].encode() + b"\r\n"


def read_until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes (bounded: 40 reads of at most 0.25 s)."""
    s.settimeout(0.25)
    got = b""
    for _ in range(40):
        try:
            data = s.recv(4096)
        except TimeoutError:
            continue
        if data == b"":
            return got
        got += data
    raise AssertionError(f"the idle connection was not closed: {got[:80]!r}")


def test_failed_sign_ins_are_throttled_per_client(strict_serve: Serve) -> None:
    me = f"{strict_serve.url}{API}/me"
    with httpx.Client(timeout=10) as client:
        for _ in range(100):  # successful requests cost nothing
            assert client.get(me, headers=ALICE).status_code == 200
        statuses = [
            client.get(me, headers={"Authorization": f"Bearer guess-{i:06d}"}).status_code
            for i in range(1800)
        ]
        assert statuses[:30] == [401] * 30
        assert statuses.count(429) >= 1700
        throttled = client.get(me, headers=ALICE)  # while throttled, no token is checked here
        assert throttled.status_code == 429 and "sign-ins" in throttled.json()["detail"]
        assert "retry-after" in throttled.headers
        assert client.get(f"{strict_serve.url}/healthz").status_code == 200  # outside /api
    # Another client address is not affected.
    other = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(timeout=10, transport=other) as client:
        assert client.get(me, headers=ALICE).json() == {"user": "alice"}
