"""The graph panel's payload (case/flowgraph.py) and the flags panel's rows (case/flagrows.py)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.flowgraph import compact_usd, edge_text, native_text
from tahrix_lab.case.generator import generate_case
from tahrix_lab.case.workspace import Workspace

POOL = "bsc:0xb16107f1be437c7ba6caf4a341023aed54ef125a"  # Stargate's pool on BSC in the sample case
PARAMS = {"max_hops": 4, "min_usd": 1000}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    tmp = tmp_path_factory.mktemp("gen")
    ws = Workspace(tmp / "g.duckdb")
    ws.load_case_folder(generate_case(11, tmp / "case"))
    yield ws
    ws.close()


def _transfers(ws: Workspace, case_id: str, ids: list[str]) -> list[dict[str, Any]]:
    return ws.cases.rows(
        "SELECT t.transfer_id, t.amount, t.usd_value AS usd, a.symbol FROM transfers t "
        "LEFT JOIN assets a USING (asset_key) WHERE t.case_id = ? AND t.transfer_id IN (SELECT unnest(?::VARCHAR[]))",
        [case_id, ids],
    )


def check_edges_are_their_transfers(ws: Workspace, case_id: str, **params: Any) -> int:
    """Every edge's USD, count and native sums are those of the transfers it lists, which are
    the tracer's own: its count, its USD total and its sample of transfer ids."""
    trace = ws.trace(case_id, **params)
    graph = ws.flow_graph(case_id, **params)
    by_ends = {(e["source"], e["target"], e["kind"] == "bridge"): e for e in trace["edges"]}
    checked = 0
    for e in graph["edges"]:
        traced = by_ends[(e["source"], e["target"], e["kind"] == "bridge")]
        assert e["transfers"] == traced["transfers"]
        if e["kind"] == "bridge":  # one crossing, its two legs listed
            assert [t["leg"] for t in e["txs"]] == ["sent", "received"]
            assert e["usd"] == e["txs"][1]["usd"] == traced["usd"]
            continue
        assert e["txs_total"] == e["transfers"]
        assert set(traced["transfer_ids"]) <= {t["transfer_id"] for t in e["txs"]}
        rows = _transfers(ws, case_id, [t["transfer_id"] for t in e["txs"]])
        assert len(rows) == len(e["txs"])
        usd = [r["usd"] for r in rows if r["usd"] is not None]
        assert e["usd"] == traced["usd"] == (round(sum(usd), 2) if usd else None)
        sums: dict[str, Decimal] = {}
        for r in rows:
            sums[r["symbol"]] = sums.get(r["symbol"], Decimal(0)) + r["amount"]
        assert {a["symbol"]: Decimal(a["amount"]) for a in e["amounts"]} == sums
        assert e["text"].startswith(f"{native_text(e['amounts'][0]['amount'])} {e['amounts'][0]['symbol']}")
        checked += 1
    return checked


def test_sample_case_edges_carry_native_amounts_equal_to_their_transfers(loaded: Workspace) -> None:
    assert check_edges_are_their_transfers(loaded, "CASE-001", **PARAMS) >= 15
    graph = loaded.flow_graph("CASE-001", **PARAMS)
    mixer = [e for e in graph["edges"] if e["transfers"] == 134]
    assert len(mixer) == 3
    assert all(
        e["text"].startswith("13,400 ETH · $4") and e["text"].endswith("×134 transfers") for e in mixer
    )
    assert {e["kind"] for e in graph["edges"]} == {"transfer", "swap", "bridge"}
    assert graph["assets"] == ["ETH", "USDC"]


@pytest.mark.parametrize("min_usd", [100.0, 50_000.0])
def test_generated_case_edges_carry_native_amounts_equal_to_their_transfers(
    generated: Workspace, min_usd: float
) -> None:
    assert check_edges_are_their_transfers(generated, "CASE-001", max_hops=5, min_usd=min_usd) > 5


def test_nodes_are_named_by_label_or_role_never_start_or_unlabelled(loaded: Workspace) -> None:
    graph = loaded.flow_graph("CASE-001", **PARAMS)
    names = {n["id"]: n for n in graph["nodes"]}
    assert names["ethereum:0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"]["name"] == "perpetrator"
    assert names["ethereum:0x17420e940144702bc6b789ef81365acc3f88af59"]["name"] == "suspect"
    assert not {n["name"] for n in graph["nodes"]} & {"start", "unlabelled", None}
    hops = [n for n in graph["nodes"] if not n["label"] and not n["role"]]
    assert hops and all(n["name"] == f"hop {n['hop']}" for n in hops)
    mixer = next(n for n in graph["nodes"] if n["category"] == "mixing_service")
    assert mixer["label_source"] and mixer["explorer"].startswith("https://etherscan.io/address/0x")
    perp = names["ethereum:0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"]
    assert perp["flag_count"] == len(loaded.flags("CASE-001", address=perp["address"]))
    case_in = loaded.cases.scalar(
        "SELECT sum(usd_value) FROM transfers WHERE case_id = ? AND chain = ? AND to_address = ? AND status IS NOT FALSE",
        ["CASE-001", perp["chain"], perp["address"]],
    )
    assert perp["in_usd"] == round(case_in, 2)


