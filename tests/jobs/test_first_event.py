"""Stop pressed while a model thinks, before its first word. For a backend read on the event
loop (``astream``) and one read on the job's own thread (Bedrock: ``jobs/first_event.py``),
the job ends cancelled at once and the provider's stream is closed (a blocking read's once it
returns); a stream that answers is read as before."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import pytest

from tahrix_lab.agent.backends.bedrock import BedrockBackend
from tahrix_lab.agent.backends.openai import OpenAIBackend
from tahrix_lab.agent.errors import BackendError
from tahrix_lab.jobs.first_event import CancelFlag, FirstEventBackend
from tahrix_lab.jobs.scripted import scripted_backend
from tests.jobs.runs import Harness, ThreadOnly, asked
from tests.wire import eventstream, sse
from tests.wire.server import WireServer


class SilentSync:
    """A synchronous backend that says nothing until ``release`` is set (a model thinking)."""

    name = "fake"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.opened = threading.Event()
        self.closed = threading.Event()

    def stream(self, **request: Any) -> Iterator[Any]:
        self.opened.set()
        return self._events()

    def _events(self) -> Iterator[Any]:
        try:
            self.release.wait(30)
            yield {"kind": "text", "text": "too late"}
            yield {"kind": "done", "stop_reason": "end_turn", "raw_stop_reason": "end_turn", "usage": None}
        finally:
            self.closed.set()


class SilentAsync(SilentSync):
    """The same, read on the event loop."""

    async def astream(self, **request: Any) -> AsyncIterator[Any]:
        self.opened.set()
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.05)
            yield {"kind": "text", "text": "too late"}
        finally:
            self.closed.set()


@pytest.mark.parametrize("make", [SilentAsync, SilentSync], ids=["event-loop", "own-thread"])
def test_a_cancel_while_the_model_thinks_ends_the_job_at_once(tmp_path: Path, make: type[SilentSync]) -> None:
    backend = make()
    h = Harness(tmp_path / "t.duckdb", backend)
    try:
        job = h.ask("why")
        assert backend.opened.wait(10)
        time.sleep(0.2)  # the job's thread waits for the first event
        state, took = h.cancel(job)
        assert took < 3  # not the 30 s of thinking
        h.assert_stopped_before_a_word(state, "why")
        if make is SilentSync:  # a blocking read cannot be interrupted: closed once it returns
            assert not backend.closed.is_set()
            backend.release.set()
        assert backend.closed.wait(5), "the provider's stream was left open"
    finally:
        backend.release.set()
        h.close()


def test_a_threaded_backend_that_answers_streams_whole_with_tools(tmp_path: Path) -> None:
    """The first event comes through the helper, the rest on the job's thread, in order."""
    words = " ".join(f"w{i}" for i in range(40))
    script = {"delay": 0.001, "turns": [
        [{"kind": "text", "text": "Looking."}, {"kind": "tool_call", "name": "echo", "args": {"value": 7}}],
        [{"kind": "text", "text": words}],
    ]}  # fmt: skip
    h = Harness(tmp_path / "t.duckdb", ThreadOnly(scripted_backend(script)))
    try:
        state = h.wait(h.ask())
        assert state["status"] == "done", state
        assert state["content"].startswith("Looking.") and state["content"].endswith(words)
        kinds = [c["type"] for c in state["chunks"]]
        assert "tool_result" in kinds and kinds.index("tool_result") < len(kinds) - 1
    finally:
        h.close()


def wire_backend(provider: str, url: str) -> Any:
    if provider == "openai":  # read on the event loop through AsyncOpenAI
        return OpenAIBackend(base_url=url + "/v1", api_key="k")
    client = boto3.client("bedrock-runtime", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="k", aws_secret_access_key="s",
                          config=botocore.config.Config(retries={"total_max_attempts": 1}))  # fmt: skip
    return BedrockBackend(client=client)  # read on the job's thread through boto3


@pytest.mark.parametrize("provider", ["openai", "bedrock"])
def test_a_cancel_while_a_real_endpoint_thinks_ends_the_job_at_once(tmp_path: Path, provider: str) -> None:
    """The real SDKs against loopback endpoints that wait before their first event. The
    OpenAI-compatible one sees the hang-up; boto3's read is let go when it returns."""
    with WireServer() as server:
        events = [{"kind": "text", "text": "late"}]
        thinking = sse.turn_reply(events) if provider == "openai" else eventstream.turn_reply(events)
        thinking.think = 8
        server.add(thinking)
        backend = wire_backend(provider, server.url)
        h = Harness(tmp_path / "t.duckdb", backend)
        try:
            job = h.ask("why")
            asked(server)
            state, took = h.cancel(job)
            assert took < 3
            h.assert_stopped_before_a_word(state, "why")
            if provider == "openai":
                deadline = time.monotonic() + 5
                while server.hangups < 1:
                    assert time.monotonic() < deadline, "the endpoint's stream was left open"
                    time.sleep(0.02)
        finally:
            h.close()
            if provider == "bedrock":
                backend.client.close()


def test_a_cancel_wakes_the_wait_for_a_first_event_without_polling() -> None:
    """The job's thread sleeps on the call until its first event or its cancel: no timed
    wake-ups (hundreds of jobs may be waiting at once)."""
    backend = SilentSync()
    cancel = CancelFlag()
    stream = FirstEventBackend(backend, cancel, poll_s=60).stream()  # a poll would take a minute
    raised: list[BaseException] = []

    def read() -> None:
        try:
            next(stream)
        except BaseException as exc:
            raised.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert backend.opened.wait(5)
    cancel.set()
    reader.join(10)
    assert not reader.is_alive(), "the wait was not woken by the cancel"
    assert isinstance(raised[0], BackendError) and not raised[0].retryable
    backend.release.set()
    assert backend.closed.wait(5)  # the helper closed the stream once its read returned
    assert cancel._wakes == []  # the call stopped watching the flag


def test_an_answer_that_comes_is_read_whole_through_the_first_event_wait() -> None:
    backend = SilentSync()
    backend.release.set()
    events = list(FirstEventBackend(backend, CancelFlag()).stream())
    assert [e["kind"] for e in events] == ["text", "done"]
