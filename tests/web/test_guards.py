"""``tahrix_lab.web.guards`` around a small ASGI app: a real uvicorn on loopback (in a thread) for
what needs sockets, the layers called as ASGI apps for the rest."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.types import Message, Receive, Scope, Send

from tahrix_lab.web.guards import (
    API_CSP,
    DOCS_CSP,
    PAGE_CSP,
    BodyLimit,
    Limits,
    SecurityHeaders,
    SignInThrottle,
    read_body,
    send_json,
    uvicorn_limits,
)
from tests.slow_clients import closed_by_server

TOKEN = b"Bearer right"


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """401 without the right token; else the body's length."""
    if scope["type"] != "http":
        return
    if dict(scope["headers"]).get(b"authorization") != TOKEN:
        await send_json(send, 401, {"detail": "no"})
        return
    body = await read_body(receive)
    await send_json(send, 200, {"got": len(body or b"")})


@pytest.fixture
def server() -> Iterator[str]:
    """``echo`` behind the body limit (100 bytes) with 1 s timeouts, served by uvicorn."""
    limits = Limits(max_body_bytes=100, keep_alive_s=1, header_timeout_s=1, body_timeout_s=1)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(BodyLimit(echo, limits.max_body_bytes), log_level="warning", lifespan="off",
                            **uvicorn_limits(limits))  # fmt: skip
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not srv.started and thread.is_alive():
            thread.join(0.05)
        assert srv.started, "uvicorn did not start"
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()


def connect(address: str) -> socket.socket:
    host, port = address.split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_read_timeouts_close_slow_and_silent_clients(server: str) -> None:
    with connect(server) as silent:
        assert closed_by_server(silent)
    with connect(server) as slow_headers:
        slow_headers.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert closed_by_server(slow_headers, b"X-a: bbbb")
    with connect(server) as slow_body:
        slow_body.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer right\r\nContent-Length: 90\r\n\r\n"
        )
        assert closed_by_server(slow_body, b"aaaa")
    with connect(server) as idle:  # answered, then kept alive with nothing to do
        idle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer right\r\n\r\n")
        idle.settimeout(10)
        assert idle.recv(4096).startswith(b"HTTP/1.1 200")
        assert closed_by_server(idle)
    assert httpx.post(
        f"http://{server}/", content=b"a" * 50, headers={"Authorization": "Bearer right"}
    ).json() == {"got": 50}


def test_body_limit_by_declared_length_and_by_counting(server: str) -> None:
    auth = {"Authorization": "Bearer right"}
    declared = httpx.post(f"http://{server}/", content=b"a" * 101, headers=auth)
    assert declared.status_code == 413 and "100 bytes" in declared.json()["detail"]
    streamed = httpx.post(f"http://{server}/", content=iter([b"a" * 60, b"a" * 60]), headers=auth)
    assert streamed.status_code == 413
    assert httpx.post(f"http://{server}/", content=iter([b"a" * 60, b"a" * 40]), headers=auth).json() == {
        "got": 100
    }


def call(app: Any, path: str = "/api/x", client: str = "10.0.0.1", token: bytes = b"") -> list[Message]:
    """The messages ``app`` sends for one GET."""
    headers = [(b"authorization", token)] if token else []
    scope = {"type": "http", "method": "GET", "path": path, "headers": headers, "client": (client, 1)}
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def status(sent: list[Message]) -> int:
    return int(sent[0]["status"])


def test_sign_in_throttle_counts_401s_per_address_under_its_prefix() -> None:
    app = SignInThrottle(echo, 3, prefix="/api")
    assert [status(call(app, token=TOKEN)) for _ in range(10)] == [200] * 10  # passing costs nothing
    assert [status(call(app)) for _ in range(4)] == [401, 401, 401, 429]
    refused = call(app, token=TOKEN)  # a valid token included
    assert status(refused) == 429 and dict(refused[0]["headers"])[b"retry-after"] == b"21"
    assert "sign-ins" in json.loads(refused[1]["body"])["detail"]
    assert status(call(app, path="/healthz", token=TOKEN)) == 200  # outside the prefix
    assert status(call(app, client="10.0.0.2", token=TOKEN)) == 200  # another address
    assert status(call(SignInThrottle(echo, 0), token=b"")) == 401  # 0: off


def test_sign_in_throttle_forgets_clients_past_its_bound() -> None:
    app = SignInThrottle(echo, 30, max_clients=50)
    for i in range(200):
        call(app, client=f"10.0.{i // 256}.{i % 256}")
    assert len(app._buckets) <= 50


def test_security_headers_csp_is_a_parameter() -> None:
    def headers(app: Any, path: str = "/api/x") -> dict[bytes, bytes]:
        return dict(call(app, path=path, token=TOKEN)[0]["headers"])

    page = headers(SecurityHeaders(echo))
    assert page[b"content-security-policy"] == PAGE_CSP.encode()
    assert (page[b"x-frame-options"], page[b"x-content-type-options"], page[b"referrer-policy"]) == (
        b"DENY", b"nosniff", b"no-referrer")  # fmt: skip
    assert headers(SecurityHeaders(echo, csp=API_CSP))[b"content-security-policy"] == API_CSP.encode()
    with_docs = SecurityHeaders(echo, docs=True)
    assert headers(with_docs, "/docs")[b"content-security-policy"] == DOCS_CSP.encode()
    assert headers(with_docs, "/")[b"content-security-policy"] == PAGE_CSP.encode()
