"""Faults with real processes: a PostgreSQL server of its own, stopped with
``pg_ctl stop -m immediate`` or frozen with SIGSTOP while an answer streams, and a server
that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend, Message, ToolRegistry, TranscriptStore, ask
from tahrix_lab.agent.backends.fake import text
from tahrix_lab.agent.retry import STORE_ERROR_MESSAGE
from tahrix_lab.agent.storage import PostgresStore
from tests.agent.storage.pg_server import PASSWORD, PgServer, free_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def own_server() -> Iterator[PgServer]:
    """A server this module may stop and start without disturbing the others' tests."""
    server = PgServer()
    server.start()
    try:
        yield server
    finally:
        PostgresStore.close_pools()
        server.destroy()


def _ask(store: TranscriptStore, session_id: str, answer: Any) -> list[tuple[str, Any]]:
    return list(
        ask(
            store,
            session_id,
            "Trace 0xabc",
            backend=FakeBackend([answer]),
            model="fake-1",
            registry=ToolRegistry(),
        )
    )


def test_a_restart_mid_answer_stores_it_once_and_the_process_reconnects(own_server: PgServer) -> None:
    store = TranscriptStore(own_server.url(own_server.create_database()))
    session = store.create_session(user="ana")
    restart = threading.Thread(target=own_server.start)

    def answer(messages: Sequence[Message], tools: Sequence[Any]) -> Iterator[Any]:
        yield text("Half an answer, ")
        own_server.stop("immediate")  # the server dies while the model is still talking
        restart.start()  # and comes back while the loop goes on
        yield text("then the rest.")

    events = _ask(store, session.id, answer)
    restart.join()

    kinds = [kind for kind, _ in events]
    assert "error" not in kinds, events
    assert kinds[-1] == "done"
    assert "Traceback" not in repr(events)
    stored = store.load_messages(session.id)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "Trace 0xabc"),
        ("assistant", "Half an answer, then the rest."),
    ]
    assert [t["stop_reason"] for t in store.load_turn_ends(session.id)] == ["end_turn"]
    again = store.create_session(user="ana")  # the pool is whole again
    assert store.get_session(again.id).user == "ana"


def test_a_server_frozen_mid_answer_then_resumed_stores_it_once(own_server: PgServer) -> None:
    store = TranscriptStore(own_server.url(own_server.create_database()))
    session = store.create_session(user="ana")
    thaw = threading.Timer(2.0, own_server.thaw)

    def answer(messages: Sequence[Message], tools: Sequence[Any]) -> Iterator[Any]:
        yield text("Half an answer, ")
        own_server.freeze()  # SIGSTOP: the sockets stay open and nothing answers
        thaw.start()
        yield text("then the rest.")

    try:
        events = _ask(store, session.id, answer)
    finally:
        thaw.join()
    assert [kind for kind, _ in events][-1] == "done", events
    assert [(m.role, m.text) for m in store.load_messages(session.id)] == [
        ("user", "Trace 0xabc"),
        ("assistant", "Half an answer, then the rest."),
    ]


def test_a_server_that_stays_frozen_ends_the_run_calmly_and_nothing_hangs(
    own_server: PgServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Short deadlines, so the test waits seconds rather than the default minutes.
    monkeypatch.setenv("TAHRIX_PG_STATEMENT_TIMEOUT", "1")
    monkeypatch.setenv("TAHRIX_PG_RETRY", "1")
    monkeypatch.setenv("TAHRIX_DB_WAIT", "2")
    url = own_server.url(own_server.create_database())
    store = TranscriptStore(url)
    session = store.create_session(user="ana")

    def answer(messages: Sequence[Message], tools: Sequence[Any]) -> Iterator[Any]:
        yield text("Half an answer, ")
        own_server.freeze()  # and it never comes back while this run lasts
        yield text("then the rest.")

    done: list[list[tuple[str, Any]]] = []
    runner = threading.Thread(target=lambda: done.append(_ask(store, session.id, answer)), daemon=True)
    try:
        runner.start()
        runner.join(timeout=60)
        assert not runner.is_alive(), "the run hung on a frozen server"
    finally:
        own_server.thaw()
    events = done[0]
    kind, error = events[-1]
    assert kind == "error", events
    assert error["message"] == STORE_ERROR_MESSAGE and error["retryable"] is True
    assert "127.0.0.1" in caplog.text  # the operator's log names the server, never the password
    assert PASSWORD not in repr(events) + caplog.text
    # Thawed, the same store (and its pool) works again.
    again = store.create_session(user="ana")
    assert store.get_session(again.id).user == "ana"


def test_postgresql_down_at_start_is_one_calm_line_and_exit_1(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://ana:{PASSWORD}@127.0.0.1:{port}/record"
    log = tmp_path / "tahrix.log"
    env = {**os.environ, "TAHRIX_DB": url, "PYTHONPATH": str(ROOT), "TAHRIX_LOG": str(log)}
    run = subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", "sessions"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "Traceback" not in run.stderr
    assert PASSWORD not in run.stderr + run.stdout
    assert not log.exists() or PASSWORD not in log.read_text()
    assert [p.name for p in tmp_path.iterdir()] in ([], ["tahrix.log"])  # no directory "postgresql:"
