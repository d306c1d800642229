"""One suite for every JobStore: in memory and in a real Redis."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from tahrix_lab.flow import compact
from tahrix_lab.jobs.contract import JobStore, StoreUnavailable
from tahrix_lab.jobs.stores.memory import MemoryJobStore
from tahrix_lab.jobs.stores.redis import RedisJobStore


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[JobStore]:
    s: JobStore
    if request.param == "memory":
        s = MemoryJobStore(ttl=180)
    else:
        s = RedisJobStore(request.getfixturevalue("redis_url"), ttl=180)
    yield s
    s.close()


def test_unknown_job_reads_as_none(store: JobStore) -> None:
    assert store.read("nope") is None
    assert store.request_cancel("nope") is False


def test_chunks_fold_into_state(store: JobStore) -> None:
    store.create("j1", user="alice", request={})
    assert (store.read("j1") or {}).get("user") == "alice"
    store.append("j1", [{"type": "reasoning", "text": "Think "}, {"type": "reasoning", "text": "hard."}])
    store.append("j1", [{"type": "tool_call", "id": "c1", "name": "lookup", "args": {"a": 1}}])
    store.flush()
    state = store.read("j1")
    assert state is not None
    assert state["tool_calls"] == [{"id": "c1", "name": "lookup", "status": "running"}]
    store.append("j1", [{"type": "tool_result", "id": "c1", "name": "lookup", "result": {}, "status": "ok"}])
    store.append("j1", [{"type": "content", "text": "Héllo "}, {"type": "content", "text": "wörld"}])
    usage = {"type": "usage", "model": "m", "backend": "fake", "cost_usd": None,
             "usage": {"input_tokens": 10, "output_tokens": 3}}  # fmt: skip
    store.append("j1", [usage])
    store.finish("j1", "done", [{"type": "done", "stop_reason": "end_turn"}])
    state = store.read("j1")
    assert state is not None
    assert state["status"] == "done"
    assert state["content"] == "Héllo wörld"
    assert state["reasoning"] == "Think hard."
    assert state["tool_calls"] == [{"id": "c1", "name": "lookup", "status": "ok"}]
    assert state["usage"]["input_tokens"] == 10
    assert state["usage"]["output_tokens"] == 3
    assert state["usage"]["cost_usd"] is None
    assert state["usage"]["prompt_tokens"] == 10  # the seed's names beside ours
    assert state["usage"]["completion_tokens"] == 3
    assert state["stop_reason"] == "end_turn"
    assert state["session_id"] is None  # set when a worker starts the session
    # consecutive deltas may arrive merged (the Redis writer batches); the text is the same
    assert [c["type"] for c in compact(state["chunks"])] == [
        "reasoning", "tool_call", "tool_result", "content", "usage", "done"]  # fmt: skip
    assert state["next"] == len(state["chunks"])


def test_since_returns_only_later_chunks(store: JobStore) -> None:
    store.create("j", user="u", request={})
    for i in range(10):
        store.append("j", [{"type": "content", "text": str(i)}])
        if i % 3 == 0:
            store.flush()  # several writes, so several chunks
    store.flush()
    full = store.read("j")
    assert full is not None
    n = full["next"]
    assert n == len(full["chunks"])
    state = store.read("j", since=n - 1)
    assert state is not None
    assert state["chunks"] == full["chunks"][-1:]
    assert state["content"] == "0123456789"
    later = store.read("j", since=n)
    assert later is not None
    assert later["chunks"] == []
    assert later["next"] == n


def test_finished_job_does_not_block(store: JobStore) -> None:
    store.create("j", user="u", request={})
    store.finish("j", "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
    store.flush()
    state = asyncio.run(_aread(store, "j", since=1, wait=10))
    assert state is not None
    assert state["status"] == "done"  # a seed client stops on it
    assert state["stop_reason"] == "cancelled"


def test_running_tool_calls_take_the_final_status(store: JobStore) -> None:
    store.create("j", user="u", request={})
    store.append("j", [{"type": "tool_call", "id": "c1", "name": "slow", "args": {}}])
    store.finish("j", "cancelled", [{"type": "done", "stop_reason": "cancelled"}])
    store.flush()
    state = store.read("j")
    assert state is not None
    assert state["tool_calls"] == [{"id": "c1", "name": "slow", "status": "cancelled"}]


def test_cancel_flag_reaches_the_writer(store: JobStore) -> None:
    store.create("a", user="u", request={})
    store.create("b", user="u", request={})
    assert store.append("a", [{"type": "content", "text": "x"}]) is False
    store.flush()
    assert store.request_cancel("a") is True
    assert store.cancel_requested(["a", "b", "ghost"]) == {"a"}
    assert store.append("a", [{"type": "content", "text": "y"}]) is True


def test_queue_position(store: JobStore) -> None:
    store.create("j", user="u", request={}, queue_position=3)
    store.flush()
    state = store.read("j")
    assert state is not None
    assert state["queue_position"] == 3
    store.set_queue_position({"j": 1, "ghost": 2})
    store.flush()
    state = store.read("j")
    assert state is not None
    assert state["queue_position"] == 1
    assert store.read("ghost") is None  # positions never create a job
    store.append("j", [{"type": "content", "text": "go"}])
    store.flush()
    store.flush()
    state = store.read("j")
    assert state is not None
    assert state["queue_position"] == 0


def in_threads(store: JobStore, prefix: str, n: int, run: Callable[[str], None]) -> list[str]:
    """Create ``n`` jobs and run ``run(job)`` for each in its own thread, all at once."""
    jobs = [f"{prefix}{i}" for i in range(n)]
    for j in jobs:
        store.create(j, user="u", request={})
    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads)
    return jobs


def test_concurrent_writers_keep_each_job_in_order(store: JobStore) -> None:
    def write(job: str) -> None:
        for i in range(100):
            store.append(job, [{"type": "content", "text": f"{i},"}])

    jobs = in_threads(store, "j", 8, write)
    for j in jobs:
        store.flush()
        state = store.read(j)
        assert state is not None
        assert "".join(c["text"] for c in state["chunks"]) == "".join(f"{i}," for i in range(100))
        assert state["content"] == "".join(f"{i}," for i in range(100))


def test_expired_job_is_gone(store: JobStore) -> None:
    store.ttl = 1
    store.create("j", user="u", request={})
    store.finish("j", "done", [{"type": "done", "stop_reason": "end_turn"}])
    assert store.read("j") is not None
    time.sleep(2.2)
    assert store.read("j") is None
    store.append("j", [{"type": "content", "text": "late"}])
    store.flush()
    assert store.read("j") is None  # not recreated


def test_redis_keys_and_ttl(redis_url: str) -> None:
    store = RedisJobStore(redis_url, ttl=180)
    store.create("k", user="u", request={})
    store.append("k", [{"type": "content", "text": "x"}])
    store.flush()
    client = redis.Redis.from_url(redis_url)
    assert client.type("chatjob:k") == b"hash"
    assert client.type("chatjob:k:chunks") == b"stream"
    assert 170 < client.ttl("chatjob:k") <= 180
    assert 170 < client.ttl("chatjob:k:chunks") <= 180
    client.close()
    store.close()


def test_a_job_streaming_longer_than_its_ttl_stays(redis_url: str) -> None:
    """The TTL counts from the last write: a job that streams for three TTLs is still there,
    chunks and all, and expires once it is quiet."""
    store = RedisJobStore(redis_url, ttl=2)
    store.create("long", user="u", request={})
    client = redis.Redis.from_url(redis_url)
    try:
        for i in range(60):  # 6 s
            store.append("long", [{"type": "content", "text": f"{i},"}])
            time.sleep(0.1)
            if i % 10 == 9:
                store.flush()
                assert 0 < client.ttl("chatjob:long") <= 2 and 0 < client.ttl("chatjob:long:chunks") <= 2
        store.flush()
        state = store.read("long")
        assert state is not None and state["content"] == "".join(f"{i}," for i in range(60))
        time.sleep(2.5)  # quiet now: it expires as documented
        assert store.read("long") is None
    finally:
        client.close()
        store.close()


def test_redis_unreachable_names_the_url() -> None:
    store = RedisJobStore("redis://127.0.0.1:1/0")
    with pytest.raises(StoreUnavailable, match=r"redis://127\.0\.0\.1:1/0"):
        store.check()
    with pytest.raises(StoreUnavailable):
        store.read("x")
    store.close()


def test_async_long_poll_returns_when_a_chunk_arrives(store: JobStore) -> None:
    import asyncio

    store.create("j", user="u", request={})

    async def scenario() -> tuple[dict[str, object] | None, dict[str, object] | None]:
        timer = threading.Timer(0.2, store.append, args=("j", [{"type": "content", "text": "hi"}]))
        timer.start()
        got = await store.aread("j", since=0, wait=10)
        idle = await store.aread("j", since=1, wait=0.2)
        await store.aclose()
        timer.join()
        return got, idle

    got, idle = asyncio.run(scenario())
    assert got is not None
    assert [c["text"] for c in got["chunks"]] == ["hi"]  # type: ignore[union-attr]
    assert idle is not None
    assert idle["chunks"] == []
    assert asyncio.run(_aread(store, "ghost", wait=1)) is None


async def _aread(store: JobStore, job_id: str, **kwargs: Any) -> dict[str, Any] | None:
    try:
        return await store.aread(job_id, **kwargs)
    finally:
        await store.aclose()


def test_many_simultaneous_long_polls(store: JobStore) -> None:
    """More waiting polls than redis-py's default pool of 100 connections."""
    import asyncio

    ids = [f"m{i}" for i in range(150)]
    for j in ids:
        store.create(j, user="u", request={})

    def feed() -> None:
        time.sleep(0.5)
        for j in ids:
            store.append(j, [{"type": "content", "text": j}])

    async def scenario() -> list[dict[str, object] | None]:
        feeder = threading.Thread(target=feed)
        feeder.start()
        try:
            return await asyncio.gather(*(store.aread(j, since=0, wait=15, user="u") for j in ids))
        finally:
            await store.aclose()
            feeder.join()

    states = asyncio.run(scenario())
    assert [s["chunks"] for s in states if s is not None] == [[{"type": "content", "text": j}] for j in ids]


def test_the_end_lands_after_every_chunk_appended_before_it(store: JobStore) -> None:
    """Runs append from many threads at once (the Redis writer takes them from an inbox):
    each job's end is written after all its chunks, and every waiting finish returns."""

    def run(job: str) -> None:
        for i in range(50):
            store.append(job, [{"type": "content", "text": f"{i},"}])
        store.finish(job, "done", [{"type": "done", "stop_reason": "end_turn"}])

    jobs = in_threads(store, "e", 24, run)  # every finish returned
    for j in jobs:
        state = store.read(j)
        assert state is not None and state["status"] == "done"
        assert state["content"] == "".join(f"{i}," for i in range(50))
        assert state["chunks"][-1] == {"type": "done", "stop_reason": "end_turn"}
