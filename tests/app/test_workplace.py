"""The service page's routes (app/workplace.py) on `tahrix serve`'s case integration, over real HTTP."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.app import workplace
from tahrix_lab.app.case_service import case_integration
from tahrix_lab.case.workspace import Workspace, sample_case_dir
from tahrix_lab.jobs.http.api import create_app
from tahrix_lab.jobs.server import Settings, build
from tests.jobs.conftest import AppServer, over_http
from tests.jobs.test_case_service import ask

API = "/api/v1/agent"
TOKENS = {"alice-token-123": "alice", "bob-token-4567": "bob"}
ALICE = {"Authorization": "Bearer alice-token-123"}
BOB = {"Authorization": "Bearer bob-token-4567"}
FABRICATED = "0x" + "9" * 63 + "1"  # not a transaction of the sample case


def real_hash() -> str:
    with (sample_case_dir() / "transactions.csv").open() as f:
        return next(r["tx_hash"] for r in csv.DictReader(f) if r["chain"] == "ethereum")


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[httpx.Client, Any]]:
    monkeypatch.delenv("TAHRIX_BACKEND", raising=False)
    script = tmp_path / "script.json"
    answer = f"The funds left in tx {real_hash()} and then in tx {FABRICATED}."
    script.write_text(json.dumps({"delay": 0.0, "turns": [[{"kind": "text", "text": answer}]]}))
    cfg = Settings(
        tokens=TOKENS, db=str(tmp_path / "t.duckdb"), backend="fake", fake_script=str(script), api_docs=True
    )
    built = build(cfg, case_integration, extend=workplace.mount)
    with over_http(built) as client:
        yield client, built


def test_cases_examples_and_panels_come_from_the_case(served: tuple[httpx.Client, Any]) -> None:
    client, built = served
    assert client.get(f"{API}/cases").status_code == 401
    cases = client.get(f"{API}/cases", headers=ALICE).json()["cases"]
    assert [c["case_id"] for c in cases] == ["CASE-001"]
    assert cases[0]["title"]

    case = client.get(f"{API}/cases/CASE-001", headers=ALICE).json()
    assert case["case"]["case_id"] == "CASE-001"
    assert len(case["examples"]) >= 5 and "CASE-001" in case["examples"][0]

    unknown = client.get(f"{API}/cases/NOPE", headers=ALICE)
    unknown_panel = client.get(f"{API}/cases/NOPE/graph", headers=ALICE)
    assert unknown.status_code == unknown_panel.status_code == 404
    assert (
        unknown.json()
        == unknown_panel.json()
        == {"detail": "There is no case with this id.", "field": "case_id"}
    )
    assert client.get(f"{API}/cases/CASE-001/other", headers=ALICE).status_code == 422

    ws = Workspace(built.transcripts.path, connection=built.transcripts.connection)
    flags = client.get(f"{API}/cases/CASE-001/flags", headers=ALICE).json()
    triage = ws.triage("CASE-001")
    assert [r["row_id"] for r in flags["rows"]] == [
        r["row_id"] for r in triage["rows"]
    ]  # the triage, not raw flags
    assert len(flags["raw"]) == sum(r["flag_count"] for r in flags["rows"]) + sum(
        len(rel.get("flags", [])) for r in flags["rows"] for rel in r.get("related", [])
    )
    graph = client.get(f"{API}/cases/CASE-001/graph", headers=ALICE).json()["graph"]
    expected = ws.flow_graph("CASE-001", max_hops=4, min_usd=1000)
    assert {n["id"] for n in graph["nodes"]} == {n["id"] for n in expected["nodes"]}
    assert len(graph["edges"]) == len(expected["edges"]) > 0

    # "Trace onward": from an address; from a bridge contract only along the flows into it
    start = next(n for n in graph["nodes"] if n.get("role") == "suspect")
    onward = client.post(f"{API}/cases/CASE-001/graph/onward", json={"node": start}, headers=ALICE)
    assert onward.status_code == 200, onward.text
    assert start["id"] in {n["id"] for n in onward.json()["graph"]["nodes"]}
    bridge = next(n for n in graph["nodes"] if n.get("bridge_contract") or n.get("category") == "bridge")
    alone = client.post(
        f"{API}/cases/CASE-001/graph/onward", json={"node": bridge, "edges_in": []}, headers=ALICE
    )
    assert alone.status_code == 422 and "No bridge deposit" in alone.json()["detail"]
    into = [e for e in graph["edges"] if e["target"] == bridge["id"]]
    crossed = client.post(
        f"{API}/cases/CASE-001/graph/onward", json={"node": bridge, "edges_in": into}, headers=ALICE
    )
    assert crossed.status_code == 200, crossed.text
    assert any(e.get("kind") == "bridge" for e in crossed.json()["graph"]["edges"])
    no_id = client.post(
        f"{API}/cases/CASE-001/graph/onward", json={"node": {"chain": "ethereum"}}, headers=ALICE
    )
    assert no_id.status_code == 422 and no_id.json()["field"] == "node"
    odd = {"node": bridge, "edges_in": [{"target": bridge["id"], "txs": [{"no": "hash"}]}]}
    garbled = client.post(f"{API}/cases/CASE-001/graph/onward", json=odd, headers=ALICE)
    assert garbled.status_code == 422 and garbled.json()["field"] == "node"
    nope = client.post(f"{API}/cases/NOPE/graph/onward", json={"node": start}, headers=ALICE)
    assert nope.status_code == 404 and nope.json() == unknown.json()


def test_a_case_job_carries_its_citations_and_lists_as_a_conversation(
    served: tuple[httpx.Client, Any],
) -> None:
    client, _built = served
    first: dict[str, Any] = {}
    ask(client, "alice-token-123", {"message": "Where did it go?", "case_id": "CASE-001"}, first)
    second: dict[str, Any] = {}
    ask(client, "alice-token-123", {"message": "A new one", "case_id": "CASE-001"}, second)

    types = [c["type"] for c in first["chunks"]]
    assert types[-2:] == ["citations", "done"]
    cited = first["chunks"][-2]
    assert cited["counts"]["verified"] == 1 and cited["counts"]["not_found"] == 1
    assert cited["line"] == "1 citation verified · 1 not found"
    missing = [c for c in cited["citations"] if c["status"] == "not_found"]
    assert [c["text"] for c in missing] == [FABRICATED]

    mine = client.get(f"{API}/conversations", headers=ALICE).json()["conversations"]
    assert [c["question"] for c in mine] == ["A new one", "Where did it go?"]  # newest first
    assert {c["case_id"] for c in mine} == {"CASE-001"}
    assert mine[1]["session_id"] == first["state"]["session_id"] and mine[0]["created_at"]
    assert client.get(f"{API}/conversations", headers=BOB).json()["conversations"] == []

    # read again, each stored turn gets the citations line its live run sent
    turns = client.get(f"{API}/conversations/{mine[1]['session_id']}/citations", headers=ALICE).json()[
        "turns"
    ]
    assert [t["line"] for t in turns] == [cited["line"]]
    assert turns[0]["citations"] == cited["citations"]
    other = client.get(f"{API}/conversations/{mine[1]['session_id']}/citations", headers=BOB)
    assert other.status_code == 404

    refused: dict[str, Any] = {}  # a case nobody may open: the job is refused at its start
    ask(client, "bob-token-4567", {"message": "hi", "case_id": "NOPE"}, refused)
    assert (refused["chunks"][-1]["kind"], refused["chunks"][-1]["field"]) == ("refused", "case_id")


def test_the_page_routes_answer_any_input_without_a_server_error(served: tuple[httpx.Client, Any]) -> None:
    """Schema fuzzing of the workplace routes on the case integration: never a 5xx."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error

    client, _built = served
    schema = schemathesis.openapi.from_url(f"{client.base_url}/openapi.json")
    failures: list[str] = []
    ours = ("/cases", "/conversations")
    tested = []
    for op in schema.get_all_operations():
        operation = op.ok()  # type: ignore[union-attr]  # (an invalid schema raises here)
        if not operation.path.startswith(tuple(API + p for p in ours)):
            continue
        tested.append(f"{operation.method.upper()} {operation.path}")

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            case.headers = {**(case.headers or {}), **ALICE}
            response = case.call(base_url=str(client.base_url), timeout=30)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.path} -> {response.status_code}: {response.text[:200]}")
            case.validate_response(response, checks=(not_a_server_error,))

        check()
    # cases, a case, its flags or graph, onward, a flag's decision and its undo, conversations,
    # citations, decisions
    assert len(tested) == 9, tested
    assert failures == []


