"""Every case tool's ``headline`` states the figures of the result it sits in.

Each tool is called for real (sample case and a generated case); the numbers
in its one-line headline are checked against the result's own fields, so a
card or a terminal line that shows the headline never miscounts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import Part, Session, run_tool
from tahrix_lab.case.generator import generate_case
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.tools.headlines import count, usd
from tahrix_lab.case.workspace import Workspace


@pytest.fixture(scope="module", params=["sample", "generated"])
def case(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Workspace, str]]:
    tmp = tmp_path_factory.mktemp(request.param)
    ws = Workspace(tmp / "ws.duckdb")
    if request.param == "sample":
        cid = ws.load_sample_case()
    else:
        ws.load_case_folder(generate_case(3, tmp / "case"))
        cid = ws.list_cases()[0]["case_id"]
        ws.run_detectors(cid)
    yield ws, cid
    ws.close()


def call(ws: Workspace, session: Session, name: str, args: dict[str, Any]) -> dict[str, Any]:
    out = run_tool(
        Part.of_tool_use("tu", name, args), ws.context_provider(), registry=CASE_TOOLS, session=session
    )
    assert out.status == "ok", out.result
    assert isinstance(out.result.get("headline"), str) and "\n" not in out.result["headline"]
    assert next(iter(out.result)) == "headline"  # it leads the result
    return out.result


def has(line: str, *figures: str) -> None:
    for f in figures:
        assert f in line, f"{f!r} is not in {line!r}"


def test_every_case_tool_writes_a_true_headline(case: tuple[Workspace, str]) -> None:
    ws, cid = case
    session = ws.start_investigation(cid, user="ana", grant={"may_write": True})
    checked: set[str] = set()

    r = call(ws, session, "get_case_overview", {})
    has(r["headline"], f"{r['counts']['transfers']:,} transfers", f"{r['counts']['addresses']:,} addresses",
        f"triage {count(r['triage']['rows'], 'row')} from {count(r['triage']['flags'], 'flag')}")  # fmt: skip
    for sev, n in r["triage"]["by_severity"].items():
        assert (f"{n} {sev}" in r["headline"]) == bool(n)
    roles = r["addresses_with_roles"]
    perp = next(a for a in roles if a["role"] in ("perpetrator", "suspect", "seed"))
    checked.add("get_case_overview")

    r = call(ws, session, "lookup_address", {"address": perp["address"]})
    m = r["matches"][0]
    has(r["headline"], f"in {usd(m['profile']['usd_in'])} in {count(m['profile']['n_in'], 'transfer')}",
        f"out {usd(m['profile']['usd_out'])} in {count(m['profile']['n_out'], 'transfer')}", count(len(m["flags"]), "flag"))  # fmt: skip
    checked.add("lookup_address")

    r = call(ws, session, "list_transfers", {"address": perp["address"], "limit": 5, "order_by": "usd"})
    priced = sum(t["usd_value"] for t in r["transfers"] if t["usd_value"] is not None)
    has(r["headline"], count(r["count"], "transfer"), f"{usd(priced)} priced")
    assert ("more match" in r["headline"]) == r["truncated"]
    tx = r["transfers"][0]
    checked.add("list_transfers")

    r = call(ws, session, "get_transaction", {"tx_hash": tx["tx_hash"], "chain": tx["chain"]})
    m = r["matches"][0]
    has(r["headline"], count(len(m["transfers"]), "transfer"), count(len(m["flags"]), "flag"),
        count(len(m["bridge_events"]), "bridge event"))  # fmt: skip
    checked.add("get_transaction")

    r = call(ws, session, "trace_funds", {"max_hops": 4, "min_usd": 1000})
    s = r["summary"]
    endpoints = (r.get("page") or {}).get("shown", {}).get("endpoints", {}).get("of", len(r["endpoints"]))
    has(
        r["headline"],
        f"{usd(s['traced_usd'])} traced",
        f"{usd(s['endpoints_usd'])} reached {count(endpoints, 'endpoint')}",
    )
    for _, v in sorted(s["endpoint_usd_by_category"].items(), key=lambda kv: -kv[1])[:4]:
        has(r["headline"], usd(v))
    if s["held_usd"]:
        has(r["headline"], f"{usd(s['held_usd'])} held")
    # the categories add up to what reached endpoints (the headline's parts are the whole)
    assert sum(s["endpoint_usd_by_category"].values()) == pytest.approx(s["endpoints_usd"], abs=1)
    checked.add("trace_funds")

    r = call(ws, session, "find_bridge_events", {"limit": 5})
    has(r["headline"], count(r["count"], "bridge event"))
    for status, n in Counter(b["status"] for b in r["bridge_events"]).items():
        has(r["headline"], f"{n} {status}")
    checked.add("find_bridge_events")
    bridge = r["bridge_events"][0]

    r = call(ws, session, "match_bridge_leg", {"src_tx_hash": bridge["src_tx_hash"]})
    has(
        r["headline"],
        count(len(r["candidates"]), "candidate"),
        count(len(r["stored_bridge_events"]), "stored bridge event"),
    )
    checked.add("match_bridge_leg")

    # the whole first page (budget_bytes), so the severities can be counted from the rows themselves
    r = call(ws, session, "list_flags", {"min_severity": "high", "limit": 15, "budget_bytes": 30000})
    has(r["headline"], f"{r['count']} of {count(r['rows_matching'], 'triage row')} shown",
        f"{r['rows_total']} rows from {count(r['flags_total'], 'flag')}")  # fmt: skip
    assert r["count"] == len(r["rows"]) == min(15, r["rows_matching"])
    for sev, n in Counter(row["severity"] for row in r["rows"]).items():
        has(r["headline"], f"{n} {sev}")
    flag_id = r["rows"][0]["flags"][0]["flag_id"]
    r = call(ws, session, "list_flags", {"view": "raw", "limit": 3})
    has(r["headline"], f"3 of {count(r['total'], 'flag')} shown")
    checked.add("list_flags")

    r = call(
        ws,
        session,
        "screen_exposure",
        {"addresses": [{"address": perp["address"]}, {"address": "0xnothere"}]},
    )
    direct = sum(x["direct"]["usd"] for x in r["results"] if x["found"])
    has(r["headline"], "2 addresses screened", "(1 not in the case)", f"direct {usd(direct)}")
    checked.add("screen_exposure")

    r = call(ws, session, "run_sql", {"query": "SELECT chain, count(*) AS n FROM transfers GROUP BY chain"})
    has(r["headline"], count(r["row_count"], "row"), "× 2 columns")
    checked.add("run_sql")

    r = call(ws, session, "annotate", {"target_kind": "flag", "target": flag_id, "action": "confirm_flag"})
    has(r["headline"], f"confirm flag {flag_id}", r["audit_id"])
    checked.add("annotate")

    r = call(ws, session, "run_detectors", {"detectors": ["peel_chain"]})
    has(
        r["headline"],
        count(r["flags_written"], "flag"),
        "1 detector",
        count(r["triage"]["rows_total"], "row"),
    )
    checked.add("run_detectors")

    fake = "0x" + "ab" * 32
    r = call(ws, session, "verify_citations", {"text": f"From {perp['address']} to {fake}."})
    counts = r["counts"]
    assert counts["not_found"] >= 1 and counts["verified"] >= 1
    has(r["headline"], f"{counts['verified']} citation", "verified", f"{counts['not_found']} not found")
    checked.add("verify_citations")

    assert checked == {t.name for t in CASE_TOOLS}


def test_headline_figures_are_the_results_figures() -> None:
    """Formatting never rescales: each money figure is the value rounded to one decimal of its unit."""
    for value in (0, 950, 1_000, 202_437.68, 6_646_784.62, 167_125_649.59, 2.5e9):
        text = usd(value)
        m = re.fullmatch(r"\$([\d,.]+)([kMB]?)", text)
        assert m, text
        scale = {"": 1, "k": 1e3, "M": 1e6, "B": 1e9}[m.group(2)]
        assert float(m.group(1).replace(",", "")) * scale == pytest.approx(value, abs=0.05 * scale + 0.5)
    assert usd(None) == "unpriced"


def test_headlines_on_the_sample_read_as_the_analyst_expects(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws.duckdb")
    cid = ws.load_sample_case()
    session = ws.start_investigation(cid, user="ana", grant={"may_write": False})
    r = call(ws, session, "trace_funds", {"max_hops": 4, "min_usd": 1000})
    assert r["headline"].startswith(
        "$145.6M traced · $138.6M reached 6 endpoints: mixer $131.7M, exchanges $6.6M"
    )
    r = call(ws, session, "list_flags", {"min_severity": "high", "limit": 15})
    assert r["headline"].startswith("15 of 28 triage rows shown (29 rows from 725 flags in all)")
    ws.close()
