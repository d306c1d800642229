"""The HTTP API over a real uvicorn on loopback, in memory and on a real Redis."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.jobs.domain import ChatIntegration, demo_registry
from tahrix_lab.jobs.runner import CLIENT_HISTORY
from tahrix_lab.jobs.server import Built, Settings, build
from tahrix_lab.web.guards import Limits

from .conftest import over_http

JOB = "/api/v1/agent/chat-stream-job"
ALICE = {"Authorization": "Bearer alice-token-123"}
BOB = {"Authorization": "Bearer bob-token-4567"}
TOKENS = {"alice-token-123": "alice", "bob-token-4567": "bob"}

ECHO = {"delay": 0.0, "turns": [[{"kind": "reasoning", "text": "Thinking."},
                                 {"kind": "text", "text": "You asked: {message}"}]]}  # fmt: skip
TOOL_THEN_ANSWER = {
    "delay": 0.01,
    "turns": [
        [
            {"kind": "text", "text": "Let me wait."},
            {"kind": "tool_call", "name": "pause", "args": {"seconds": 1.5}},
        ],
        [{"kind": "text", "text": "Done waiting for {message}"}],
    ],
}
SLOW = {"delay": 0.05, "turns": [[{"kind": "text", "text": " ".join(f"w{i}" for i in range(40))}]]}


@contextmanager
def service(
    tmp_path: Path, script: dict[str, Any], *, redis_url: str | None = None, **settings: Any
) -> Iterator[tuple[httpx.Client, Built]]:
    cfg = Settings(tokens=TOKENS, db=str(tmp_path / "t.duckdb"), redis_url=redis_url, **settings)
    built = build(
        cfg, lambda _t: ChatIntegration(registry=demo_registry()), backend=FakeBackend.from_script(script)
    )
    with over_http(built, timeout=30) as client:
        yield client, built


def run_job(
    client: httpx.Client, headers: dict[str, str], body: dict[str, Any], wait: float = 5
) -> dict[str, Any]:
    r = client.post(JOB, json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def poll_to_end(
    client: httpx.Client, headers: dict[str, str], job_id: str, wait: float = 5
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    since = 0
    chunks: list[dict[str, Any]] = []
    for _ in range(2000):
        r = client.get(f"{JOB}/{job_id}", params={"since": since, "wait": wait}, headers=headers)
        assert r.status_code == 200, r.text
        state = r.json()
        chunks += state["chunks"]
        since = state["next"]
        if state["status"] != "streaming":
            return state, chunks
    raise AssertionError("the job never ended")


def refusal(client: httpx.Client, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """A start refused by the worker: POST is admitted at once, the job ends with the reason."""
    created = run_job(client, headers, body)
    state, chunks = poll_to_end(client, headers, created["job_id"])
    assert state["status"] == "error"
    assert chunks[-1]["type"] == "error" and chunks[-1]["kind"] == "refused"
    return chunks[-1]


def sid(client: httpx.Client, headers: dict[str, str], job_id: str) -> str:
    """The session of a job, once its worker started it."""
    state, _ = poll_to_end(client, headers, job_id)
    return str(state["session_id"])


def test_a_job_streams_and_ends_done(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, ECHO, redis_url=mode) as (client, built):
        created = run_job(client, ALICE, {"message": "what is 0xabc?"})
        meta = created["meta"]
        assert meta["backend"] == "fake"
        assert meta["model"] == "fake-model"
        assert meta["queue_position"] == 0
        assert meta["session_id"] is None  # a new session starts in the worker, after the POST
        state, chunks = poll_to_end(client, ALICE, created["job_id"])
        assert state["status"] == "done"
        assert state["stop_reason"] == "end_turn"
        assert state["content"] == "You asked: what is 0xabc?"
        assert state["reasoning"] == "Thinking."
        assert state["session_id"]
        assert "".join(c["text"] for c in chunks if c["type"] == "content") == state["content"]
        assert [c["type"] for c in chunks][-2:] == ["usage", "done"]
        assert state["usage"]["output_tokens"] > 0
        assert "user" not in state
        # The transcript is in DuckDB, written by this process.
        assert built.transcripts is not None
        msgs = built.transcripts.load_messages(state["session_id"])
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert msgs[1].text == "You asked: what is 0xabc?"


def test_conversation_continues_with_session_id(tmp_path: Path) -> None:
    with service(tmp_path, ECHO) as (client, built):
        first = run_job(client, ALICE, {"message": "one"})
        session = sid(client, ALICE, first["job_id"])
        second = run_job(client, ALICE, {"message": "two", "session_id": session})
        assert second["meta"]["session_id"] == session
        state, _ = poll_to_end(client, ALICE, second["job_id"])
        assert state["content"] == "You asked: two"
        assert built.transcripts is not None
        assert [m.text for m in built.transcripts.load_messages(session)] == [
            "one", "You asked: one", "two", "You asked: two"]  # fmt: skip
        # history seeds a new session only
        refused = refusal(client, ALICE, {"message": "x", "session_id": session,
                                          "history": [{"role": "user", "text": "a"}]})  # fmt: skip
        assert (refused["status"], refused["field"]) == (422, "history")
        # history items as the seed's chat messages ({role, content}) or ours ({role, text})
        seeded = run_job(client, ALICE, {"message": "three", "history": [
            {"role": "user", "content": "earlier"}, {"role": "assistant", "text": "reply"}]})  # fmt: skip
        texts = [m.text for m in built.transcripts.load_messages(sid(client, ALICE, seeded["job_id"]))]
        # the client's turns are stored as ONE user message saying where they came from:
        # a client never writes the assistant's words
        assert texts[1:] == ["three", "You asked: three"]
        assert texts[0] == f"{CLIENT_HISTORY}\n[user] earlier\n[assistant] reply"
        roles = [m.role for m in built.transcripts.load_messages(sid(client, ALICE, seeded["job_id"]))]
        assert roles == ["user", "user", "assistant"]
        bad = client.post(JOB, json={"message": "x", "history": [{"role": "user"}]}, headers=ALICE)
        assert bad.status_code == 422


def test_authentication_and_isolation(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, SLOW, redis_url=mode) as (client, _built):
        assert client.post(JOB, json={"message": "hi"}).status_code == 401
        bad = client.post(JOB, json={"message": "hi"}, headers={"Authorization": "Bearer nope-nope-nope"})
        assert bad.status_code == 401
        assert bad.headers["www-authenticate"] == "Bearer"
        created = run_job(client, ALICE, {"message": "secret question"})
        job = created["job_id"]
        assert client.get(f"{JOB}/{job}").status_code == 401
        unknown = client.get(f"{JOB}/no-such-job", headers=BOB)
        for r in (
            client.get(f"{JOB}/{job}", headers=BOB),
            client.get(f"{JOB}/{job}", params={"wait": 1}, headers=BOB),
            client.delete(f"{JOB}/{job}", headers=BOB),
        ):
            assert r.status_code == 404
            assert r.json() == unknown.json()  # indistinguishable from an unknown job
        state, _ = poll_to_end(client, ALICE, job)  # bob's cancel did nothing
        assert state["status"] == "done"
        refused = refusal(client, BOB, {"message": "hi", "session_id": state["session_id"]})
        assert (refused["status"], refused["field"]) == (404, "session_id")


def test_validation_names_the_field(tmp_path: Path) -> None:
    with service(tmp_path, ECHO) as (client, _built):
        r = client.post(JOB, json={}, headers=ALICE)
        assert r.status_code == 422
        assert r.json()["field"] == "message"
        assert "message" in r.json()["detail"]
        r = client.post(JOB, json={"message": "hi", "colour": "red"}, headers=ALICE)
        assert r.status_code == 422
        assert r.json()["field"] == "colour"
        refused = refusal(client, ALICE, {"message": "hi", "case_id": "C-1"})
        assert (refused["status"], refused["field"]) == (422, "case_id")
        assert "case" in refused["message"]
        created = run_job(client, ALICE, {"message": "hi"})
        r = client.get(f"{JOB}/{created['job_id']}", params={"wait": 99}, headers=ALICE)
        assert r.status_code == 422
        assert r.json()["field"] == "wait"
        r = client.post(JOB, content=b"{not json", headers={**ALICE, "Content-Type": "application/json"})
        assert r.status_code == 422


def test_oversized_bodies_are_refused(tmp_path: Path) -> None:
    with service(tmp_path, ECHO, limits=Limits(max_body_bytes=2048)) as (client, _built):
        big = {"message": "x" * 5000}
        r = client.post(JOB, json=big, headers=ALICE)
        assert r.status_code == 413
        assert "2048" in r.json()["detail"]

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it streams
            yield b'{"message": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        r = client.post(JOB, content=chunked(), headers={**ALICE, "Content-Type": "application/json"})
        assert r.status_code == 413
        assert client.post(JOB, json={"message": "small"}, headers=ALICE).status_code == 200


def test_budget_refusal_ends_the_job(tmp_path: Path) -> None:
    with service(tmp_path, ECHO, budget_minute_tokens=5) as (client, _built):
        created = run_job(client, ALICE, {"message": "first"})
        poll_to_end(client, ALICE, created["job_id"])
        refused = refusal(client, ALICE, {"message": "second"})
        assert refused["status"] == 429
        assert "minute" in refused["message"]
        # another user is not affected by alice's per-user bucket
        state, _ = poll_to_end(client, BOB, run_job(client, BOB, {"message": "hi"})["job_id"])
        assert state["status"] == "done"


def test_per_user_cap_answers_429(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, SLOW, redis_url=mode, max_running_per_user=2) as (client, _built):
        a = run_job(client, ALICE, {"message": "a"})
        run_job(client, ALICE, {"message": "b"})
        r = client.post(JOB, json={"message": "c"}, headers=ALICE)
        assert r.status_code == 429
        assert "2 answers running" in r.json()["detail"]
        assert client.post(JOB, json={"message": "x"}, headers=BOB).status_code == 200  # per user
        client.delete(f"{JOB}/{a['job_id']}", headers=ALICE)
        poll_to_end(client, ALICE, a["job_id"])
        assert client.post(JOB, json={"message": "d"}, headers=ALICE).status_code == 200


def test_budget_refusal_inside_the_run_ends_the_job_with_an_error(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, TOOL_THEN_ANSWER, redis_url=mode, budget_minute_tokens=5) as (client, _built):
        created = run_job(client, ALICE, {"message": "q"})  # nothing spent yet: it starts
        state, chunks = poll_to_end(client, ALICE, created["job_id"])
        assert state["status"] == "error"  # the call after the tool was refused
        assert chunks[-1]["type"] == "error"
        assert chunks[-1]["kind"] == "budget"
        assert "minute" in chunks[-1]["message"]
        assert [c["type"] for c in chunks].count("tool_result") == 1


def test_capacity_queue_reports_position(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, SLOW, redis_url=mode, workers=1) as (client, _built):
        first = run_job(client, ALICE, {"message": "a"})
        second = run_job(client, ALICE, {"message": "b"})
        third = run_job(client, BOB, {"message": "c"})
        assert first["meta"]["queue_position"] == 0
        assert second["meta"]["queue_position"] == 1
        assert third["meta"]["queue_position"] == 2
        r = client.get(f"{JOB}/{third['job_id']}", headers=BOB)
        assert r.json()["queue_position"] == 2
        poll_to_end(client, ALICE, first["job_id"])
        time.sleep(0.3)
        assert client.get(f"{JOB}/{third['job_id']}", headers=BOB).json()["queue_position"] == 1
        # a queued job cancelled before it runs ends at once
        client.delete(f"{JOB}/{third['job_id']}", headers=BOB)
        state, chunks = poll_to_end(client, BOB, third["job_id"])
        assert (state["status"], state["stop_reason"]) == ("done", "cancelled")
        assert chunks == [{"type": "done", "stop_reason": "cancelled"}]
        state, _ = poll_to_end(client, ALICE, second["job_id"])
        assert state["status"] == "done"


def test_cancel_mid_tool(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, TOOL_THEN_ANSWER, redis_url=mode) as (client, built):
        created = run_job(client, ALICE, {"message": "q"})
        job = created["job_id"]
        since = 0
        while True:  # wait until the tool is running
            state = client.get(f"{JOB}/{job}", params={"since": since, "wait": 5}, headers=ALICE).json()
            since = state["next"]
            if any(c["type"] == "tool_call" for c in state["chunks"]):
                break
        r = client.delete(f"{JOB}/{job}", headers=ALICE)
        assert r.status_code == 200
        assert r.json()["cancel_requested"] is True
        state, _ = poll_to_end(client, ALICE, job)
        assert (state["status"], state["stop_reason"]) == ("done", "cancelled")
        assert "Done waiting" not in state["content"]
        assert state["tool_calls"][0]["name"] == "pause"
        assert built.transcripts is not None
        msgs = built.transcripts.load_messages(state["session_id"])
        assert [m.role for m in msgs] == ["user", "assistant", "tool"]
        assert msgs[1].tool_uses()[0].tool_name == "pause"
        # cancelling an ended job changes nothing
        again = client.delete(f"{JOB}/{job}", headers=ALICE).json()
        assert again == {"job_id": job, "status": "done", "cancel_requested": False}


def test_a_poller_that_disappears(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, SLOW, redis_url=mode) as (client, built):
        created = run_job(client, ALICE, {"message": "q"})
        job = created["job_id"]
        with httpx.Client(base_url=str(client.base_url), timeout=0.3) as flaky:
            for _ in range(3):  # long-polls that the client abandons mid-wait
                with pytest.raises(httpx.ReadTimeout):
                    flaky.get(f"{JOB}/{job}", params={"since": 10_000, "wait": 20}, headers=ALICE)
        state, chunks = poll_to_end(client, ALICE, job)
        assert state["status"] == "done"
        assert "".join(c["text"] for c in chunks if c["type"] == "content").split() == [
            f"w{i}" for i in range(40)
        ]
        assert built.transcripts is not None
        assert built.transcripts.load_messages(state["session_id"])[-1].stop_reason == "end_turn"


def test_many_jobs_cancelled_at_random_points(tmp_path: Path, redis_url: str) -> None:
    script = {"delay": 0.02, "turns": [[{"kind": "text", "text": " ".join(f"t{i}" for i in range(30))}]]}
    rng = random.Random(6)
    with service(tmp_path, script, redis_url=redis_url, workers=16, max_running_per_user=None) as (
        client,
        built,
    ):
        jobs, cancels = [], []
        for i in range(200):  # each job is cancelled at a random point after it starts (or while queued)
            job = run_job(client, ALICE, {"message": f"q{i}"})
            timer = threading.Timer(rng.uniform(0, 0.8), client.delete, args=(f"{JOB}/{job['job_id']}",),
                                    kwargs={"headers": ALICE})  # fmt: skip
            timer.start()
            jobs.append(job)
            cancels.append(timer)
        for t in cancels:
            t.join()
        outcomes: dict[str, int] = {}
        assert built.transcripts is not None
        for j in jobs:
            state, chunks = poll_to_end(client, ALICE, j["job_id"])
            outcome = "cancelled" if state["stop_reason"] == "cancelled" else state["status"]
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            texts = [c["text"] for c in chunks if c["type"] == "content"]
            words = "".join(texts).split()
            assert words == [f"t{i}" for i in range(len(words))]  # nothing lost, nothing reordered
            assert state["content"] == "".join(texts)
            msgs = built.transcripts.load_messages(state["session_id"]) if state["session_id"] else []
            if outcome == "done":
                assert msgs[-1].text == state["content"]
            else:
                assert state["status"] == "done"
                assert chunks[-1] == {"type": "done", "stop_reason": "cancelled"}
                if len(msgs) == 2:  # the partial answer the user saw is the one stored
                    assert msgs[-1].stop_reason == "cancelled"
                    assert msgs[-1].text == state["content"]
        assert set(outcomes) <= {"done", "cancelled"}
        assert outcomes.get("cancelled", 0) > 50


def test_sse_endpoint_reuses_the_chunks(tmp_path: Path) -> None:
    with service(tmp_path, ECHO) as (client, _built):
        moved = client.get("/api/v1/agent/chat-stream", params={"message": "hey"}, headers=ALICE)
        assert moved.status_code == 405 and "POST" in moved.json()["detail"]  # no question in URLs
        with client.stream("POST", "/api/v1/agent/chat-stream", json={"message": "hey"}, headers=ALICE) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            frames = [line for line in r.iter_lines() if line.startswith("data: ")]
        chunks = [json.loads(f[len("data: ") :]) for f in frames]
        assert "".join(c["text"] for c in chunks if c["type"] == "content") == "You asked: hey"
        assert chunks[-1]["type"] == "done"


def test_api_docs_only_when_asked(tmp_path: Path) -> None:
    with service(tmp_path, ECHO) as (client, _built):
        assert client.get("/openapi.json").status_code == 404  # off unless --api-docs
    with service(tmp_path, ECHO, api_docs=True) as (client, _built):
        schema = client.get("/openapi.json").json()
        assert f"{JOB}/{{job_id}}" in schema["paths"]
        assert client.get("/").status_code == 404  # the page is the composition root's (app/workplace.py)


def test_schema_fuzz_has_no_server_errors(tmp_path: Path) -> None:
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error

    with service(tmp_path, ECHO, api_docs=True) as (client, _built):
        schema = schemathesis.openapi.from_url(f"{client.base_url}/openapi.json")
        failures: list[str] = []
        for op in schema.get_all_operations():
            operation = op.ok()

            @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            @given(case=operation.as_strategy())
            def check(case: Any) -> None:
                case.headers = {**(case.headers or {}), **ALICE}
                if case.path_parameters and "job_id" in case.path_parameters:
                    case.path_parameters["job_id"] = case.path_parameters["job_id"] or "x"
                response = case.call(base_url=str(client.base_url), timeout=30)
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.path} -> {response.status_code}: {response.text[:200]}"
                    )
                case.validate_response(response, checks=(not_a_server_error,))

            check()
        assert failures == []


def _coalesced(chunks: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Chunk types and texts with consecutive text deltas of one type joined."""
    out: list[tuple[str, str | None]] = []
    for c in chunks:
        kind, text = c["type"], c.get("text")
        if out and text is not None and out[-1][0] == kind and out[-1][1] is not None:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def test_the_hot_paths_answer_as_the_routes_do(tmp_path: Path, mode: str | None) -> None:
    """A well-formed POST/poll is served before FastAPI (fastpaths.py); one it declines (here:
    a ``+json`` Content-Type, which FastAPI still reads as JSON) goes through the routes."""
    with service(tmp_path, ECHO, redis_url=mode) as (client, _built):
        body = json.dumps({"message": "hi", "history": [{"role": "user", "content": "earlier"}]})
        fast = client.post(JOB, content=body, headers={**ALICE, "Content-Type": "application/json"})
        routed = client.post(JOB, content=body, headers={**ALICE, "Content-Type": "application/vnd.x+json"})
        assert fast.status_code == routed.status_code == 200
        assert fast.headers["content-type"] == routed.headers["content-type"] == "application/json"
        a, b = fast.json(), routed.json()
        assert a["job_id"] != b["job_id"]
        assert a["meta"].keys() == b["meta"].keys() and a["meta"]["model"] == b["meta"]["model"]
        end_a, chunks_a = poll_to_end(client, ALICE, a["job_id"])
        end_b, chunks_b = poll_to_end(client, ALICE, b["job_id"])
        # the same chunks, up to where text deltas were coalesced (that depends on timing)
        assert _coalesced(chunks_a) == _coalesced(chunks_b)
        assert end_a.keys() == end_b.keys()
        assert (
            (end_a["status"], end_a["content"])
            == (end_b["status"], end_b["content"])
            == ("done", "You asked: hi")
        )
        # what the fast path refuses to guess at, the routes answer as documented
        assert client.get(f"{JOB}/{a['job_id']}", params={"since": "x"}, headers=ALICE).status_code == 422
        assert client.get(f"{JOB}/{a['job_id']}", params={"since": -1}, headers=ALICE).status_code == 422
        assert client.get(f"{JOB}/{a['job_id']}", headers=BOB).status_code == 404
        assert client.get(f"{JOB}/{a['job_id']}", headers={"Authorization": "Basic x"}).status_code == 401
