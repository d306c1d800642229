"""Leases of jobs that have not started, with several worker processes on one Redis."""

from __future__ import annotations

import time

import redis

from tahrix_lab.jobs.stores.redis import QUEUE_KEY, RedisJobStore

LEASE_S = 0.3


def lapse() -> None:
    time.sleep(LEASE_S + 0.15)


def claim(store: RedisJobStore, worker: str) -> list[tuple[str, bool]]:
    return [(c.job_id, c.taken_over) for c in store.claim_lapsed(worker, LEASE_S, "stopped")]


def test_a_queued_job_whose_lease_lapses_is_taken_out_of_the_queue(redis_url: str) -> None:
    """Taken over while still queued, it leaves the queue: no other worker pops it and runs it
    a second time."""
    store = RedisJobStore(redis_url, lease_s=LEASE_S)
    store.create("q", user="u", request={"job_id": "q"}, enqueue=True)
    lapse()
    assert claim(store, "b") == [("q", True)]
    assert redis.Redis.from_url(redis_url).llen(QUEUE_KEY) == 0
    store.close()


def test_a_popped_job_gets_one_more_lease_before_it_is_taken(redis_url: str) -> None:
    """Popped by a worker that has not renewed yet (it took it a moment ago): another worker
    waits one more lease; if nothing renews it by then, it takes the job."""
    store = RedisJobStore(redis_url, lease_s=LEASE_S)
    store.create("p", user="u", request={"job_id": "p"}, enqueue=True)
    assert redis.Redis.from_url(redis_url).lpop(QUEUE_KEY) is not None  # worker a's intake
    lapse()
    assert claim(store, "b") == []  # a may be about to renew
    lapse()
    assert claim(store, "b") == [("p", True)]  # it did not: a stopped
    store.close()


def test_a_held_job_whose_worker_stops_is_taken_at_the_first_lapse(redis_url: str) -> None:
    store = RedisJobStore(redis_url, lease_s=LEASE_S)
    store.create("h", user="u", request={"job_id": "h"}, enqueue=True)
    redis.Redis.from_url(redis_url).lpop(QUEUE_KEY)
    store.renew("a", ["h"], LEASE_S)  # worker a holds it, then stops renewing
    assert claim(store, "b") == []  # not lapsed yet
    lapse()
    assert claim(store, "b") == [("h", True)]
    store.close()
