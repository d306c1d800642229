"""A real redis-server per test session (loopback, free port, no persistence)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process that a test can kill and start again on the same port."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed (scripts/system-deps.sh installs it)"
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--protected-mode",
                "no",
                "--maxclients",
                "10000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)
        client.close()
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def flush(self) -> None:
        client = redis.Redis.from_url(self.url)
        client.flushall()
        client.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    if redis_server.proc is None:
        redis_server.start()
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server for tests that kill it."""
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


class AppServer:
    """A FastAPI app served by uvicorn in a thread on a free loopback port."""

    def __init__(self, app: object) -> None:
        import threading

        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",  # type: ignore[arg-type]
                timeout_graceful_shutdown=1,
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> AppServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@contextmanager
def over_http(built: Any, timeout: float = 60) -> Iterator[httpx.Client]:
    """A client of ``built``'s service served on loopback; ``built`` is closed at the end."""
    from tahrix_lab.jobs.http.api import create_app

    assert built.service is not None
    try:
        with (
            AppServer(create_app(built.service)) as srv,
            httpx.Client(base_url=srv.url, timeout=timeout) as client,
        ):
            yield client
    finally:
        built.close()


@pytest.fixture(params=["memory", "redis"])
def mode(request: pytest.FixtureRequest) -> str | None:
    """Each test twice: jobs in memory (None), and on the real Redis (its URL)."""
    return request.getfixturevalue("redis_url") if request.param == "redis" else None
