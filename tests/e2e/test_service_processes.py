"""`tahrix serve` processes on loopback sharing one real Redis, driven over HTTP."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.agent.store import TranscriptStore

pytestmark = pytest.mark.e2e

_spec = importlib.util.spec_from_file_location(
    "_jobs_helpers", Path(__file__).parents[1] / "jobs" / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
RedisServer = _helpers.RedisServer
free_port = _helpers.free_port

JOB = "/api/v1/agent/chat-stream-job"
ALICE = {"Authorization": "Bearer alice-token-123"}
BOB = {"Authorization": "Bearer bob-token-4567"}
WORDS = 60


class Serve:
    """One `tahrix serve` subprocess; ``url`` once it listens."""

    def __init__(self, *args: str, db: Path, cwd: Path) -> None:
        env = {**os.environ, "TAHRIX_BACKEND": "fake", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tahrix_lab.cli", "--db", str(db), "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout, True), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr, False), daemon=True),
        ]
        for t in self.pumps:
            t.start()
        self.url = ""

    def _pump(self, stream: Any, sink: list[str], announce: bool) -> None:
        for line in stream:
            sink.append(line)
            if announce:
                self.lines.put(line)

    def wait_listening(self, timeout: float = 30, marker: str = "listening on ") -> Serve:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise AssertionError(f"serve exited: {''.join(self.stderr)}") from None
                continue
            if marker in line:
                if marker == "listening on ":
                    self.url = line.split("listening on ")[1].split()[0]
                return self
        raise AssertionError(f"serve did not start: {''.join(self.stdout)} {''.join(self.stderr)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for t in self.pumps:
            t.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def redis_srv(tmp_path: Path) -> Iterator[Any]:
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice-token-123": "alice", "bob-token-4567": "bob"}))
    script = tmp_path / "script.json"
    words = " ".join(f"w{i}" for i in range(WORDS))
    script.write_text(json.dumps({"delay": 0.05, "turns": [[{"kind": "text", "text": words}]]}))
    return {"tokens": str(tokens), "script": str(script), "db": str(tmp_path / "tahrix.duckdb")}


def poll_to_end(
    client: httpx.Client, base: str, headers: dict[str, str], job: str, limit: float = 60
) -> dict[str, Any]:
    since, chunks = 0, []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        r = client.get(f"{base}{JOB}/{job}", params={"since": since, "wait": 5}, headers=headers)
        if r.status_code == 503:
            time.sleep(0.2)
            continue
        assert r.status_code == 200, r.text
        state = r.json()
        chunks += state["chunks"]
        since = state["next"]
        if state["status"] != "streaming":
            state["all_chunks"] = chunks
            return state
    raise AssertionError("the job did not end")


def test_two_processes_share_jobs(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    common = [
        "--redis-url",
        redis_srv.url,
        "--tokens-file",
        files["tokens"],
        "--fake-script",
        files["script"],
    ]
    a = Serve(*common, "--role", "all", db=Path(files["db"]), cwd=tmp_path).wait_listening()
    # A second `--role all` on the same database shares the file (docs/workspace.md): it runs jobs too.
    b = Serve(*common, "--role", "all", db=Path(files["db"]), cwd=tmp_path).wait_listening()
    try:
        assert "serving the API only" not in "".join(b.stdout)
        with httpx.Client(timeout=30) as client:
            # created through B, polled through A
            first = client.post(f"{b.url}{JOB}", json={"message": "one"}, headers=ALICE).json()
            state = poll_to_end(client, a.url, ALICE, first["job_id"])
            assert state["status"] == "done"
            assert state["content"] == " ".join(f"w{i}" for i in range(WORDS))
            # created through A, cancelled through B, read through both
            second = client.post(f"{a.url}{JOB}", json={"message": "two"}, headers=ALICE).json()
            first_chunk = client.get(f"{b.url}{JOB}/{second['job_id']}", params={"wait": 10}, headers=ALICE)
            assert first_chunk.json()["chunks"]
            assert client.get(f"{a.url}{JOB}/{second['job_id']}", headers=BOB).status_code == 404
            assert client.delete(f"{a.url}{JOB}/{second['job_id']}", headers=BOB).status_code == 404
            assert client.delete(f"{b.url}{JOB}/{second['job_id']}", headers=ALICE).json()["cancel_requested"]
            state = poll_to_end(client, b.url, ALICE, second["job_id"])
            assert state["status"] == "cancelled"
            assert poll_to_end(client, a.url, ALICE, second["job_id"])["content"] == state["content"]
            # continuing the conversation through the API-only process
            third = client.post(f"{b.url}{JOB}", json={"message": "three", "session_id": first["meta"]["session_id"]},
                                headers=ALICE).json()  # fmt: skip
            assert poll_to_end(client, b.url, ALICE, third["job_id"])["status"] == "done"
    finally:
        b.stop()
        a.stop()
    errors = "".join(a.stderr + b.stderr)
    assert "lock" not in errors.lower()
    with TranscriptStore(files["db"]) as store:
        one = store.load_messages(first["meta"]["session_id"])
        assert [m.role for m in one] == ["user", "assistant", "user", "assistant"]
        assert one[1].text == one[3].text == " ".join(f"w{i}" for i in range(WORDS))
        two = store.load_messages(second["meta"]["session_id"])
        assert two[-1].stop_reason == "cancelled"
        assert two[-1].text == state["content"]


def test_worker_and_api_processes(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    common = [
        "--redis-url",
        redis_srv.url,
        "--tokens-file",
        files["tokens"],
        "--fake-script",
        files["script"],
    ]
    worker = Serve(*common, "--role", "worker", db=Path(files["db"]), cwd=tmp_path)
    worker.wait_listening(marker="worker running")
    api = Serve(*common, "--role", "api", db=tmp_path / "never.duckdb", cwd=tmp_path).wait_listening()
    try:
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{api.url}{JOB}", json={"message": "one"}, headers=ALICE).json()
            assert job["meta"]["backend"] == "fake"
            assert poll_to_end(client, api.url, ALICE, job["job_id"])["status"] == "done"
            bad = client.post(f"{api.url}{JOB}", json={"message": "x", "session_id": "nope"}, headers=ALICE)
            assert bad.status_code == 404  # the worker's refusal travels back through Redis
            assert bad.json()["field"] == "session_id"
    finally:
        api.stop()
        worker.stop()
    assert not (tmp_path / "never.duckdb").exists()  # the API process never opened a database
    with TranscriptStore(files["db"]) as store:
        assert [m.role for m in store.load_messages(job["meta"]["session_id"])] == ["user", "assistant"]


def test_api_role_without_redis_is_refused(tmp_path: Path, files: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", "--db", files["db"], "serve", "--role", "api", "--port", "0"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "--redis-url" in proc.stderr


def test_redis_unreachable_at_start_names_the_url(tmp_path: Path, files: dict[str, str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    proc = subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", "--db", files["db"], "serve", "--port", "0", "--redis-url", url,
         "--tokens-file", files["tokens"]],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1
    assert url in proc.stderr
    assert "Traceback" not in proc.stderr


def test_redis_killed_during_a_job(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    a = Serve("--redis-url", redis_srv.url, "--tokens-file", files["tokens"], "--fake-script", files["script"],
              db=Path(files["db"]), cwd=tmp_path).wait_listening()  # fmt: skip
    try:
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{a.url}{JOB}", json={"message": "q"}, headers=ALICE).json()
            r = client.get(f"{a.url}{JOB}/{job['job_id']}", params={"wait": 10}, headers=ALICE)
            assert r.json()["chunks"]
            redis_srv.stop()
            r = client.get(f"{a.url}{JOB}/{job['job_id']}", headers=ALICE)
            assert r.status_code == 503  # a calm refusal, not a hang or a crash
            assert "unreachable" in r.json()["detail"]
            assert client.get(f"{a.url}/healthz").status_code == 200
            assert client.post(f"{a.url}{JOB}", json={"message": "x"}, headers=ALICE).status_code == 503
            time.sleep(1.0)
            redis_srv.start()  # same port, empty: the job's keys are gone until the worker rewrites them
            deadline = time.monotonic() + 10
            while client.get(f"{a.url}{JOB}/{job['job_id']}", headers=ALICE).status_code != 200:
                assert time.monotonic() < deadline, "the job was not restored after Redis came back"
                time.sleep(0.1)
            state = poll_to_end(client, a.url, ALICE, job["job_id"])
            assert state["status"] == "error"
            assert "saved in the conversation" in state["all_chunks"][-1]["message"]
            # and the service takes new jobs again
            again = client.post(f"{a.url}{JOB}", json={"message": "after"}, headers=ALICE).json()
            assert poll_to_end(client, a.url, ALICE, again["job_id"])["status"] == "done"
    finally:
        a.stop()
    with TranscriptStore(files["db"]) as store:
        msgs = store.load_messages(job["meta"]["session_id"])
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert msgs[1].text == " ".join(f"w{i}" for i in range(WORDS))  # the whole answer, despite the outage
        assert msgs[1].stop_reason == "end_turn"
