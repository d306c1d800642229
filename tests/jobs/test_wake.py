"""The wake-ups that carry the news, and the tails the API answers long-polls from."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tahrix_lab.flow import ChunkLog, Fold
from tahrix_lab.jobs.stores.redis import RedisJobStore
from tahrix_lab.jobs.stores.wake import Tail, Waker

FIELDS = [[], {}, None]  # tool_calls, usage, stop_reason as a message carries them


def news(job: str, first: int, chunks: list[dict[str, Any]], status: str = "") -> str:
    return json.dumps({"w": [[job, first, status, chunks, *FIELDS]]})


def text(i: int) -> dict[str, Any]:
    return {"type": "content", "text": f"{i},"}


def read_state(chunks: list[dict[str, Any]], since: int, status: str = "streaming") -> dict[str, Any]:
    """What a Redis read of the log ``chunks`` from ``since`` answers."""
    content = "".join(c["text"] for c in chunks if c["type"] == "content")
    return {"status": status, "stop_reason": None, "content": content, "reasoning": "",
            "chunks": chunks[since:], "next": len(chunks), "tool_calls": [], "usage": {},
            "session_id": None, "queue_position": 0, "user": "u"}  # fmt: skip


def listening_waker() -> Waker:
    waker = Waker(client=None)
    waker.listening = True
    return waker


def test_a_tail_answers_what_the_messages_bring() -> None:
    waker = listening_waker()
    log = [text(i) for i in range(6)]
    waker.keep("j", read_state(log[:2], 0), 0, asked=waker.messages)
    assert waker._news(news("j", 2, log[2:4])) == ["j"]
    got = waker.answer("j", 2, news=True)
    assert got is not None and got["chunks"] == log[2:4] and got["next"] == 4
    assert got["content"] == "0,1,2,3,"
    # a message the seeding read already saw changes nothing; one overlapping adds the rest
    waker._news(news("j", 1, log[1:3]))
    waker._news(news("j", 3, log[3:6]))
    got = waker.answer("j", 4, news=True)
    assert got is not None and got["chunks"] == log[4:6] and got["content"] == "0,1,2,3,4,5,"
    assert waker.answer("j", 6, news=True) is None  # nothing new: the poll reads Redis
    assert waker.answer("j", 3, news=False) is None  # before the tail (trimmed to 4): Redis


def test_a_gap_or_a_changed_job_drops_the_tail() -> None:
    waker = listening_waker()
    waker.keep("j", read_state([text(0)], 0), 0, asked=0)
    waker._news(news("j", 3, [text(3)]))  # chunks 1 and 2 never reached this process
    assert "j" not in waker.tails
    waker.keep("j", read_state([text(0)], 0), 0, asked=waker.messages)
    assert waker._news("j other") == ["j", "other"]  # written anew, ended by a reaper
    assert "j" not in waker.tails
    waker.keep("j", read_state([text(0)], 0), 0, asked=waker.messages)
    assert waker._news("{not json") is None  # unreadable: every poll wakes and reads Redis
    assert waker.tails == {}


def test_a_read_overtaken_by_a_message_seeds_no_tail() -> None:
    """The read's reply was parsed after a message about its job: it may predate it."""
    waker = listening_waker()
    fut_loop = asyncio.new_event_loop()
    try:
        fut_loop.run_until_complete(_overtaken(waker))
    finally:
        fut_loop.close()


async def _overtaken(waker: Waker) -> None:
    waker.task = asyncio.get_running_loop().create_future()  # type: ignore[assignment]  # no listener
    fut = waker.register("j")
    asked = waker.messages
    waker._wake(waker._news(news("j", 1, [text(1)])))  # arrives while the read is in flight
    assert fut.done()
    waker.keep("j", read_state([text(0)], 0), 0, asked)  # the read saw only chunk 0
    assert "j" not in waker.tails
    waker.keep("j", read_state([text(0), text(1)], 0), 0, waker.messages)
    assert waker.tails["j"].log.next == 2


def test_no_tail_while_not_listening_and_none_for_an_ended_job() -> None:
    waker = Waker(client=None)
    waker.keep("j", read_state([text(0)], 0), 0, asked=0)
    assert waker.tails == {}
    waker.listening = True
    waker.keep("j", read_state([text(0)], 0, status="done"), 0, asked=0)
    assert waker.tails == {}
    waker.keep("j", read_state([text(0)], 0), 0, asked=0)
    waker._news(news("j", 1, [{"type": "done", "stop_reason": "end_turn"}], status="done"))
    got = waker.answer("j", 1, news=True)
    assert got is not None and got["status"] == "done"
    assert "j" not in waker.tails  # its end was answered: later reads go to Redis


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=12),
    order=st.randoms(use_true_random=False),
    lose=st.sets(st.integers(min_value=0, max_value=12), max_size=3),
)
def test_a_tail_is_always_an_exact_slice_of_the_log(
    cuts: list[int], order: random.Random, lose: set[int]
) -> None:
    """Messages overlapping, repeated, late or lost: whenever the tail exists, it holds the
    log's chunks [base, next) and the content up to next, exactly."""
    log = [text(i) for i in range(41)]
    bounds = sorted({0, *cuts, 41})
    messages = [(a, log[a:b]) for a, b in itertools.pairwise(bounds)]
    messages += [messages[order.randrange(len(messages))] for _ in range(3)]  # repeats
    order.shuffle(messages)
    tail = Tail({"status": "streaming"}, ChunkLog(), Fold.of(read_state(log[:0], 0)), 0.0)
    alive = True
    for n, (first, chunks) in enumerate(messages):
        if n in lose or not alive:
            continue
        alive = tail.extend(first, chunks, "", FIELDS)
        if alive:
            assert tail.log.chunks == log[tail.log.base : tail.log.next]
            assert tail.fold.content == "".join(c["text"] for c in log[: tail.log.next])


