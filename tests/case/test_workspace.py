from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from tahrix_lab.agent import REGISTRY, UserFacingError
from tahrix_lab.agent.tools import ContextProvider
from tahrix_lab.app.case_service import CaseIntegration
from tahrix_lab.case.workspace import Workspace


def test_one_file_for_transcript_and_case(tmp_path: Path) -> None:
    path = tmp_path / "one.duckdb"
    with Workspace(path) as ws:
        assert ws.store.connection is ws.cases.connection
        ws.load_sample_case()
        ws.load_sample_case()  # idempotent
        s = ws.start_investigation(
            "CASE-001", user="ana", grant={"tools": ["list_flags"], "may_write": False}, title="t"
        )
        assert s.purpose == "investigation" and "cite" in (s.system_prompt or "").lower()
        n_flags = len(ws.flags("CASE-001"))
    con = duckdb.connect(str(path), read_only=True)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {
        "sessions",
        "messages",
        "parts",
        "transfers",
        "case_sessions",
        "audit_log",
        "_migrations",
    } <= tables
    # the session's case link is in the record (the store's session_cases), on either engine
    assert con.execute("SELECT count(*) FROM session_cases WHERE session_id = ?", [s.id]).fetchone() == (1,)
    assert con.execute("SELECT count(*) FROM anomaly_flags").fetchone() == (n_flags,)
    con.close()
    with Workspace(path) as ws:  # reopening migrates nothing twice and keeps the grant
        assert ws.grant(s.id).tools == ("list_flags",)
        assert ws.case_of(s.id) == "CASE-001"


def test_default_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAHRIX_DB", str(tmp_path / "env.duckdb"))
    with Workspace() as ws:
        assert ws.path == str(tmp_path / "env.duckdb")
    assert (tmp_path / "env.duckdb").exists()


def test_panel_data(loaded: Workspace, ground_truth: dict[str, Any]) -> None:
    graph = loaded.trace("CASE-001", max_hops=3)
    assert set(graph) >= {"nodes", "edges", "endpoints", "frontier", "params"}
    assert (
        graph["start"] == sorted([ground_truth["actors"]["A0"], ground_truth["actors"]["I1"]])
        or graph["start"]
    )
    from_addr = loaded.trace(ground_truth["actors"]["I1"], max_hops=2)
    assert "exchange" in from_addr["endpoints"]
    flags = loaded.flags("CASE-001", min_severity="critical")
    assert flags and {f["severity"] for f in flags} == {"critical"}
    with pytest.raises(UserFacingError):
        loaded.trace("0xnot-anywhere")


def test_unknown_case_and_grants(loaded: Workspace) -> None:
    with pytest.raises(UserFacingError, match="No case named"):
        loaded.start_investigation("CASE-404", user="ana")
    with pytest.raises(UserFacingError):
        loaded.set_grant("no-such-session", {"may_write": True})
    assert "trace_funds" in REGISTRY and REGISTRY.get("trace_funds").purposes == frozenset({"investigation"})  # type: ignore[union-attr]


def test_case_integration_protocol(loaded: Workspace) -> None:
    integ = CaseIntegration(loaded)
    assert integ.purpose == "investigation"
    s = integ.start_session(loaded.store, user="web", case_id="CASE-001")
    assert loaded.case_of(s.id) == "CASE-001" and loaded.grant(s.id).may_write is False
    assert isinstance(integ.context_for(loaded.store, s), ContextProvider)
    assert integ.registry().get("run_sql") is not None
    with pytest.raises(UserFacingError, match="No case named 'nope'"):
        integ.start_session(loaded.store, user="web", case_id="nope")
    default = integ.start_session(loaded.store, user="web", case_id=None)
    assert loaded.case_of(default.id) == "CASE-001"


def test_trace_graph_ids_are_consistent(loaded: Workspace, ground_truth: dict[str, Any]) -> None:
    hop = next(p for p in ground_truth["paths"] if p["name"] == "chain_hop_leg")
    g = loaded.trace(hop["start"]["address"], max_hops=10)
    ids = {n["id"] for n in g["nodes"]}
    for e in g["edges"]:
        assert e["target"] in ids and e["source"] in ids
    assert any(
        e["kind"] == "bridge" and e["source"].split(":")[0] != e["target"].split(":")[0] for e in g["edges"]
    )
