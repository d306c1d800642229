"""Moving a workspace between engines, and the record's surfaces on PostgreSQL.

A DuckDB workspace with sessions on a case is exported, imported into a real PostgreSQL
server and exported back into a fresh DuckDB file: costs by case, user, team and model are
equal on every side, and the exported bytes (every message and part) are identical. The
CLI (``tahrix sessions/show/costs/import/export``) is run as a subprocess with
``TAHRIX_DB=postgresql://…``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tahrix_lab.agent import Message, Part, TranscriptStore, Usage
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.lab.costs import costs
from tahrix_lab.lab.diff import diff
from tahrix_lab.lab.replay import replay
from tahrix_lab.lab.transfer import export_sessions, import_sessions
from tests.agent.storage.pg_server import PASSWORD

T0 = datetime(2026, 4, 2, 9, 30, tzinfo=UTC)
BY = "case,user,team,model,day"


def answer(at: datetime, model: str, backend: str, usage: Usage) -> Message:
    return Message(
        role="assistant", created_at=at, backend=backend, model_id=model, stop_reason="end_turn", usage=usage,
        parts=[Part.of_reasoning("Looking…", signature="c2ln"), Part.of_text("Ünïcode ✓ «quoted»\n"),
               Part.of_tool_use("tu_1", "list_flags", {"case_id": "CASE-001", "n": [1, 2.5, None]})],
    )  # fmt: skip


def duck_workspace(path: Path) -> list[str]:
    """Sessions of two analysts on two teams, two on the sample case, on three models."""
    ids = []
    with Workspace(path) as ws:
        case_id = ws.load_sample_case()
        for i, (user, team) in enumerate([("ana", "red"), ("bob", "blue"), ("cy", None)]):
            # each analyst's $TAHRIX_TEAM names the team of the sessions they start
            os.environ.pop("TAHRIX_TEAM", None)
            if team:
                os.environ["TAHRIX_TEAM"] = team
            if i < 2:
                s = ws.start_investigation(case_id, user=user, grant={"may_write": i == 0})
                ws.store.update_session(s.id, title=f"t{i}")
            else:
                s = ws.store.create_session(user=user)
            ids.append(s.id)
            ws.store.append_message(s.id, Message.user(f"question {i} — ∑"))
            ws.store.append_message(
                s.id, answer(T0 + timedelta(days=i), "gpt-4o", "openai", Usage(12_000, 800, 8_000, 0))
            )
            ws.store.append_message(
                s.id,
                answer(T0 + timedelta(hours=i), "claude-sonnet-4-5", "openai", Usage(250_000, 1_000, 0, 0)),
            )
            ws.store.append_message(s.id, answer(T0, "my-own-model", "openai", Usage(10, 1)))
            ws.store.append_turn_end(s.id, stop_reason="end_turn")
    os.environ.pop("TAHRIX_TEAM", None)
    return ids


def frame(store: TranscriptStore) -> pd.DataFrame:
    return costs(store, by=BY).fillna({"case": "-", "team": "-"})


def exported(store: TranscriptStore) -> str:
    out = io.StringIO()
    export_sessions(store, out)
    return out.getvalue()


def test_a_duckdb_workspace_moves_to_postgresql_and_back_losing_nothing(tmp_path: Path, pg_url: str) -> None:
    ids = duck_workspace(tmp_path / "ws.duckdb")
    duck = TranscriptStore(tmp_path / "ws.duckdb")
    text = exported(duck)
    pg = TranscriptStore(pg_url)
    report = import_sessions(pg, io.StringIO(text))
    assert sorted(report.imported) == sorted(ids)
    assert report.case_rows == 4  # the two links (with their grants) and the case's two manifest steps
    back = TranscriptStore(tmp_path / "back.duckdb")
    import_sessions(back, io.StringIO(exported(pg)))

    # byte-identical: every session, message and part, and the case links
    assert exported(pg) == text
    assert exported(back) == text
    for sid in ids:
        assert [m.to_dict() for m in pg.load_messages(sid)] == [m.to_dict() for m in duck.load_messages(sid)]
        assert pg.load_turn_ends(sid) == duck.load_turn_ends(sid)
    assert pg.case_link(ids[0]) == duck.case_link(ids[0])
    assert pg.case_link(ids[1])["grant"] == {**duck.case_link(ids[1])["grant"]}  # type: ignore[index]

    # costs by case, user, team, model and day: equal on the three sides
    want = frame(duck)
    assert set(want["case"]) == {"CASE-001", "-"} and set(want["team"]) == {"red", "blue", "-"}
    assert want["cost_usd"].notna().any() and want["unknown_cost_calls"].sum() == 3  # my-own-model
    pd.testing.assert_frame_equal(frame(pg), want)
    pd.testing.assert_frame_equal(frame(back), want)
    for by in ("case", "user", "model"):
        pd.testing.assert_frame_equal(costs(pg, by=by), costs(duck, by=by))
    duck.close()
    back.close()


def test_replay_and_diff_on_postgresql_keep_the_case_link(pg_url: str) -> None:
    from tahrix_lab.agent import FakeBackend
    from tahrix_lab.agent.backends.fake import text

    store = TranscriptStore(pg_url)
    s = store.create_session(user="ana", team="red")
    store.link_case(s.id, "CASE-7", {"may_write": False}, "ana")
    store.append_message(s.id, Message.user("hello"))
    store.append_message(s.id, answer(T0, "gpt-4o", "openai", Usage(100, 10)))
    result = replay(
        s.id, backend=FakeBackend([[text("hi again")]]), model="fake-1", tools="recorded", store=store
    )
    assert result.ok
    link = store.case_link(result.session_id)
    assert link is not None and (link["case_id"], link["grant"]) == ("CASE-7", {"may_write": False})
    d = diff(s.id, result.session_id, store=store)
    assert len(d.turns) == 1


def run_cli(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", *args], env=env, input=stdin, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_cli_on_postgresql_through_a_subprocess(tmp_path: Path, pg_url: str) -> None:
    ids = duck_workspace(tmp_path / "ws.duckdb")
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "NO_COLOR": "1", "COLUMNS": "200"}
    duck_env = {**base, "TAHRIX_DB": str(tmp_path / "ws.duckdb")}
    pg_env = {**base, "TAHRIX_DB": pg_url}
    dump = tmp_path / "ws.jsonl"
    out = run_cli(duck_env, "export", "-o", str(dump))
    assert out.returncode == 0, out.stderr
    out = run_cli(pg_env, "import", str(dump))
    assert out.returncode == 0, out.stderr
    assert "Imported 3 sessions" in out.stdout and PASSWORD not in out.stdout + out.stderr

    listed = run_cli(pg_env, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(ids) and all(r["calls"] == 3 for r in rows)

    shown = run_cli(pg_env, "show", ids[0][:8])
    assert shown.returncode == 0, shown.stderr
    assert "question 0" in shown.stdout and "list_flags" in shown.stdout

    team = [
        json.loads(line)
        for line in run_cli(pg_env, "costs", "--by", "team,user", "--json").stdout.splitlines()
    ]
    duck_team = [
        json.loads(line)
        for line in run_cli(duck_env, "costs", "--by", "team,user", "--json").stdout.splitlines()
    ]
    assert team == duck_team and {r["team"] for r in team} == {"red", "blue", None}
    by_case = run_cli(pg_env, "costs", "--by", "case", "--case", "CASE-001", "--json")
    assert [json.loads(line)["calls"] for line in by_case.stdout.splitlines()] == [6]

    again = run_cli(pg_env, "export")
    assert again.returncode == 0 and again.stdout == dump.read_text(encoding="utf-8")


@pytest.mark.parametrize("engine", ["duckdb", "postgresql"])
def test_tahrix_team_names_the_team_of_new_sessions(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = str(tmp_path / "t.duckdb") if engine == "duckdb" else request.getfixturevalue("pg_url")
    monkeypatch.setenv("TAHRIX_TEAM", "red")
    store = TranscriptStore(target)
    s = store.create_session(user="ana")
    store.append_message(s.id, answer(T0, "gpt-4o", "openai", Usage(100, 10)))
    assert costs(store, by="team")["team"].tolist() == ["red"]


def test_a_workspace_on_a_postgresql_url_keeps_links_and_mcp_sessions_in_the_record(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Workspace(url)``: the evidence in $TAHRIX_EVIDENCE_DB, sessions, links and grants (and
    MCP's recorded tool calls) in PostgreSQL, seen by a second workspace on another file."""
    from tahrix_lab.case.workspace import evidence_path
    from tahrix_lab.mcp.server import CaseMcpServer

    monkeypatch.setenv("TAHRIX_EVIDENCE_DB", str(tmp_path / "host-a.duckdb"))
    assert evidence_path() == str(tmp_path / "host-a.duckdb")
    with Workspace(pg_url) as ws:
        assert ws.store.engine == "postgresql" and ws.path == str(tmp_path / "host-a.duckdb")
        case_id = ws.load_sample_case()
        s = ws.start_investigation(case_id, user="ana", grant={"may_write": False})
        server = CaseMcpServer(ws, case_id, user="bob")
        outcome = server.call(Part.of_tool_use("tu_1", "list_flags", {"case_id": case_id}), user="bob")
        assert outcome.status == "ok"
    monkeypatch.setenv("TAHRIX_EVIDENCE_DB", str(tmp_path / "host-b.duckdb"))
    record = TranscriptStore(pg_url)
    assert record.case_link(s.id)["case_id"] == case_id  # type: ignore[index]
    [mcp] = [x for x in record.list_sessions() if x.purpose == "mcp"]
    assert [m.role for m in record.load_messages(mcp.id)] == ["assistant", "tool"]
    assert record.case_link(mcp.id)["created_by"] == "bob"  # type: ignore[index]
    with Workspace(pg_url) as other:  # another host's evidence file, the same record
        assert other.case_of(s.id) == case_id and other.grant(s.id).may_write is False


def test_the_widgets_history_on_postgresql(pg_url: str) -> None:
    """A conversation asked in the widget on the team's record comes back as the same chunks."""
    from test_widget import make, scripted

    from tahrix_lab.agent import FakeBackend, ToolRegistry
    from tahrix_lab.agent.backends.fake import text
    from tahrix_lab.lab.widget import ChatWidget

    store = TranscriptStore(pg_url)
    tools = ToolRegistry()

    @tools.register(parameters={"type": "object", "properties": {"address": {"type": "string"}}})
    def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Look an address up."""
        return {"label": "exchange"}

    first = make(store, tools, backend=scripted())
    assert first.ask("What is 0xabc?", timeout=30) == "It is an exchange."
    again = ChatWidget.from_session(
        first.session_id,
        store=store,
        backend=FakeBackend([[text("Still.")]]),
        model="fake-model",
        registry=tools,
    )
    assert again.chunks == first.chunks
