"""The store conformance suite: each test here runs on DuckDB and on PostgreSQL (the
``store`` and ``store_target`` fixtures), bar the few about the DuckDB file itself."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from tahrix_lab.agent import Message, Part, Session, StoreLockedError, TranscriptStore, Usage
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage import PostgresStore
from tahrix_lab.agent.storage.migrations import Migration, applied_migrations, apply_migrations
from tahrix_lab.agent.storage.schema import MIGRATIONS


def rich_conversation() -> list[Message]:
    """Every part type and every per-call field, to prove the round trip is lossless."""
    t0 = datetime(2026, 3, 12, 2, 14, tzinfo=UTC)
    return [
        Message.user("Trace 0xabc", Part.of_media("image", "/cases/shot.png", "image/png")),
        Message(
            role="assistant",
            created_at=t0 + timedelta(seconds=2),
            parts=[
                Part.of_reasoning("I should look it up.", signature="c2lnbmF0dXJl"),
                Part.of_reasoning(None, signature="cmVkYWN0ZWQ="),
                Part.of_text("Looking **now**.\n"),
                Part.of_tool_use(
                    "tu_1", "lookup_address", {"address": "0xabc", "nested": {"n": [1, 2.5, None]}}
                ),
                Part.of_tool_use("tu_2", "bad_args", None, raw='{"address": 0xabc'),
            ],
            backend="bedrock",
            model_id="us.anthropic.claude-sonnet-4-20250514-v1:0",
            stop_reason="tool_use",
            raw_stop_reason="tool_use",
            usage=Usage(1200, 80, 1000, 0, 12),
            tools_offered=["lookup_address", "bad_args"],
            latency_ms=812.5,
            ttft_ms=120.25,
        ),
        Message(
            role="tool",
            created_at=t0 + timedelta(seconds=3),
            parts=[
                Part.of_tool_result("tu_1", "lookup_address", {"items": [{"label": "ExchangeA"}]}),
                Part.of_tool_result(
                    "tu_2", "bad_args", {"error": {"type": "invalid_json", "message": "x"}}, "error"
                ),
            ],
        ),
        Message(
            role="assistant",
            created_at=t0 + timedelta(seconds=4),
            parts=[Part.of_text("It is ExchangeA — «ünïcode» ✓")],
            backend="openai",
            model_id="gpt-4o-mini",
            stop_reason="end_turn",
            raw_stop_reason="stop",
            usage=Usage(),  # a stream without usage: unknown, not zero
            tools_offered=[],
            latency_ms=10.0,
            ttft_ms=None,
        ),
        Message(role="user", parts=[Part.of_media("document", "s3://bucket/report.pdf", "application/pdf")]),
    ]


def test_migrates_a_blank_database_and_records_each_migration(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    TranscriptStore(path).close()
    conn = duckdb.connect(str(path))
    tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"sessions", "messages", "parts", "_migrations"} <= tables
    assert applied_migrations(conn, "transcript") == [m.name for m in MIGRATIONS]
    conn.close()
    # Opening again applies nothing new and keeps the data.
    store = TranscriptStore(path)
    assert apply_migrations(store.connection, "transcript", MIGRATIONS) == []


def test_a_new_migration_applies_once_on_an_old_database(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path / "t.duckdb")
    s = store.create_session(user="u")
    extra = (*MIGRATIONS, Migration("0002_probe", "CREATE TABLE probe (x INTEGER)"))
    assert apply_migrations(store.connection, "transcript", extra) == ["0002_probe"]
    assert apply_migrations(store.connection, "transcript", extra) == []
    assert store.get_session(s.id).user == "u"


def test_transcript_round_trips_losslessly(store_target: str) -> None:
    store = TranscriptStore(store_target)
    session = store.create_session(
        user="ana", purpose="investigation", system_prompt="Cite evidence.", title="T"
    )
    original = rich_conversation()
    for m in original:
        store.append_message(session.id, m)
    store.close()

    PostgresStore.close_pools()  # PostgreSQL: new connections too
    reopened = TranscriptStore(store_target)
    loaded = reopened.load_messages(session.id)
    assert [m.to_dict() for m in loaded] == [m.to_dict() for m in original]
    assert [m.position for m in loaded] == [0, 1, 2, 3, 4]
    assert loaded[1].parts[1].is_redacted_reasoning
    assert loaded[3].usage == Usage()  # unknown stays unknown
    assert reopened.get_session(session.id) == session


def test_list_sessions_filters_by_user_purpose_and_time(store: TranscriptStore) -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    for i, (user, purpose) in enumerate([("a", "chat"), ("a", "investigation"), ("b", "chat")]):
        store.create_session(session=Session(user=user, purpose=purpose, created_at=t + timedelta(days=i)))
    assert [s.user for s in store.list_sessions(user="a")] == ["a", "a"]
    assert [s.purpose for s in store.list_sessions(purpose="chat")] == ["chat", "chat"]
    assert len(store.list_sessions(since=t + timedelta(days=1))) == 2
    assert len(store.list_sessions(until=t + timedelta(days=1))) == 1
    newest = store.list_sessions(limit=1)[0]
    assert newest.user == "b"


def test_usage_rows_one_per_model_call(store: TranscriptStore) -> None:
    s = store.create_session(user="ana")
    for m in rich_conversation():
        store.append_message(s.id, m)
    rows = store.usage_rows(user="ana")
    assert [(r["model_id"], r["input_tokens"], r["cache_read_tokens"]) for r in rows] == [
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", 1200, 1000),
        ("gpt-4o-mini", None, None),
    ]
    assert store.usage_rows(user="nobody") == []
    assert len(store.usage_rows(since=datetime(2026, 3, 12, 2, 14, 3, tzinfo=UTC))) == 1


def test_unknown_session_is_a_clear_error(store: TranscriptStore) -> None:
    with pytest.raises(ConfigurationError, match="No session with id 'nope'"):
        store.get_session("nope")


def test_ten_threads_write_into_one_store_with_no_row_lost_or_misordered(store: TranscriptStore) -> None:
    sessions = [store.create_session(user=f"u{i}") for i in range(10)]
    # Two threads per session too: positions must stay dense and unique.
    shared = store.create_session(user="shared")
    errors: list[BaseException] = []

    def writer(session: Session, n: int) -> None:
        try:
            for i in range(n):
                store.append_message(session.id, Message.user(f"{session.user}:{i}"))
                store.append_message(shared.id, Message.user(f"shared:{session.user}:{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s, 30)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for s in sessions:
        texts = [m.text for m in store.load_messages(s.id)]
        assert texts == [f"{s.user}:{i}" for i in range(30)]
    shared_messages = store.load_messages(shared.id)
    assert [m.position for m in shared_messages] == list(range(300))
    for s in sessions:  # each writer's own order is kept inside the shared session
        mine = [m.text for m in shared_messages if m.text.startswith(f"shared:{s.user}:")]
        assert mine == [f"shared:{s.user}:{i}" for i in range(30)]


def test_a_file_held_by_another_process_gives_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that keeps the file (here a bare DuckDB connection) is waited for, then named.
    monkeypatch.setenv("TAHRIX_DB_WAIT", "1")
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,time; c=duckdb.connect({str(path)!r}); print('ok', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ok"
        with pytest.raises(StoreLockedError) as info:
            TranscriptStore(path)
        assert str(path) in str(info.value)
        assert "another process" in str(info.value)
        assert "Traceback" not in str(info.value)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    time.sleep(0.1)
    TranscriptStore(path).close()  # free again once the holder is gone


def test_update_and_delete_session(store: TranscriptStore) -> None:
    s = store.create_session()
    store.append_message(s.id, Message.user("hi"))
    store.update_session(s.id, status="closed", title="Done")
    assert (store.get_session(s.id).status, store.get_session(s.id).title) == ("closed", "Done")
    with pytest.raises(ConfigurationError):
        store.update_session(s.id, user="mallory")
    store.delete_session(s.id)
    assert store.load_messages(s.id) == []
    with pytest.raises(ConfigurationError):
        store.get_session(s.id)


def sql(target: str, store: TranscriptStore, query: str, params: list[object]) -> list[tuple[object, ...]]:
    """Run SQL as a user of the record would: DuckDB through the store, psycopg on the URL."""
    if store.engine == "duckdb":
        return store.cursor().execute(query, params).fetchall()
    import psycopg

    with psycopg.connect(target) as conn:
        return conn.execute(query.replace("?", "%s"), params).fetchall()


def test_parts_view_gives_sql_one_row_per_part(store_target: str, store: TranscriptStore) -> None:
    s = store.create_session()
    for m in rich_conversation():
        store.append_message(s.id, m)
    rows = sql(
        store_target,
        store,
        "SELECT message_position, position, type, tool_name, tool_input->>'address', tool_status "
        "FROM parts WHERE session_id = ? AND type IN ('tool_use', 'tool_result') ORDER BY 1, 2",
        [s.id],
    )
    assert rows == [
        (1, 3, "tool_use", "lookup_address", "0xabc", None),
        (1, 4, "tool_use", "bad_args", None, None),
        (2, 0, "tool_result", "lookup_address", None, "ok"),
        (2, 1, "tool_result", "bad_args", None, "error"),
    ]
    total = sql(store_target, store, "SELECT count(*) FROM parts WHERE session_id = ?", [s.id])
    assert total == [(sum(len(m.parts) for m in rich_conversation()),)]


def test_two_store_objects_on_one_database_keep_positions_dense(store_target: str) -> None:
    a = TranscriptStore(store_target)
    b = TranscriptStore(store_target)
    s = a.create_session()
    a.append_message(s.id, Message.user("1"))
    b.append_message(s.id, Message.user("2"))
    a.append_message(s.id, Message.user("3"))  # a's cached position is stale: it must recover
    assert [(m.position, m.text) for m in a.load_messages(s.id)] == [(0, "1"), (1, "2"), (2, "3")]
