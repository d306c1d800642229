"""`tahrix serve --role api --api-processes N`: N real processes on one port, one real Redis."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e

_spec = importlib.util.spec_from_file_location(
    "_service_processes", Path(__file__).with_name("test_service_processes.py")
)
assert _spec is not None and _spec.loader is not None
_sp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sp)
Serve, poll_to_end, JOB, ALICE, WORDS = _sp.Serve, _sp.poll_to_end, _sp.JOB, _sp.ALICE, _sp.WORDS
redis_srv, files = _sp.redis_srv, _sp.files  # the fixtures

CHILD = re.compile(r"API process (\d+) listening on the same port")


def children(api: Any) -> list[int]:
    return [int(m.group(1)) for line in api.stdout if (m := CHILD.search(line))]


def wait_children(api: Any, count: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(children(api)) < count:
        assert time.monotonic() < deadline, f"children did not start: {api.stdout} {api.stderr}"
        assert api.proc.poll() is None, f"serve exited: {api.stderr}"
        time.sleep(0.1)
    return children(api)


def answering_pids(url: str, tries: int = 60) -> list[int]:
    """Which process answers ``/healthz`` on each of ``tries`` new connections (all must answer)."""
    pids = []
    for _ in range(tries):
        with httpx.Client(timeout=5) as client:  # a new connection each time: the kernel spreads them
            r = client.get(f"{url}/healthz")
            assert r.status_code == 200, r.text
            pids.append(r.json()["pid"])
    return pids


def end_all(api: Any) -> None:
    """Stop ``api``, first killing any child it left (it would hold the output pipes open)."""
    for pid in children(api):
        if running(pid):
            os.kill(pid, signal.SIGKILL)
    api.stop()


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_api_processes_share_a_port_and_one_killed_is_replaced(
    tmp_path: Path, redis_srv: Any, files: dict[str, str]
) -> None:
    worker, api = _sp.worker_and_api(tmp_path, redis_srv, files, "--api-processes", "3")
    try:
        first = wait_children(api, 2)
        assert set(answering_pids(api.url)) == {api.proc.pid, *first}  # all three take connections

        # A job started through one process streams whole through new connections to any.
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{api.url}{JOB}", json={"message": "one"}, headers=ALICE).json()
        with httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as client:
            done = poll_to_end(client, api.url, ALICE, job["job_id"])
        assert done["status"] == "done"
        text = "".join(c["text"] for c in done["all_chunks"] if c["type"] == "content")
        assert text == " ".join(f"w{i}" for i in range(WORDS))

        os.kill(first[0], signal.SIGKILL)
        during = answering_pids(api.url, tries=20)  # the others answer every new connection
        assert first[0] not in during
        replaced = wait_children(api, 3)[-1]
        assert replaced not in first and running(replaced)
        assert any("ended (exit code -9)" in line for line in api.stdout)
        assert replaced in answering_pids(api.url)

        api.proc.send_signal(signal.SIGTERM)  # stops them all
        api.proc.wait(20)
        deadline = time.monotonic() + 10
        while any(running(pid) for pid in (first[1], replaced)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(first[1]) and not running(replaced)
    finally:
        end_all(api)
        worker.stop()
    assert not (tmp_path / "never.duckdb").exists()


def test_children_end_when_their_parent_is_killed(
    tmp_path: Path, redis_srv: Any, files: dict[str, str]
) -> None:
    api = Serve("--redis-url", redis_srv.url, "--tokens-file", files["tokens"], "--role", "api",
                "--api-processes", "2", db=tmp_path / "never.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        (child,) = wait_children(api, 1)
        api.proc.kill()
        api.proc.wait(10)
        deadline = time.monotonic() + 10
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(child)  # no orphan keeps the port
    finally:
        end_all(api)


def test_api_processes_need_the_api_role(tmp_path: Path, files: dict[str, str]) -> None:
    assert "--api-processes needs --role api" in _sp.serve_refused(tmp_path, files, "--api-processes", "2")