def test_a_plain_chat_service_serves_the_page_and_says_it_has_no_cases(tmp_path: Path) -> None:
    cfg = Settings(tokens=TOKENS, db=str(tmp_path / "t.duckdb"), backend="fake", fake_script="echo")
    built = build(cfg, extend=workplace.mount)  # no integration factory: plain chat sessions
    assert built.service is not None
    try:
        with (
            AppServer(create_app(built.service)) as srv,
            httpx.Client(base_url=srv.url, timeout=60) as client,
        ):
            page = client.get("/")
            assert page.status_code == 200
            assert "/static/flow.js" in page.text and "/static/poll.js" in page.text
            js = client.get("/static/poll.js")
            assert js.status_code == 200 and "javascript" in js.headers["content-type"]
            assert "createPollingChat" in js.text

            assert client.get(f"{API}/me", headers=BOB).json() == {"user": "bob"}
            assert client.get(f"{API}/cases", headers=ALICE).json() == {
                "cases": [],
                "note": "This service runs plain chat sessions: it has no cases.",
            }
            unknown = {"detail": "There is no case with this id.", "field": "case_id"}
            for part in ("", "/flags", "/graph"):
                answer = client.get(f"{API}/cases/CASE-001{part}", headers=ALICE)
                assert (answer.status_code, answer.json()) == (404, unknown)
            onward = client.post(
                f"{API}/cases/CASE-001/graph/onward", json={"node": {"id": "x"}}, headers=ALICE
            )
            assert (onward.status_code, onward.json()) == (404, unknown)

            asked: dict[str, Any] = {}
            ask(client, "alice-token-123", {"message": "Hello"}, asked)
            session_id = asked["state"]["session_id"]
            listed = client.get(f"{API}/conversations", headers=ALICE).json()["conversations"]
            assert [(c["session_id"], c["question"], c["case_id"]) for c in listed] == [
                (session_id, "Hello", None)
            ]
            history = client.get(f"{API}/sessions/{session_id}", headers=ALICE).json()
            assert history["job"] is None and history["chunks"][0]["type"] == "user"
            assert client.get(f"{API}/conversations/{session_id}/citations", headers=ALICE).json() == {
                "turns": []
            }
            assert client.get(f"{API}/sessions/{session_id}", headers=BOB).status_code == 404
            assert client.get(f"{API}/conversations/{session_id}/citations", headers=BOB).status_code == 404
    finally:
        built.close()
