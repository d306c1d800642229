"""Results the model reads whole: every answer within its budget, summary first, the rest paged by cursor."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tahrix_lab.agent.tools import model_facing, run_tool
from tahrix_lab.agent.transcript import Part, Session
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.tools.budget import DEFAULT_BUDGET, fit
from tahrix_lab.case.workspace import Workspace


def call(ws: Workspace, session: Session, name: str, args: dict[str, Any]) -> Any:
    return run_tool(
        Part.of_tool_use("tu", name, args), ws.context_provider(), registry=CASE_TOOLS, session=session
    )


def nbytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


@pytest.fixture
def session(loaded: Workspace) -> Session:
    return loaded.start_investigation("CASE-001", user="ana", grant={"may_write": False})


def test_every_read_tool_fits_its_budget(
    loaded: Workspace, session: Session, ground_truth: dict[str, Any]
) -> None:
    a = ground_truth["actors"]
    calls = {
        "get_case_overview": {}, "lookup_address": {"address": a["A0"], "counterparties": 50},
        "get_transaction": {"tx_hash": ground_truth["theft_tx_hashes"][0]},
        "list_transfers": {"limit": 500}, "trace_funds": {"max_hops": 25}, "find_bridge_events": {"limit": 500},
        "list_flags": {"limit": 200}, "screen_exposure": {"addresses": [{"address": a["A0"]}], "max_hops": 2},
        "run_sql": {"query": "SELECT * FROM transfers", "limit": 1000},
    }  # fmt: skip
    for name, args in calls.items():
        out = call(loaded, session, name, args)
        assert out.status == "ok", (name, out.result)
        assert nbytes(out.result) <= DEFAULT_BUDGET + 1500, (name, nbytes(out.result))
        assert model_facing(out.result) is out.result  # the 32 KB backstop never cuts
    big = call(loaded, session, "list_transfers", {"limit": 500, "budget_bytes": 20_000}).result
    assert DEFAULT_BUDGET < nbytes(big) <= 21_500


def test_a_long_trace_leads_with_its_endpoints_and_pages_the_rest(
    loaded: Workspace, session: Session
) -> None:
    args = {"max_hops": 25, "min_usd": 0}
    first = call(loaded, session, "trace_funds", args).result
    whole = loaded.trace("CASE-001", max_hops=25, min_usd=0)
    assert nbytes(whole) > 2 * DEFAULT_BUDGET  # far more than one answer holds
    s = first["summary"]
    assert list(first)[:5] == ["headline", "case_id", "start", "summary", "params"]
    assert s["start"]["kind"] == "roles" and s["start"]["roles"] == ["perpetrator", "suspect"]
    top = max((e for eps in whole["endpoints"].values() for e in eps), key=lambda e: e["tainted_usd"])
    assert s["top_endpoints"][0]["address"] == top["address"] and s["top_endpoints"][0]["tx_hashes"]
    seen: dict[str, list[Any]] = {"endpoints": [], "frontier": [], "edges": [], "nodes": []}
    page, pages = first, 1
    while True:
        for k in seen:
            seen[k] += page[k]
        cursor = (page.get("page") or {}).get("next_cursor")
        if not cursor:
            break
        page = call(loaded, session, "trace_funds", {**args, "cursor": cursor}).result
        pages += 1
        assert nbytes(page) <= DEFAULT_BUDGET + 1500
    assert pages > 1
    ids = [(e["source"], e["target"], e.get("bridge_event_id")) for e in seen["edges"]]
    assert len(ids) == len(set(ids)) == len(whole["edges"])  # every edge once, none lost
    assert len(seen["nodes"]) == len(whole["nodes"]) and len(seen["endpoints"]) == sum(
        map(len, whole["endpoints"].values())
    )
    other = call(loaded, session, "trace_funds", {"max_hops": 3, "cursor": first["page"]["next_cursor"]})
    assert other.status == "error" and "other arguments" in json.dumps(other.result)


def test_fit_keeps_the_summary_and_never_splits_an_item() -> None:
    result = {"summary": {"n": 3}, "rows": [{"i": i, "pad": "x" * 300} for i in range(100)]}
    out = fit(result, ("rows",), budget=3000, fp="f")
    assert out["summary"] == {"n": 3} and 0 < len(out["rows"]) < 100
    assert out["rows"] == result["rows"][: len(out["rows"])] and nbytes(out) <= 3000
    assert out["page"]["shown"]["rows"] == {"from": 0, "to": len(out["rows"]), "of": 100}
    small = fit({"rows": [1, 2]}, ("rows",), budget=3000, fp="f")
    assert small == {"rows": [1, 2]}  # nothing to page, nothing added


def test_triage_is_the_default_flag_list(
    loaded: Workspace, session: Session, ground_truth: dict[str, Any]
) -> None:
    out = call(loaded, session, "list_flags", {"min_severity": "high"}).result
    assert out["view"] == "triage" and out["count"] == out["rows_matching"] <= 30
    assert out["flags_total"] > 600  # the pile it replaces
    sev = [r["severity"] for r in out["rows"]]
    assert sev == sorted(sev, key=["high", "critical"].index, reverse=True)
    perp = ground_truth["actors"]["A0"]
    assert any(r["role"] == "perpetrator" and f"ethereum:{perp}" in r["addresses"] for r in out["rows"])
    raw = call(loaded, session, "list_flags", {"view": "raw", "flag_type": "peel_chain"}).result
    assert raw["view"] == "raw" and raw["flags"][0]["evidence"]["length"] == 12