def test_trace_onward_from_a_bridge_pool_follows_only_the_matched_leg(loaded: Workspace) -> None:
    graph = loaded.flow_graph("CASE-001", **PARAMS)
    pool = next(n for n in graph["nodes"] if n["id"] == POOL)
    assert pool["bridge_contract"]
    onward = loaded.trace_onward("CASE-001", pool, graph, max_hops=2, min_usd=1000)
    leaving = [e for e in onward["edges"] if e["source"] == POOL]
    assert [(e["kind"], e["bridge_event_id"]) for e in leaving] == [("bridge", "BR-0053")]
    assert leaving[0]["target"] == "ethereum:0x1983968a3f592f44f8d31f1a41570ee7a8143bd1"
    assert leaving[0]["usd"] == 665346.88
    traced_usd = sum(n["tainted_usd"] or 0 for n in onward["nodes"] if n["hop"] == 0)
    assert traced_usd == pytest.approx(665346.88)  # the leg, not the pool's $35M of other outflows
    # what tracing the pool's address would have done instead
    naive = loaded.trace(POOL.split(":")[1], case_id="CASE-001", chain="bsc", max_hops=1, min_usd=1000)
    assert len([e for e in naive["edges"] if e["source"] == POOL]) > 1


def test_trace_onward_refuses_a_bridge_the_graph_never_entered(loaded: Workspace) -> None:
    graph = loaded.flow_graph("CASE-001", **PARAMS)
    pool = next(n for n in graph["nodes"] if n["id"] == POOL)
    without = {**graph, "edges": [e for e in graph["edges"] if e["target"] != POOL]}
    with pytest.raises(UserFacingError, match="No bridge deposit"):
        loaded.trace_onward("CASE-001", pool, without, max_hops=2)


def test_trace_onward_from_an_address_starts_there(loaded: Workspace) -> None:
    graph = loaded.flow_graph("CASE-001", **PARAMS)
    hop = next(n for n in graph["nodes"] if n["name"] == "hop 2" and n["chain"] == "ethereum")
    onward = loaded.trace_onward("CASE-001", hop, graph, max_hops=1, min_usd=1000)
    assert {e["source"] for e in onward["edges"]} == {hop["id"]}


def test_edge_text_reads_native_amount_usd_date_and_count() -> None:
    edge = {"amounts": [{"symbol": "ETH", "amount": "1200"}], "usd": 4_200_000, "first_time": "2024-03-14T02:15:00Z",
            "last_time": "2024-03-14T05:00:00Z", "transfers": 1}  # fmt: skip
    assert edge_text(edge) == "1,200 ETH · $4.2M · 2024-03-14"
    edge.update(transfers=3, last_time="2024-03-16T00:00:00Z")
    assert edge_text(edge) == "1,200 ETH · $4.2M · 2024-03-14 → 2024-03-16 · ×3 transfers"
    assert native_text("198.6807") == "198.68" and native_text("0.00012345") == "0.000123"
    assert native_text(None) == "?" and compact_usd(665346.88) == "$665.3K" and compact_usd(950) == "$950"


def test_flag_rows_are_the_triage_rows_with_the_panel_columns(loaded: Workspace) -> None:
    triage = loaded.triage("CASE-001")
    rows = loaded.flag_rows("CASE-001")["rows"]
    assert [r["row_id"] for r in rows] == [r["row_id"] for r in triage["rows"]]
    assert [r["flag_count"] for r in rows] == [r["flag_count"] for r in triage["rows"]]
    for r in rows:
        assert r["label"] and r["chains"] and r["status"] and r["explanation"]
        assert all(f["explanation"] for f in r["flags"])
        per_address: dict[tuple[str, str], float] = {}
        for f in r["flags"]:
            if f["amount_usd"] is not None:
                key = (f["chain"], f["address"])
                per_address[key] = max(per_address.get(key, 0.0), f["amount_usd"])
        assert r["amount_usd"] == (round(sum(per_address.values()), 2) if per_address else None)
    perp = next(r for r in rows if r["role"] == "perpetrator")
    assert perp["label"] == "perpetrator" and perp["status"] == "new"
    assert perp["first_time"] <= perp["last_time"]


def test_a_generated_case_has_flag_rows_too(generated: Workspace, tmp_path: Path) -> None:
    generated.run_detectors("CASE-001")
    rows = generated.flag_rows("CASE-001")["rows"]
    assert [r["row_id"] for r in rows] == [r["row_id"] for r in generated.triage("CASE-001")["rows"]]
    assert all(r["explanation"] for r in rows)
