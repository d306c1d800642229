"""A job runner on the in-memory store with a real transcript file, driven as a client would:
ask, wait for the end, read what the job and the transcript say."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message
from tahrix_lab.jobs.contract import JobRequest
from tahrix_lab.jobs.domain import ChatIntegration, demo_registry
from tahrix_lab.jobs.runner import JobRunner
from tahrix_lab.jobs.stores.memory import MemoryJobStore


def _plain_chunk(chunk: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((k, chunk[k]) for k in ("type", "text", "name", "status", "stop_reason", "message", "kind")
                 if k in chunk)  # fmt: skip


def _plain_message(msg: Message) -> tuple[Any, ...]:
    parts = tuple((p.type, p.text, p.tool_name) for p in msg.parts)
    return msg.role, parts, msg.stop_reason


class ThreadOnly:
    """The same backend without ``astream`` (only ``stream``): read through ``stream_in_thread``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def stream(self, **request: Any) -> Iterator[Any]:
        return self.inner.stream(**request)


class Harness:
    def __init__(self, tmp: Path, backend: Any, store: MemoryJobStore | None = None) -> None:
        self.store = store or MemoryJobStore(ttl=600)
        self.transcripts = TranscriptStore(str(tmp))
        self.runner = JobRunner(self.store, transcripts=self.transcripts, backend=backend, model="m",
                                integration=ChatIntegration(registry=demo_registry()), workers=64,
                                max_running_per_user=None, watch_interval=0.05).start()  # fmt: skip

    def ask(self, message: str = "q") -> str:
        req = JobRequest(user="u", message=message)
        asyncio.run(self.runner.asubmit(req))
        return req.job_id

    def wait(self, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            state = self.store.read(job_id)
            assert state is not None
            if state["status"] != "streaming":
                return state
            assert time.monotonic() < deadline, f"job {job_id} did not end"
            time.sleep(0.01)

    def first_chunk(self, job_id: str, timeout: float = 10.0) -> None:
        """Until the job has streamed something."""
        deadline = time.monotonic() + timeout
        while not (self.store.read(job_id) or {}).get("chunks"):
            assert time.monotonic() < deadline, f"job {job_id} streamed nothing"
            time.sleep(0.01)

    def outcome(self, job_id: str) -> tuple[Any, ...]:
        """What a client and the transcript see, without ids and timings."""
        state = self.wait(job_id)
        chunks = [_plain_chunk(c) for c in state["chunks"]]
        messages = [_plain_message(m) for m in self.transcripts.load_messages(state["session_id"])]
        return state["status"], state["stop_reason"], state["content"], chunks, messages

    def cancel(self, job_id: str) -> tuple[dict[str, Any], float]:
        """Press Stop: the job's end state, and the seconds it took to end."""
        t0 = time.monotonic()
        assert self.store.request_cancel(job_id)
        state = self.wait(job_id, timeout=10)
        return state, time.monotonic() - t0

    def assert_stopped_before_a_word(self, state: dict[str, Any], question: str) -> None:
        """The job ended cancelled with nothing said, and the transcript holds the question only."""
        assert state["status"] == "done" and state["stop_reason"] == "cancelled"
        assert state["content"] == "" and not [c for c in state["chunks"] if c["type"] == "error"]
        messages = self.transcripts.load_messages(state["session_id"])
        assert [(m.role, m.text) for m in messages] == [("user", question)]

    def close(self) -> None:
        self.runner.stop()
        self.transcripts.close()


def asked(server: Any, timeout: float = 10.0) -> None:
    """Until a loopback endpoint got its request; then a moment for the job's thread to be
    waiting on the answer."""
    deadline = time.monotonic() + timeout
    while not server.requests:
        assert time.monotonic() < deadline, "the model was never asked"
        time.sleep(0.01)
    time.sleep(0.2)
