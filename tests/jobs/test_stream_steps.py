"""Streamed steps on one event loop (``jobs/steps.py``), the one way a job is driven.

The runner reads every model stream on one event loop thread, which also takes the streamed
steps of every run. What a job produces (chunks, text, transcript) must be exactly what the
same script gives through ``run_agent`` on one thread, whatever the script does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.backends.openai import OpenAIBackend
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message
from tahrix_lab.flow import chunks
from tahrix_lab.jobs.contract import JobRequest
from tahrix_lab.jobs.steps import StreamSteps
from tahrix_lab.jobs.stores.memory import MemoryJobStore
from tests.jobs.runs import Harness, _plain_chunk, _plain_message
from tests.wire import sse
from tests.wire.server import WireServer


class WhereStore(MemoryJobStore):
    """The in-memory job store, noting which thread appended each chunk."""

    def __init__(self) -> None:
        super().__init__(ttl=600)
        self.threads: list[str] = []

    def append(self, job_id: str, chunks: list[Any]) -> bool:
        self.threads.append(threading.current_thread().name)
        return super().append(job_id, chunks)


def script_of(turns: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return {"delay": 0.0, "turns": turns}


# A turn: text, reasoning, tool calls (echo), errors, in any order; the last turn answers.
words = st.text(alphabet="abc xyz", min_size=0, max_size=40)
item = st.one_of(
    st.builds(lambda t: {"kind": "text", "text": t}, words),
    st.builds(lambda t: {"kind": "reasoning", "text": t}, words),
    st.builds(lambda t: {"kind": "tool_call", "name": "echo", "args": {"value": t}}, words),
)
turns = st.lists(st.lists(item, max_size=5), min_size=1, max_size=3).flatmap(
    lambda ts: st.tuples(st.just(ts), st.booleans(), st.integers(0, 4))
)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("steps") / "a.duckdb", FakeBackend.from_script(script_of([[]])))
    yield h
    h.close()


def looped(h: Harness, question: str) -> tuple[Any, ...]:
    """The same question through ``run_agent`` on this thread (the notebook's and the CLI's way)."""
    req = JobRequest(user="u", message=question)
    session, context, _before, history = h.runner.prepare(req)
    events = list(run_agent(session, store=h.transcripts, backend=h.runner.backend, model="m", history=history,
                            context=context, registry=h.runner.integration.registry()))  # fmt: skip
    said = list(chunks(events))
    ends = [c for c in said if c["type"] in ("done", "error")]  # a job's end chunks come last
    said = [c for c in said if c["type"] not in ("done", "error")] + ends
    messages = [_plain_message(m) for m in h.transcripts.load_messages(session.id)]
    content = "".join(c["text"] for c in said if c["type"] == "content")
    return content, [_plain_chunk(c) for c in said], messages


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns)
def test_a_job_gives_what_the_loop_gives(harness: Harness, drawn: Any) -> None:
    raw_turns, fails, where = drawn
    scripted = [list(t) for t in raw_turns]
    if fails:  # a provider failure somewhere in the last turn
        last = scripted[-1]
        last.insert(min(where, len(last)), {"kind": "error", "message": "the provider fell over"})
    harness.runner.backend = FakeBackend.from_script(script_of(scripted))
    _status, _stop, content, said, messages = harness.outcome(harness.ask("question"))
    assert (content, said, messages) == looped(harness, "question")


def test_streamed_steps_run_on_the_event_loop_not_the_jobs_thread(tmp_path: Path) -> None:
    words_ = " ".join(f"w{i}" for i in range(120))
    store = WhereStore()
    h = Harness(tmp_path / "t.duckdb", FakeBackend.from_script({"delay": 0.01, "turns": [[{"kind": "text", "text": words_}]]}),
                store)  # fmt: skip
    try:
        state = h.wait(h.ask())
        assert state["status"] == "done" and state["content"] == words_
        on_loop = store.threads.count("tahrix-streams")
        # The first token of the call is taken by the job's thread (it waits for it), the
        # others by the event loop, so the job's thread slept through the stream; the usage
        # chunk comes after the answer is stored, on the job's thread again.
        assert len(store.threads) == 121
        assert store.threads[0] != "tahrix-streams" and store.threads[-1] != "tahrix-streams"
        assert on_loop >= 110, store.threads[:20]
    finally:
        h.close()


class Quiet:
    """Says a word, then nothing for a long time (a model thinking), unless the read stops."""

    name = "fake"

    def __init__(self) -> None:
        self.closed = threading.Event()

    def stream(self, **request: Any) -> Iterator[Any]:  # pragma: no cover - not used here
        raise AssertionError("read asynchronously")

    async def astream(self, **request: Any) -> AsyncIterator[Any]:
        import asyncio

        try:
            yield {"kind": "text", "text": "Thinking"}
            await asyncio.sleep(60)
            yield {"kind": "text", "text": " too late"}
        finally:
            self.closed.set()


def test_a_cancel_stops_a_quiet_stream_at_once_and_keeps_what_came(tmp_path: Path) -> None:
    backend = Quiet()
    h = Harness(tmp_path / "t.duckdb", backend)
    try:
        job = h.ask()
        h.first_chunk(job)
        t0 = time.monotonic()
        assert h.store.request_cancel(job)
        state = h.wait(job, timeout=10)
        assert time.monotonic() - t0 < 3  # not the 60 s the stream would have taken
        assert state["status"] == "done" and state["stop_reason"] == "cancelled"
        assert state["content"] == "Thinking"
        assert backend.closed.wait(5), "the provider's stream was not closed"
        answer = h.transcripts.load_messages(state["session_id"])[-1]
        assert answer.role == "assistant" and answer.text == "Thinking" and answer.stop_reason == "cancelled"
    finally:
        h.close()


def test_stopping_the_runner_ends_a_quiet_stream_promptly(tmp_path: Path) -> None:
    h = Harness(tmp_path / "t.duckdb", Quiet())
    job = h.ask()
    h.first_chunk(job)
    t0 = time.monotonic()
    h.close()
    assert time.monotonic() - t0 < 5
    state = h.store.read(job)
    assert state is not None and state["status"] == "done" and state["stop_reason"] == "cancelled"


def test_many_runs_at_once_keep_their_own_words(tmp_path: Path) -> None:
    script = {"delay": 0.003, "turns": [[{"kind": "text", "text": "{message} " + " ".join(["and"] * 60)}]]}
    h = Harness(tmp_path / "t.duckdb", FakeBackend.from_script(script))
    try:
        jobs = {h.ask(f"q{i}"): f"q{i}" for i in range(60)}
        for job, question in jobs.items():
            state = h.wait(job)
            assert state["status"] == "done"
            assert state["content"] == question + " " + " ".join(["and"] * 60)
            assert "".join(c["text"] for c in state["chunks"] if c["type"] == "content") == state["content"]
    finally:
        h.close()


def test_an_openai_compatible_endpoint_streams_through_the_event_loop(tmp_path: Path) -> None:
    """The real ``openai`` SDK (AsyncOpenAI) against a loopback Chat Completions server."""
    words_ = [{"kind": "text", "text": f" w{i}"} for i in range(30)]
    with WireServer() as server:
        paced = sse.turn_reply(words_)
        paced.pace = 0.005  # tokens over time, as a model sends them
        server.add(paced)
        cut = sse.turn_reply([{"kind": "text", "text": "par"}, {"kind": "text", "text": "tial"}, *words_])
        cut.drop_after = 3  # the connection drops mid-answer
        server.add(cut)
        backend = OpenAIBackend(base_url=server.url + "/v1", api_key="k")
        store = WhereStore()
        h = Harness(tmp_path / "t.duckdb", backend, store)
        try:
            ok = h.wait(h.ask())
            assert ok["status"] == "done" and ok["content"] == "".join(w["text"] for w in words_)
            assert store.threads.count("tahrix-streams") >= 20  # read and stepped on the event loop
            broken = h.wait(h.ask())
            assert broken["status"] == "error"
            error = [c for c in broken["chunks"] if c["type"] == "error"]
            assert error and "model provider" in error[0]["message"]  # calm, not the SDK's text
            kept = h.transcripts.load_messages(broken["session_id"])[-1]
            assert kept.role == "assistant" and kept.stop_reason == "error"
            assert kept.text == broken["content"] and kept.text.startswith("par")
        finally:
            h.close()
            backend.client.close()


class Endless:
    """Text every 2 ms, until the read stops."""

    name = "fake"

    def stream(self, **request: Any) -> Iterator[Any]:  # pragma: no cover - not used here
        raise AssertionError("read asynchronously")

    async def astream(self, **request: Any) -> AsyncIterator[Any]:
        import asyncio

        while True:
            yield {"kind": "text", "text": "x"}
            await asyncio.sleep(0.002)


def test_a_cancel_poked_while_a_step_runs_hands_the_run_back_only_after_it(tmp_path: Path) -> None:
    """``poke`` (a cancel) may come from another thread while the event loop is inside a step:
    the run's thread must not resume the generator until that step is over (Python would
    refuse: "generator already executing")."""
    import random

    from tahrix_lab.agent.loop import run_agent

    steps = StreamSteps()
    rng = random.Random(3)
    with TranscriptStore(str(tmp_path / "t.duckdb")) as store:
        try:
            for _ in range(40):
                session = store.create_session(user="u")
                store.append_message(session.id, Message.user("q"))
                cancel = threading.Event()
                seen: list[str] = []
                failures: list[BaseException] = []

                def events_for(backend: Any, session: Any = session, cancel: threading.Event = cancel) -> Any:
                    return run_agent(session, store=store, backend=backend, model="m", cancel=cancel)

                busy = threading.Event()  # the event loop is inside a step

                def handle(event: str, _payload: Any, seen: list[str] = seen, busy: threading.Event = busy,
                           cancel: threading.Event = cancel, failures: list[BaseException] = failures) -> None:  # fmt: skip
                    if threading.current_thread().name != "tahrix-streams":
                        if busy.is_set():
                            failures.append(AssertionError(f"{event} handled during a step on the loop"))
                        seen.append(event)
                        return
                    busy.set()
                    try:  # a step that takes a while; one the cancel lands in takes longer still
                        for _ in range(10):
                            time.sleep(0.0001)
                            if cancel.is_set():
                                time.sleep(0.02)
                                break
                        seen.append(event)
                    finally:
                        busy.clear()

                def drive(events_for: Any = events_for, cancel: threading.Event = cancel, handle: Any = handle,
                          failures: list[BaseException] = failures) -> None:  # fmt: skip
                    try:
                        steps.drive(Endless(), events_for, handle, cancel)
                    except BaseException as exc:
                        failures.append(exc)

                thread = threading.Thread(target=drive)
                thread.start()
                deadline = time.monotonic() + 10
                while len(seen) < 20:
                    assert time.monotonic() < deadline
                    time.sleep(0.001)
                time.sleep(rng.uniform(0, 0.005))
                cancel.set()
                steps.poke()  # at once, from this thread, whatever the event loop is doing
                thread.join(10)
                assert not thread.is_alive()
                assert not failures, failures
                assert seen[-1] == "done"
        finally:
            steps.close()


def test_a_run_that_ends_early_stops_reading_the_provider(tmp_path: Path) -> None:
    """A handler that fails ends the run at once; the provider's stream is closed, not read
    on to its end by nobody."""
    from tahrix_lab.agent.loop import run_agent

    backend = Quiet()
    steps = StreamSteps()
    with TranscriptStore(str(tmp_path / "t.duckdb")) as store:
        session = store.create_session(user="u")
        store.append_message(session.id, Message.user("q"))

        def fail(event: str, _payload: Any) -> None:
            raise RuntimeError(f"the handler broke on {event}")

        try:
            with pytest.raises(RuntimeError, match="broke on token"):
                steps.drive(backend, lambda b: run_agent(session, store=store, backend=b, model="m"), fail,
                            threading.Event())  # fmt: skip
            assert backend.closed.wait(5), "the provider's stream was read on"
        finally:
            steps.close()
