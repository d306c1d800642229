"""TranscriptStore.group_writes: many threads' messages and turn ends share transactions."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tahrix_lab.agent import Message, TranscriptStore
from tahrix_lab.agent.transcript import Part


def answer(text: str) -> Message:
    return Message(role="assistant", parts=[Part.of_text(text)], stop_reason="end_turn")


def test_threads_writing_at_once_share_transactions_and_lose_nothing(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path / "t.duckdb")
    store.group_writes(max_batch=8)
    heard: list[tuple[str, int | None]] = []
    store.add_listener(lambda sid, m: heard.append((sid, m.position)))
    sessions = [store.create_session(user=f"u{i}") for i in range(24)]
    gate = threading.Barrier(len(sessions))

    def end(i: int) -> None:
        sid = sessions[i].id
        gate.wait()
        for k in range(3):
            store.append_message(sid, Message.user(f"q{k}"))
            store.append_message(sid, answer(f"a{i}.{k}"))
            store.append_turn_end(sid, stop_reason="end_turn")

    threads = [threading.Thread(target=end, args=(i,)) for i in range(len(sessions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store._grouped is not None and store._grouped.groups < 24 * 9  # they did share
    for i, s in enumerate(sessions):
        msgs = store.load_messages(s.id)
        assert [m.position for m in msgs] == list(range(6))
        assert [m.parts[0].text for m in msgs if m.role == "assistant"] == [f"a{i}.{k}" for k in range(3)]
        assert [e["position"] for e in store.load_turn_ends(s.id)] == [1, 3, 5]  # after each answer
    assert sorted(heard) == sorted((s.id, p) for s in sessions for p in range(6))  # once each
    store.close()


def test_a_write_that_fails_its_group_runs_again_alone(tmp_path: Path) -> None:
    """Another store object on the file wrote to a session behind this one's back: the group's
    multi-row insert conflicts, every write of the group runs again alone, and the one that
    conflicted re-reads its position. Its neighbour still commits."""
    path = tmp_path / "t.duckdb"
    store = TranscriptStore(path)
    store.group_writes()
    assert store._grouped is not None
    s1, s2 = store.create_session(user="a"), store.create_session(user="b")
    store.append_message(s1.id, Message.user("first"))  # this store now believes s1 is at 1
    TranscriptStore(path).append_message(s1.id, Message.user("behind your back"))
    writes = [(s2.id, "lead"), (s2.id, "two"), (s1.id, "one")]
    threads = [threading.Thread(target=store.append_message, args=(sid, answer(t))) for sid, t in writes]
    with store.connection.write_lock:  # the first leads a group of one and waits here
        threads[0].start()
        while not store._grouped._leading:
            time.sleep(0.001)
        for t in threads[1:]:
            t.start()
        while len(store._grouped._queue) < 2:  # the other two queue: the next group
            time.sleep(0.001)
    for t in threads:
        t.join()
    assert store._grouped.groups == 3  # 'first', 'lead', then 'two' and 'one' together
    assert [m.parts[0].text for m in store.load_messages(s1.id)] == ["first", "behind your back", "one"]
    assert [m.parts[0].text for m in store.load_messages(s2.id)] == ["lead", "two"]
    store.close()
