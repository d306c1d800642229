"""Conformance: session-case links, teams and the grouped usage sums, on both engines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from tahrix_lab.agent import Message, Part, Session, TranscriptStore, Usage
from tahrix_lab.agent.storage.usage_sql import DIMENSIONS, as_dicts

T0 = datetime(2026, 3, 1, 10, tzinfo=UTC)


def call(at: datetime, model: str, tokens: tuple[int | None, ...], backend: str = "openai") -> Message:
    return Message(
        role="assistant", parts=[Part.of_text("ok")], created_at=at, backend=backend, model_id=model,
        usage=Usage(*tokens),
    )  # fmt: skip


def fill(store: TranscriptStore) -> dict[str, str]:
    """Two users on two teams, one session on a case, calls on two days and two models."""
    ana = store.create_session(user="ana", team="red")
    bob = store.create_session(user="bob", team="blue")
    bob2 = store.create_session(user="bob", session=Session(user="bob", team=None))
    store.link_case(ana.id, "CASE-1", {"may_write": True}, "ana")
    store.append_message(ana.id, Message.user("hi"))
    store.append_message(ana.id, call(T0, "gpt-4o", (1000, 100, 200, None)))
    store.append_message(ana.id, call(T0 + timedelta(days=1), "gpt-4o", (300_000, 10, None, None)))
    store.append_message(bob.id, call(T0, "gpt-4o-mini", (50, 5)))
    store.append_message(bob2.id, call(T0, "gpt-4o-mini", (None, None)))  # usage not reported
    return {"ana": ana.id, "bob": bob.id, "bob2": bob2.id}


def test_case_links_round_trip(store: TranscriptStore) -> None:
    ids = fill(store)
    link = store.case_link(ids["ana"])
    assert link is not None
    assert (link["case_id"], link["grant"], link["created_by"]) == ("CASE-1", {"may_write": True}, "ana")
    assert store.case_link(ids["bob"]) is None
    store.set_case_grant(ids["ana"], {"may_write": False})
    again = store.case_link(ids["ana"])
    assert again is not None and again["grant"] == {"may_write": False} and again["updated_at"] is not None
    assert [x["session_id"] for x in store.case_links(case_id="CASE-1")] == [ids["ana"]]
    with pytest.raises(Exception):  # noqa: B017 - one link per session, on either engine
        store.link_case(ids["ana"], "CASE-2", {}, "ana")
    store.delete_session(ids["ana"])
    assert store.case_links() == []


def test_team_is_kept_and_defaults_to_the_environment(
    store: TranscriptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAHRIX_TEAM", "green")
    made = store.create_session(user="cy")
    assert store.get_session(made.id).team == "green"
    assert store.get_session(store.create_session(user="cy", team="red").id).team == "red"
    monkeypatch.delenv("TAHRIX_TEAM")
    assert store.get_session(store.create_session(user="dee").id).team is None
    assert store.users() == ["cy", "dee"]


def test_usage_sums_group_in_the_engine(store: TranscriptStore) -> None:
    ids = fill(store)
    rows = as_dicts(*store.usage_sums(["user", "team", "case", "day"], tiers=[200_000]))
    day0 = int(T0.timestamp()) // 86400
    got = sorted(
        [(r["user"], r["team"], r["case"], r["day"] - day0, r["model"], r["_tier"], r["calls"], r["input_tokens"],
         r["_reported"])
        for r in rows],
        key=repr,
    )  # fmt: skip
    assert got == sorted([
        ("ana", "red", "CASE-1", 0, "gpt-4o", 0, 1, 1000, 1),
        ("ana", "red", "CASE-1", 1, "gpt-4o", 1, 1, 300_000, 1),
        ("bob", None, None, 0, "gpt-4o-mini", 0, 1, None, 0),
        ("bob", "blue", None, 0, "gpt-4o-mini", 0, 1, 50, 1),
    ], key=repr)  # fmt: skip
    # no time key: the price period is a key of its own
    change = T0 + timedelta(hours=12)
    by_period = as_dicts(*store.usage_sums(["case"], changes=[change], case="CASE-1"))
    assert sorted((r["_period"], r["calls"]) for r in by_period) == [(0, 1), (1, 1)]
    assert {r["user"] for r in store.usage_rows(session_ids=[ids["bob"], ids["bob2"]])} == {"bob"}
    assert store.usage_rows(session_ids=[ids["ana"]])[0]["case_id"] == "CASE-1"
    assert set(DIMENSIONS) >= {"user", "team", "case", "model", "day"}
    assert store.existing_session_ids([ids["ana"], "nope"]) == {ids["ana"]}
    assert sorted(store.models_used()) == [("gpt-4o", "openai"), ("gpt-4o-mini", "openai")]


def test_links_survive_import(store: TranscriptStore) -> None:
    s = Session(user="ana", team="red")
    link = {"session_id": s.id, "case_id": "CASE-9", "grant": {"may_write": True}, "created_by": "ana",
            "created_at": T0, "updated_at": None}  # fmt: skip
    store.import_sessions([(s, [Message.user("hi")])], links=[link])
    got = store.case_link(s.id)
    assert got is not None and got["case_id"] == "CASE-9" and got["created_at"] == T0
    assert store.get_session(s.id).team == "red"


def test_duckdb_workspace_links_are_migrated(tmp_path: Path) -> None:
    """A workspace made before the links moved: its case_sessions rows are kept."""
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        'CREATE TABLE case_sessions (case_id VARCHAR NOT NULL, session_id VARCHAR PRIMARY KEY, "grant" JSON NOT NULL, '
        "created_by VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp, updated_at TIMESTAMP)"
    )
    con.execute(
        "INSERT INTO case_sessions VALUES ('C-1', 's-1', '{\"may_write\": false}', 'ana', "
        "TIMESTAMP '2026-01-02 03:04:05', NULL)"
    )
    con.close()
    store = TranscriptStore(str(path))
    try:
        link = store.case_link("s-1")
        assert link is not None
        assert link["case_id"] == "C-1" and link["grant"] == {"may_write": False}
        assert link["created_at"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    finally:
        store.close()


def test_the_rollup_and_the_calls_give_the_same_costs(store: TranscriptStore) -> None:
    """PostgreSQL answers from its usage_daily rollup when it can (a since on a midnight) and
    from the calls otherwise (a since off midnight): the same figures, deletes included."""
    from tahrix_lab.lab.costs import costs

    ids = fill(store)
    doomed = store.create_session(user="dee")
    store.append_message(doomed.id, call(T0, "gpt-4o", (5, 5)))
    store.delete_session(doomed.id)
    store.append_message(
        ids["bob"], call(T0 + timedelta(days=1), "claude-sonnet-4-5", (250_000, 10, 1000, 0))
    )
    for by in ("user,model,day", "team,case", "model,week"):
        on_midnight = costs(store, by=by, since=datetime(2026, 1, 1, tzinfo=UTC))
        off_midnight = costs(store, by=by, since=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))
        assert "dee" not in set(on_midnight.get("user", []))
        assert on_midnight.equals(off_midnight), by
