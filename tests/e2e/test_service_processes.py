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
import redis

from tahrix_lab.agent.storage import TranscriptStore

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
ALICE = {"Authorization": "Bearer alice-token-0123456789abcdefghijklm"}
BOB = {"Authorization": "Bearer bob-token-0123456789abcdefghijklmno"}
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

    def wait_listening(self, timeout: float = 90, marker: str = "listening on ") -> Serve:
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
    tokens.write_text(
        json.dumps(
            {"alice-token-0123456789abcdefghijklm": "alice", "bob-token-0123456789abcdefghijklmno": "bob"}
        )
    )
    tokens.chmod(0o600)  # the service refuses a tokens file others can read
    script = tmp_path / "script.json"
    words = " ".join(f"w{i}" for i in range(WORDS))
    script.write_text(json.dumps({"delay": 0.05, "turns": [[{"kind": "text", "text": words}]]}))
    return {"tokens": str(tokens), "script": str(script), "db": str(tmp_path / "tahrix.duckdb")}


def serve_all(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> Serve:
    """One `--role all` process on the test's Redis, listening."""
    return Serve("--redis-url", redis_srv.url, "--tokens-file", files["tokens"], "--fake-script", files["script"],
                 db=Path(files["db"]), cwd=tmp_path).wait_listening()  # fmt: skip


def poll_to_end(
    client: httpx.Client, base: str, headers: dict[str, str], job: str, limit: float = 60, *,
    since: int = 0, retry: tuple[int, ...] = (503,),
) -> dict[str, Any]:  # fmt: skip
    """Long-poll from ``since`` to the end; ``all_chunks`` holds what arrived. Statuses in ``retry``
    (503: an outage, or a restarted Redis that has not got the job back yet) are tried again; any
    other, a 404 first, fails the test, as a client written to the seed's contract would stop."""
    chunks: list[dict[str, Any]] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        r = client.get(f"{base}{JOB}/{job}", params={"since": since, "wait": 5}, headers=headers)
        if r.status_code in retry:
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
            first_session = state["session_id"]
            assert state["content"] == " ".join(f"w{i}" for i in range(WORDS))
            # created through A, cancelled through B, read through both
            second = client.post(f"{a.url}{JOB}", json={"message": "two"}, headers=ALICE).json()
            first_chunk = client.get(f"{b.url}{JOB}/{second['job_id']}", params={"wait": 10}, headers=ALICE)
            assert first_chunk.json()["chunks"]
            assert client.get(f"{a.url}{JOB}/{second['job_id']}", headers=BOB).status_code == 404
            assert client.delete(f"{a.url}{JOB}/{second['job_id']}", headers=BOB).status_code == 404
            assert client.delete(f"{b.url}{JOB}/{second['job_id']}", headers=ALICE).json()["cancel_requested"]
            state = poll_to_end(client, b.url, ALICE, second["job_id"])
            assert (state["status"], state["stop_reason"]) == ("done", "cancelled")
            assert poll_to_end(client, a.url, ALICE, second["job_id"])["content"] == state["content"]
            # continuing the conversation through the API-only process
            third = client.post(f"{b.url}{JOB}", json={"message": "three", "session_id": first_session},
                                headers=ALICE).json()  # fmt: skip
            assert poll_to_end(client, b.url, ALICE, third["job_id"])["status"] == "done"
    finally:
        b.stop()
        a.stop()
    errors = "".join(a.stderr + b.stderr)
    assert "lock" not in errors.lower()
    with TranscriptStore(files["db"]) as store:
        one = store.load_messages(first_session)
        assert [m.role for m in one] == ["user", "assistant", "user", "assistant"]
        assert one[1].text == one[3].text == " ".join(f"w{i}" for i in range(WORDS))
        two = store.load_messages(state["session_id"])
        assert two[-1].stop_reason == "cancelled"
        assert two[-1].text == state["content"]


def worker_and_api(
    tmp_path: Path, redis_srv: Any, files: dict[str, str], *api_args: str
) -> tuple[Serve, Serve]:
    """A `--role worker` and a `--role api` process (with ``api_args``) on the test's Redis."""
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
    api = Serve(*common, "--role", "api", *api_args, db=tmp_path / "never.duckdb", cwd=tmp_path)
    return worker, api.wait_listening()


def test_worker_and_api_processes(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    worker, api = worker_and_api(tmp_path, redis_srv, files)
    try:
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{api.url}{JOB}", json={"message": "one"}, headers=ALICE).json()
            assert job["meta"]["backend"] == "fake"
            done = poll_to_end(client, api.url, ALICE, job["job_id"])
            assert done["status"] == "done"
            bad = client.post(f"{api.url}{JOB}", json={"message": "x", "session_id": "nope"}, headers=ALICE)
            assert bad.status_code == 200  # admitted at once; the worker refuses the start
            refused = poll_to_end(client, api.url, ALICE, bad.json()["job_id"])
            assert refused["status"] == "error"
            last = refused["all_chunks"][-1]
            assert (last["kind"], last["status"], last["field"]) == ("refused", 404, "session_id")
    finally:
        api.stop()
        worker.stop()
    assert not (tmp_path / "never.duckdb").exists()  # the API process never opened a database
    with TranscriptStore(files["db"]) as store:
        assert [m.role for m in store.load_messages(done["session_id"])] == ["user", "assistant"]


def serve_refused(tmp_path: Path, files: dict[str, str], *args: str) -> str:
    """Run `tahrix serve` with ``args``, which must refuse to start calmly; its stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", "--db", files["db"], "serve", "--port", "0", *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    return proc.stderr


def test_api_role_without_redis_is_refused(tmp_path: Path, files: dict[str, str]) -> None:
    assert "--redis-url" in serve_refused(tmp_path, files, "--role", "api")


def test_redis_unreachable_at_start_names_the_url(tmp_path: Path, files: dict[str, str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    assert url in serve_refused(tmp_path, files, "--redis-url", url, "--tokens-file", files["tokens"])


def test_redis_killed_and_restarted_empty_during_a_job(
    tmp_path: Path, redis_srv: Any, files: dict[str, str]
) -> None:
    """Killed mid-answer (a long one, so that it surely runs across the outage), then back empty:
    a poll is refused as during an outage until the worker writes the job anew, never a 404."""
    words = " ".join(f"w{i}" for i in range(300))
    Path(files["script"]).write_text(
        json.dumps({"delay": 0.05, "turns": [[{"kind": "text", "text": words}]]})
    )
    a = serve_all(tmp_path, redis_srv, files)
    try:
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{a.url}{JOB}", json={"message": "q"}, headers=ALICE).json()
            r = client.get(f"{a.url}{JOB}/{job['job_id']}", params={"wait": 10}, headers=ALICE)
            first = r.json()
            assert first["chunks"] and first["status"] == "streaming"
            since, seen = first["next"], list(first["chunks"])
            redis_srv.proc.send_signal(signal.SIGKILL)
            redis_srv.proc.wait(5)
            redis_srv.proc = None
            r = client.get(f"{a.url}{JOB}/{job['job_id']}", params={"since": since}, headers=ALICE)
            assert r.status_code == 503  # a calm refusal, not a hang or a crash
            assert "unreachable" in r.json()["detail"]
            assert client.get(f"{a.url}/healthz").status_code == 200  # alive
            ready = client.get(f"{a.url}/readyz")
            assert ready.status_code == 503  # but not ready
            assert ready.json()["checks"]["store"] is False
            assert client.post(f"{a.url}{JOB}", json={"message": "x"}, headers=ALICE).status_code == 503
            time.sleep(1.0)
            redis_srv.start()  # same port, empty: the writer writes the job anew, same numbering
            # the very first request after the restart is answered (a dead pooled connection is retried)
            assert client.get(f"{a.url}/readyz").status_code == 200
            state = poll_to_end(client, a.url, ALICE, job["job_id"], 30, since=since)  # never a 404
            seen += state["all_chunks"]
            assert state is not None and state["status"] == "done"  # the end reached the client at its since
            assert (
                "".join(c["text"] for c in seen if c["type"] == "content") == words
            )  # nothing lost or twice
            assert seen[-1]["type"] == "done"
            again = client.post(f"{a.url}{JOB}", json={"message": "after"}, headers=ALICE).json()
            assert poll_to_end(client, a.url, ALICE, again["job_id"])["status"] == "done"
    finally:
        a.stop()
    with TranscriptStore(files["db"]) as store:
        msgs = store.load_messages(state["session_id"])
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert msgs[1].text == words  # the whole answer, despite the outage
        assert msgs[1].stop_reason == "end_turn"


def test_redis_frozen_requests_keep_their_deadline(
    tmp_path: Path, redis_srv: Any, files: dict[str, str]
) -> None:
    a = serve_all(tmp_path, redis_srv, files)
    try:
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{a.url}{JOB}", json={"message": "q"}, headers=ALICE).json()
            first = client.get(f"{a.url}{JOB}/{job['job_id']}", params={"wait": 10}, headers=ALICE).json()
            redis_srv.proc.send_signal(signal.SIGSTOP)
            try:
                # generous client timeouts: the server itself must answer by wait + 1 s
                r = client.get(f"{a.url}{JOB}/{job['job_id']}", params={"since": 10_000, "wait": 3},
                               headers=ALICE, timeout=4.5)  # fmt: skip
                assert r.status_code == 503
                r = client.post(f"{a.url}{JOB}", json={"message": "x"}, headers=ALICE, timeout=2.5)
                assert r.status_code == 503
                assert client.get(f"{a.url}/readyz", timeout=2.5).status_code == 503
            finally:
                redis_srv.proc.send_signal(signal.SIGCONT)
            seen = list(first["chunks"])
            state = poll_to_end(client, a.url, ALICE, job["job_id"], 30, since=first["next"])
            seen += state["all_chunks"]
            assert state["status"] == "done"
            assert "".join(c["text"] for c in seen if c["type"] == "content") == " ".join(
                f"w{i}" for i in range(WORDS)
            )
    finally:
        a.stop()


def test_worker_killed_mid_answer(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    """SIGKILL of the worker: the running job ends calmly within the lease, the transcript keeps
    what was streamed, and a job that had not started is run by the next worker."""
    script = tmp_path / "long.json"
    script.write_text(
        json.dumps(
            {"delay": 0.05, "turns": [[{"kind": "text", "text": " ".join(f"w{i}" for i in range(400))}]]}
        )
    )
    common = ["--redis-url", redis_srv.url, "--tokens-file", files["tokens"], "--fake-script", str(script),
              "--workers", "1"]  # fmt: skip
    worker = Serve(*common, "--role", "worker", db=Path(files["db"]), cwd=tmp_path)
    worker.wait_listening(marker="worker running")
    api = Serve(*common, "--role", "api", db=tmp_path / "never.duckdb", cwd=tmp_path).wait_listening()
    replacement = None
    try:
        with httpx.Client(timeout=30) as client:
            running = client.post(f"{api.url}{JOB}", json={"message": "one"}, headers=ALICE).json()
            queued = client.post(f"{api.url}{JOB}", json={"message": "two"}, headers=ALICE).json()
            since, seen = 0, []
            while len(seen) < 20:
                state = client.get(f"{api.url}{JOB}/{running['job_id']}", params={"since": since, "wait": 5},
                                   headers=ALICE).json()  # fmt: skip
                seen += state["chunks"]
                since = state["next"]
            worker.proc.send_signal(signal.SIGKILL)
            worker.proc.wait(10)
            killed_at = time.monotonic()
            replacement = Serve(*common, "--role", "worker", db=Path(files["db"]), cwd=tmp_path)
            replacement.wait_listening(marker="worker running")
            while True:
                r = client.get(
                    f"{api.url}{JOB}/{running['job_id']}", params={"since": since, "wait": 5}, headers=ALICE
                )
                assert r.status_code == 200, r.text
                state = r.json()
                seen += state["chunks"]
                since = state["next"]
                if state["status"] != "streaming":
                    break
                assert time.monotonic() - killed_at < 30, "the job of the killed worker never ended"
            assert state["status"] == "error"
            assert seen[-1]["type"] == "error" and seen[-1]["kind"] == "lease"
            assert "kept in the conversation" in seen[-1]["message"]
            streamed = "".join(c["text"] for c in seen if c["type"] == "content")
            assert streamed and streamed == state["content"]
            other = poll_to_end(client, api.url, ALICE, queued["job_id"])  # taken over, run from the start
            assert other["status"] == "done"
            assert other["content"] == " ".join(f"w{i}" for i in range(400))
    finally:
        api.stop()
        if replacement is not None:
            replacement.stop()
        worker.stop()
    with TranscriptStore(files["db"]) as store:
        msgs = store.load_messages(state["session_id"])
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert (msgs[1].text, msgs[1].stop_reason) == (streamed, "error")  # what the client saw, kept
        two = store.load_messages(other["session_id"])
        assert [m.text for m in two] == ["two", other["content"]]  # its question stored once


def unsaved(redis_srv: Any) -> set[str]:
    return set(redis.Redis.from_url(redis_srv.url, decode_responses=True).smembers("chatjob:unsaved"))


def test_worker_killed_with_no_worker_left(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    """SIGKILL of the only worker: the API process ends its job (the lease lapses, no worker is
    alive to claim it) and the next worker to start keeps the interrupted answer."""
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"delay": 0.05, "turns": [[{"kind": "text", "text": " ".join(
        f"w{i}" for i in range(400))}]]}))  # fmt: skip
    common = ["--redis-url", redis_srv.url, "--tokens-file", files["tokens"], "--fake-script", str(script)]
    worker = Serve(*common, "--role", "worker", db=Path(files["db"]), cwd=tmp_path)
    worker.wait_listening(marker="worker running")
    api = Serve(*common, "--role", "api", db=tmp_path / "never.duckdb", cwd=tmp_path).wait_listening()
    later = None
    try:
        with httpx.Client(timeout=30) as client:
            job = client.post(f"{api.url}{JOB}", json={"message": "one"}, headers=ALICE).json()
            since, seen = 0, []
            while len(seen) < 20:
                state = client.get(f"{api.url}{JOB}/{job['job_id']}", params={"since": since, "wait": 5},
                                   headers=ALICE).json()  # fmt: skip
                seen += state["chunks"]
                since = state["next"]
            worker.proc.send_signal(signal.SIGKILL)
            worker.proc.wait(10)
            state = poll_to_end(client, api.url, ALICE, job["job_id"], 60, since=since)
            seen += state["all_chunks"]
            assert state["status"] == "error"
            assert seen[-1]["type"] == "error" and seen[-1]["kind"] == "lease"
            streamed = "".join(c["text"] for c in seen if c["type"] == "content")
            assert streamed and streamed == state["content"]
            # No worker is alive: the answer waits in Redis for the next one, which keeps it.
            assert unsaved(redis_srv) == {job["job_id"]}
            later = Serve(*common, "--role", "worker", db=Path(files["db"]), cwd=tmp_path)
            later.wait_listening(marker="worker running")
            while unsaved(redis_srv):
                time.sleep(0.2)
    finally:
        api.stop()
        if later is not None:
            later.stop()
        worker.stop()
    with TranscriptStore(files["db"]) as store:
        msgs = store.load_messages(state["session_id"])
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert (msgs[1].text, msgs[1].stop_reason) == (streamed, "error")


def test_a_client_written_to_the_seed_contract(tmp_path: Path, redis_srv: Any, files: dict[str, str]) -> None:
    """POST {message, case_id, history (role/content)}, poll every 500 ms, render chunks after
    lastChunkIdx, stop on done/error: nothing more."""
    a = serve_all(tmp_path, redis_srv, files)

    def seed_client(
        client: httpx.Client, body: dict[str, Any], stop_after: int | None = None
    ) -> dict[str, Any]:
        created = client.post(f"{a.url}{JOB}", json=body, headers=ALICE)
        assert created.status_code == 200, created.text
        job_id, last, rendered, polls = created.json()["job_id"], 0, "", 0
        assert isinstance(created.json()["meta"], dict)
        while True:
            state = client.get(f"{a.url}{JOB}/{job_id}", headers=ALICE).json()
            chunks = state["chunks"]  # without since: all of them; the client slices
            for chunk in chunks[last:]:
                if chunk["type"] == "content":
                    rendered += chunk["text"]
            last = len(chunks)
            polls += 1
            assert state["status"] in ("streaming", "done", "error")
            if state["status"] in ("done", "error"):
                return {"state": state, "rendered": rendered, "polls": polls}
            if stop_after is not None and polls == stop_after:
                client.delete(f"{a.url}{JOB}/{job_id}", headers=ALICE)
            time.sleep(0.5)

    try:
        with httpx.Client(timeout=30) as client:
            out = seed_client(client, {"message": "q", "case_id": None,
                                       "history": [{"role": "user", "content": "earlier"},
                                                   {"role": "assistant", "content": "a reply"}]})  # fmt: skip
            assert out["state"]["status"] == "done"
            assert out["rendered"] == out["state"]["content"] == " ".join(f"w{i}" for i in range(WORDS))
            usage = out["state"]["usage"]
            assert usage["prompt_tokens"] == usage["input_tokens"] and usage["completion_tokens"] > 0
            stopped = seed_client(
                client, {"message": "stop me", "case_id": None, "history": []}, stop_after=2
            )
            assert stopped["state"]["status"] == "done"  # a seed client stops on it
            assert stopped["state"]["stop_reason"] == "cancelled"
    finally:
        a.stop()
    with TranscriptStore(files["db"]) as store:
        msgs = store.load_messages(out["state"]["session_id"])
        # the client's history is one user turn saying where it came from (docs/security.md)
        assert [m.role for m in msgs] == ["user", "user", "assistant"]
        assert msgs[0].text.endswith("\n[user] earlier\n[assistant] a reply")
        assert msgs[1].text == "q"
