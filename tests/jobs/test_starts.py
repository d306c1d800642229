"""Job starts in groups (``jobs/runner.py``) and the transcript transaction they share."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.group_commit import GroupCommit
from tahrix_lab.agent.transcript import Message
from tahrix_lab.jobs.contract import JobRejected, JobRequest
from tahrix_lab.jobs.domain import ChatIntegration
from tahrix_lab.jobs.runner import JobRunner
from tahrix_lab.jobs.steps import BurstGate
from tahrix_lab.jobs.stores.memory import MemoryJobStore


class Recorder:
    """A transaction that records which jobs ran inside which group, and can fail on demand."""

    def __init__(self, fail_group_with: str | None = None) -> None:
        self.groups: list[list[str]] = []
        self.current: list[str] | None = None
        self.fail_group_with = fail_group_with
        self.alone: list[str] = []

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.current = []
        try:
            yield
            self.groups.append(self.current)
        finally:
            self.current = None

    def run_one(self, job: str) -> str:
        time.sleep(0.002)  # long enough for the other threads to queue behind the leader
        if job == "refused":
            raise JobRejected(404, "no such session", "session_id")
        if job == self.fail_group_with:
            if self.current is not None:
                raise RuntimeError("the database refused the group")  # fails the transaction
            self.alone.append(job)
        if self.current is not None:
            self.current.append(job)
        else:
            self.alone.append(job)
        return job.upper()


def group_starts(rec: Recorder, max_batch: int = 32) -> GroupCommit[str, str]:
    """Starts as the runner groups them: a refusal (``JobRejected``) is refused alone."""
    return GroupCommit(rec.run_one, rec.transaction, max_batch=max_batch, alone=(JobRejected,))


def start_all(starts: GroupCommit[str, str], jobs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    barrier = threading.Barrier(len(jobs))

    def one(job: str) -> None:
        barrier.wait()
        try:
            out[job] = starts.run(job)
        except Exception as exc:
            out[job] = exc

    threads = [threading.Thread(target=one, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return out


def test_a_burst_of_starts_shares_few_transactions() -> None:
    rec = Recorder()
    starts = group_starts(rec, max_batch=8)
    jobs = [f"j{i}" for i in range(40)]
    out = start_all(starts, jobs)
    assert out == {j: j.upper() for j in jobs}  # each thread gets its own result
    ran = [j for g in rec.groups for j in g]
    assert sorted(ran) == sorted(jobs)  # every start ran once, inside a transaction
    assert all(len(g) <= 8 for g in rec.groups)
    assert len(rec.groups) < len(jobs)  # grouped: fewer transactions than starts
    assert starts.groups == len(rec.groups)


def test_a_refused_start_is_refused_alone() -> None:
    rec = Recorder()
    starts = group_starts(rec)
    out = start_all(starts, ["a", "refused", "b", "c"])
    assert isinstance(out["refused"], JobRejected) and out["refused"].status == 404
    assert {k: v for k, v in out.items() if k != "refused"} == {"a": "A", "b": "B", "c": "C"}
    assert not rec.alone  # the refusal did not break its group's transaction


def test_a_failing_transaction_runs_each_start_on_its_own() -> None:
    rec = Recorder(fail_group_with="bad")
    starts = group_starts(rec)
    jobs = ["a", "bad", "b", "c", "d"]
    out = start_all(starts, jobs)
    assert out == {j: j.upper() for j in jobs}  # the neighbours of the failure still start
    assert "bad" in rec.alone  # it ran again outside a group


def test_the_lead_passes_on_when_the_leader_is_done() -> None:
    """Starts that arrive while a group runs are not stranded: the next thread leads."""
    rec = Recorder()
    starts = group_starts(rec, max_batch=1)
    out = start_all(starts, [f"j{i}" for i in range(10)])
    assert len(out) == 10 and all(isinstance(v, str) for v in out.values())
    assert len(rec.groups) == 10


def test_transaction_rolls_back_messages_and_positions(tmp_path: Path) -> None:
    with TranscriptStore(str(tmp_path / "t.duckdb")) as store:
        kept = store.create_session(user="u")
        store.append_message(kept.id, Message.user("first"))

        def fails_halfway() -> None:
            with store.transaction():
                store.append_message(kept.id, Message.user("lost"))
                store.create_session(user="u", title="lost too")
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            fails_halfway()
        assert [m.text for m in store.load_messages(kept.id)] == ["first"]
        assert [s.title for s in store.list_sessions(user="u")] == [None]
        later = store.append_message(kept.id, Message.user("second"))
        assert later.position == 1  # no gap where the rolled-back message was


def test_a_burst_of_jobs_starts_in_groups_with_every_question_stored(tmp_path: Path) -> None:
    store = MemoryJobStore(ttl=60)
    script = {"delay": 0.0, "turns": [[{"kind": "text", "text": "ok"}]]}
    with TranscriptStore(str(tmp_path / "t.duckdb")) as transcripts:
        runner = JobRunner(store, transcripts=transcripts, backend=FakeBackend.from_script(script), model="m",
                           integration=ChatIntegration(), workers=30, max_running_per_user=None).start()  # fmt: skip
        try:
            reqs = [JobRequest(user="u", message=f"question {i}") for i in range(30)]

            async def burst() -> None:
                await asyncio.gather(*(runner.asubmit(req) for req in reqs))

            asyncio.run(burst())
            deadline = time.monotonic() + 30
            while any((store.read(r.job_id) or {}).get("status") != "done" for r in reqs):
                assert time.monotonic() < deadline, "the burst did not finish"
                time.sleep(0.05)
        finally:
            runner.stop()
        for req in reqs:
            state = store.read(req.job_id)
            assert state is not None and state["session_id"]
            texts = [m.text for m in transcripts.load_messages(state["session_id"])]
            assert texts == [req.message, "ok"]
        assert runner._starts.groups < len(reqs)


def test_a_buffered_transaction_writes_its_rows_at_the_end(tmp_path: Path) -> None:
    with TranscriptStore(str(tmp_path / "t.duckdb")) as store:
        old = store.create_session(user="u")
        store.append_message(old.id, Message.user("before"))
        with store.transaction(buffered=True):
            fresh = [store.create_session(user="u", title=f"s{i}") for i in range(5)]
            for i, s in enumerate(fresh):
                for k in range(i + 1):
                    store.append_message(s.id, Message.user(f"{s.title}/{k}"))
            store.append_message(old.id, Message.user("after"))
            assert store.load_messages(fresh[0].id) == []  # held back until the end
        for i, s in enumerate(fresh):
            got = store.load_messages(s.id)
            assert [m.text for m in got] == [f"s{i}/{k}" for k in range(i + 1)]
            assert [m.position for m in got] == list(range(i + 1))
        assert [m.text for m in store.load_messages(old.id)] == ["before", "after"]

        def fails() -> None:
            with store.transaction(buffered=True):
                s = store.create_session(user="u", title="never")
                store.append_message(s.id, Message.user("never"))
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            fails()
        assert "never" not in [s.title for s in store.list_sessions(user="u")]
        store.append_message(old.id, Message.user("last"))  # outside: written at once again
        assert [m.position for m in store.load_messages(old.id)] == [0, 1, 2]


def test_the_burst_gate_waits_for_admissions_to_pause_and_no_longer_than_its_cap() -> None:
    """Behaviour, not timings: the gate lets a worker go once admissions paused (the burst is
    over), or at its cap while they go on; with none lately it does not hold anyone."""
    gate = BurstGate(quiet_s=0.3, max_s=30.0)  # a pause this long is not a loaded machine's hiccup
    stop = threading.Event()
    admitted: list[int] = []

    def admit(count: int | None) -> None:
        while not stop.is_set() and (count is None or len(admitted) < count):
            gate.admitted()
            admitted.append(1)
            time.sleep(0.002)

    gate.admitted()
    feeder = threading.Thread(target=admit, args=(50,))
    feeder.start()
    gate.wait()  # returns once the admissions paused: the whole burst was admitted
    assert len(admitted) == 50 and not feeder.is_alive() and not gate.watching
    admitted.clear()
    gate.max_s = 0.3
    feeder = threading.Thread(target=admit, args=(None,))
    feeder.start()
    while not admitted:
        time.sleep(0.001)
    gate.wait()  # a burst that does not pause: the cap lets the worker go meanwhile
    still_admitting = feeder.is_alive()
    stop.set()
    feeder.join()
    assert still_admitting and not gate.watching
    gate.quiet_s, gate.max_s = 0.0, 30.0
    gate.wait()  # nothing admitted within quiet_s: no wait (a 30 s wait would fail the suite's timeout)
    assert not gate.watching