def test_long_polls_answered_from_the_feed_see_the_whole_log(redis_url: str) -> None:
    """A real writer and a real listener: bursts of chunks from a thread while a client
    long-polls; the client sees the log exactly, and most answers came from the tail."""
    store = RedisJobStore(redis_url, ttl=180)
    store.create("j", user="u", request={})
    store.take("j", user="u", request={})
    rng = random.Random(7)

    def produce() -> None:
        for i in range(300):
            store.append("j", [text(i)])
            if rng.random() < 0.1:
                threading.Event().wait(rng.random() * 0.02)
        store.finish("j", "done", [{"type": "done", "stop_reason": "end_turn"}])

    async def client() -> tuple[list[dict[str, Any]], int, int]:
        waker = store._on_loop().waker
        from_tail = 0
        answer = waker.answer

        def counted(job_id: str, since: int, *, news: bool) -> dict[str, Any] | None:
            nonlocal from_tail
            got = answer(job_id, since, news=news)
            from_tail += got is not None and bool(got["chunks"])
            return got

        waker.answer = counted  # type: ignore[method-assign]
        seen: list[dict[str, Any]] = []
        since = polls = 0
        producer = threading.Thread(target=produce)
        producer.start()
        try:
            while True:
                state = await store.aread("j", since, wait=5, user="u")
                assert state is not None
                polls += 1
                seen += state["chunks"]
                since = state["next"]
                if state["status"] != "streaming":
                    return seen, from_tail, polls
        finally:
            producer.join()
            await store.aclose()

    seen, from_tail, polls = asyncio.run(client())
    full = store.read("j")
    store.close()
    assert full is not None
    assert seen == full["chunks"]
    assert "".join(c.get("text", "") for c in seen if c["type"] == "content") == "".join(
        f"{i}," for i in range(300)
    )
    assert from_tail >= polls // 2, f"only {from_tail} of {polls} answers came from the tail"


def test_the_gap_between_messages_is_tracked() -> None:
    waker = listening_waker()
    for i in range(30):
        waker._news(news("j", i, [text(i)]))
    assert waker.gap < 0.01  # back to back
    waker._last_at = (waker._last_at or 0) - 0.5  # as if the last message came 0.5 s ago
    waker._news(news("j", 30, [text(30)]))
    assert waker.gap > 0.05


def test_a_poll_lingers_only_when_more_wake_ups_come_within_its_linger(redis_url: str) -> None:
    """Lingering gathers more chunks only if the writer publishes more often than the linger;
    when its batches are further apart (the writer already gathers), a linger is only delay."""
    store = RedisJobStore(redis_url, ttl=180)
    linger = 0.4

    def produce(job: str, every: float, count: int) -> None:
        for i in range(count):
            store.append(job, [text(i)])
            threading.Event().wait(every)
        store.finish(job, "done", [{"type": "done", "stop_reason": "end_turn"}])

    async def answers(job: str, every: float, count: int) -> list[tuple[float, int]]:
        """(seconds from the poll to its answer, chunks in it) for each poll."""
        store.create(job, user="u", request={})
        store.take(job, user="u", request={})
        producer = threading.Thread(target=produce, args=(job, every, count))
        producer.start()
        got: list[tuple[float, int]] = []
        since = 0
        try:
            while True:
                t0 = asyncio.get_running_loop().time()
                state = await store.aread(job, since, wait=5, user="u", linger=linger)
                assert state is not None
                got.append((asyncio.get_running_loop().time() - t0, len(state["chunks"])))
                since = state["next"]
                if state["status"] != "streaming":
                    return got
        finally:
            producer.join()

    async def both() -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
        try:
            sparse = await answers("sparse", 0.6, 5)  # batches 0.6 s apart: longer than the linger
            dense = await answers("dense", 0.01, 150)  # every 10 ms: many within one linger
            return sparse, dense
        finally:
            await store.aclose()

    sparse, dense = asyncio.run(both())
    store.close()
    # Sparse: each poll answers when its batch lands (within the 0.6 s), never 0.4 s after it.
    assert all(n == 1 for _, n in sparse[1:-1]), sparse
    assert max(t for t, _ in sparse[1:-1]) < 0.6 + 0.25, sparse
    # Dense: woken polls linger and each answer carries the chunks of many batches.
    assert max(n for _, n in dense) >= 10, dense
