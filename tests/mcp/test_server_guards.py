"""``tahrix mcp serve --http`` has the job service's guards (``tahrix_lab.web.guards``): a real
server on loopback, raw sockets for the slow clients, httpx and the official SDK client."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.mcp.conftest import ALICE, BOB, HttpServer, stop
from tests.mcp.test_security import INIT, LIST, _post
from tests.mcp.test_server_http import _call
from tests.slow_clients import closed_by_server

ACCEPT = {"Accept": "application/json, text/event-stream"}
GOOD = {**ACCEPT, "Authorization": f"Bearer {ALICE}"}
API_CSP = "default-src 'none'; frame-ancestors 'none'"


@pytest.fixture
def strict_server(case_db: Path, tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer(case_db, tmp_path, {ALICE: "alice", BOB: "bob"},
                        "--header-timeout", "1", "--body-timeout", "1", "--keep-alive-timeout", "1",
                        "--max-body-bytes", "4000", "--failed-sign-ins-per-minute", "5")  # fmt: skip
    yield server
    stop(server.proc)


def _socket(server: HttpServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def test_slow_clients_are_disconnected(strict_server: HttpServer) -> None:
    # Half the headers, then a byte now and then (slowloris); and a connection that sends nothing.
    stalled = [_socket(strict_server) for _ in range(20)]
    silent = _socket(strict_server)
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ALICE.encode() + b"\r\n"
    try:
        for s in stalled:
            s.sendall(head)
        with ThreadPoolExecutor(20) as pool:
            closed = list(pool.map(lambda s: closed_by_server(s, b"X-a: bbbbbbbb"), stalled))
        assert all(closed), f"{closed.count(False)} slow-header connections still open"
        assert closed_by_server(silent)
        # A body trickled after complete headers is cut off too.
        with _socket(strict_server) as body:
            body.sendall(head + b"Content-Type: application/json\r\nContent-Length: 900\r\n\r\n")
            assert closed_by_server(body, b'{"jsonrpc": "2.0"')
    finally:
        for s in [*stalled, silent]:
            s.close()
    # The server still answers.
    assert _post(strict_server.url, ALICE, INIT).status_code == 200


def test_a_body_over_the_limit_answers_413(strict_server: HttpServer) -> None:
    big = {**LIST, "params": {"padding": "a" * 5000}}
    declared = httpx.post(strict_server.url, json=big, headers=GOOD, timeout=30)
    assert declared.status_code == 413 and "4000 bytes" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts the stream
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "'
        yield from (b"a" * 1000 for _ in range(6))
        yield b'"}}'

    streamed = httpx.post(strict_server.url, content=chunks(), timeout=30,
                          headers={**GOOD, "Content-Type": "application/json"})  # fmt: skip
    assert streamed.status_code == 413
    assert _post(strict_server.url, ALICE, INIT).status_code == 200  # a body under it passes


def test_failed_sign_ins_are_throttled_per_address(strict_server: HttpServer) -> None:
    url = strict_server.url
    with httpx.Client(timeout=30) as client:
        for _ in range(20):  # successful requests cost nothing
            assert client.post(url, json=INIT, headers=GOOD).status_code == 200
        statuses = [
            client.post(
                url, json=LIST, headers={**ACCEPT, "Authorization": f"Bearer guess-{i:040d}"}
            ).status_code
            for i in range(30)
        ]
        assert statuses[:5] == [401] * 5 and statuses.count(429) >= 20
        throttled = client.post(url, json=INIT, headers=GOOD)  # a valid token included
        assert throttled.status_code == 429 and "sign-ins" in throttled.json()["detail"]
        assert int(throttled.headers["retry-after"]) >= 1
        assert throttled.headers["content-security-policy"] == API_CSP  # refusals carry the headers too
    # Another client address is not affected.
    other = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(timeout=30, transport=other) as client:
        assert client.post(url, json=INIT, headers=GOOD).status_code == 200


def test_every_answer_carries_the_security_headers(strict_server: HttpServer) -> None:
    url = strict_server.url
    answers = {
        "ok": _post(url, ALICE, INIT),
        "no token": httpx.post(url, json=LIST, headers=ACCEPT, timeout=30),
        "unknown session": _post(url, ALICE, LIST, "f" * 32),
        "too big": httpx.post(url, content=b"x" * 5000, headers={**GOOD, "Content-Type": "application/json"}),
        "other path": httpx.get(url.replace("/mcp", "/elsewhere"), headers=GOOD, timeout=30),
    }
    assert [r.status_code for r in answers.values()] == [200, 401, 404, 413, 404]
    for what, r in answers.items():
        assert r.headers["content-security-policy"] == API_CSP, what
        assert r.headers["x-frame-options"] == "DENY", what
        assert r.headers["x-content-type-options"] == "nosniff", what
        assert r.headers["referrer-policy"] == "no-referrer", what


def test_a_valid_token_works_end_to_end_behind_the_guards(strict_server: HttpServer) -> None:
    names, result = _call(strict_server.url, ALICE, "list_flags", {"min_severity": "high", "limit": 3})
    assert "lookup_address" in names
    assert result.is_error is False and result.structured_content["count"] <= 3
