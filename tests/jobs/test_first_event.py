"""Stop pressed while a model thinks, before its first word. For a backend read on the event
loop (``astream``) and a blocking one (Bedrock: read through ``stream_in_thread``), the job
ends cancelled at once and the provider's stream is closed (a blocking read's once it
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

from tahrix_lab.agent.backends.base import stream_in_thread
from tahrix_lab.agent.backends.bedrock import BedrockBackend
from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.backends.openai import OpenAIBackend
from tahrix_lab.agent.errors import BackendError
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
    """A backend with only ``stream`` is read through a thread of its own, in order, tools and all."""
    words = " ".join(f"w{i}" for i in range(40))
    script = {"delay": 0.001, "turns": [
        [{"kind": "text", "text": "Looking."}, {"kind": "tool_call", "name": "echo", "args": {"value": 7}}],
        [{"kind": "text", "text": words}],
    ]}  # fmt: skip
    h = Harness(tmp_path / "t.duckdb", ThreadOnly(FakeBackend.from_script(script)))
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
    return BedrockBackend(client=client)  # boto3 read on a thread of its own (stream_in_thread)


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


def test_a_blocking_stream_read_through_a_thread_of_its_own() -> None:
    """``stream_in_thread``: the events in order, a failure raised where it is read, and a
    stream let go early is closed once its blocked read returns (one thread per call)."""
    backend = SilentSync()
    backend.release.set()

    async def read_all() -> list[Any]:
        return [e async for e in stream_in_thread(backend.stream)]

    assert [e["kind"] for e in asyncio.run(read_all())] == ["text", "done"]
    assert backend.closed.wait(5)

    def failing() -> Iterator[Any]:
        yield {"kind": "text", "text": "a"}
        raise BackendError("the provider fell over", retryable=False)

    got: list[Any] = []

    async def read_failing() -> None:
        async for e in stream_in_thread(failing):
            got.append(e)

    with pytest.raises(BackendError):
        asyncio.run(read_failing())
    assert [e["text"] for e in got] == ["a"]

    quiet = SilentSync()

    async def let_go() -> None:
        gen = stream_in_thread(quiet.stream)
        task = asyncio.ensure_future(gen.__anext__())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await gen.aclose()

    asyncio.run(let_go())
    assert quiet.opened.is_set() and not quiet.closed.is_set()  # still blocked in its read
    quiet.release.set()
    assert quiet.closed.wait(5), "the provider's stream was left open"
