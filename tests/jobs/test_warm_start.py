"""A started API is ready for a burst: scripts loaded, wake-ups subscribed, connections open,
and a frozen Redis at start-up delays it by a socket timeout at most."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path

import httpx
import pytest
import redis

from tahrix_lab.jobs.http.api import create_app
from tahrix_lab.jobs.server import Built, Settings, build
from tahrix_lab.jobs.stores import scripts
from tahrix_lab.jobs.stores.redis import ASYNC_POOL, SOCKET_TIMEOUT_S
from tahrix_lab.jobs.stores.wake import WAKE_CHANNEL

from .conftest import AppServer, RedisServer

TOKENS = {"tok-warm-123456": "ana"}
AUTH = {"Authorization": "Bearer tok-warm-123456"}
JOB = "/api/v1/agent/chat-stream-job"


def api_only(url: str, tmp_path: Path) -> Built:
    """``--role api``: no runner, so nothing but the API's own start-up talks to Redis."""
    built = build(Settings(tokens=TOKENS, db=str(tmp_path / "t.duckdb"), redis_url=url, role="api"))
    assert built.runner is None
    return built


def test_the_api_is_ready_before_its_first_request(own_redis: RedisServer, tmp_path: Path) -> None:
    probe = redis.Redis.from_url(own_redis.url)
    probe.script_flush()
    built = api_only(own_redis.url, tmp_path)
    assert built.service is not None
    try:
        before = len(probe.client_list())
        with AppServer(create_app(built.service)) as srv:
            deadline = time.monotonic() + 5
            while probe.pubsub_numsub(WAKE_CHANNEL)[0][1] < 1:  # the listener subscribes on its own
                assert time.monotonic() < deadline, "the wake-up channel was not subscribed"
                time.sleep(0.02)
            # Every script the store calls is loaded: no request pays a NOSCRIPT round trip.
            names = [n for n in dir(scripts) if n.isupper() and not n.startswith("_") and n != "P"]
            shas = [probe.register_script(getattr(scripts, n)).sha for n in names]
            assert len(shas) >= 10 and all(probe.script_exists(*shas))
            assert len(probe.client_list()) - before >= ASYNC_POOL // 2  # open before anyone asked
            with httpx.Client(base_url=srv.url) as client:  # and the API answers as usual
                assert client.get(f"{JOB}/nope", headers=AUTH).status_code == 404
    finally:
        built.close()
        probe.close()


def test_a_frozen_redis_does_not_hold_up_start_up(
    own_redis: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    built = api_only(own_redis.url, tmp_path)
    assert own_redis.proc is not None and built.service is not None
    try:
        own_redis.proc.send_signal(signal.SIGSTOP)  # sockets open, nothing answers
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING), AppServer(create_app(built.service)) as srv:
            started = time.monotonic() - t0
            own_redis.proc.send_signal(signal.SIGCONT)
            assert started < SOCKET_TIMEOUT_S + 3
            assert any("no warm-up" in r.getMessage() for r in caplog.records)
            with httpx.Client(base_url=srv.url, timeout=10) as client:  # thawed: requests connect
                deadline = time.monotonic() + 10
                while (got := client.get(f"{JOB}/nope", headers=AUTH).status_code) == 503:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
                assert got == 404
    finally:
        own_redis.proc.send_signal(signal.SIGCONT)
        built.close()
