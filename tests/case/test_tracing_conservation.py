"""The tracer conserves value: properties on random transfer graphs, and one regression per defect."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.tracing import TraceParams, trace_funds
from tahrix_lab.case.workspace import Workspace

ADDR = [f"0x{i:040x}" for i in range(1, 9)]
EX, OTC, MIXER, BRIDGE = "0x" + "e" * 40, "0x" + "0c" * 20, "0x" + "aa" * 20, "0x" + "b" * 40


def _endpoints(r: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for eps in r["endpoints"].values() for e in eps]


def _check_conserved(r: dict[str, Any]) -> None:
    s = r["summary"]
    slack = 0.01 * (len(r["edges"]) + len(r["frontier"]) + len(_endpoints(r)) + 2)
    accounted = s["endpoints_usd"] + s["frontier_usd"] + s["held_usd"] + s["cut_off_usd"]
    assert accounted <= s["traced_usd"] + slack, s
    if not r["truncated"]:
        assert accounted >= s["traced_usd"] - slack, s  # and nothing is lost either
    for e in _endpoints(r):
        assert e["tainted_usd"] <= s["traced_usd"] + slack
        assert len(e["evidence"]) == len(set(e["evidence"])) and len(e["tx_hashes"]) == len(
            set(e["tx_hashes"])
        )
    ids = [i for e in _endpoints(r) for i in e["evidence"]]
    assert len(ids) == len(set(ids)), "a movement is evidence of two endpoints"
    transfers = sum(e["transfers"] for e in r["edges"] if e["kind"] == "transfer")
    assert transfers == r["totals"]["transfers_followed"], "a movement was followed twice"
    bridges = [e["bridge_event_id"] for e in r["edges"] if e["kind"] == "bridge"]
    assert len(bridges) == len(set(bridges)), "a bridge event was crossed twice"
    for e in r["edges"]:
        if e["tainted_usd"] is not None and e["usd"] is not None:
            assert e["tainted_usd"] <= e["usd"] + 0.01 * e["transfers"]


movement = st.tuples(
    st.integers(0, len(ADDR) + 3),  # sender (the last ones are services)
    st.integers(0, len(ADDR) + 3),
    st.one_of(st.none(), st.floats(1, 100_000, allow_nan=False)),  # USD, sometimes unknown
    st.integers(0, 2000),  # minute
    st.sampled_from([True, True, True, False, None]),  # status: failed and unknown too
)
NODES = [*ADDR, EX, OTC, MIXER, BRIDGE]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    moves=st.lists(movement, min_size=1, max_size=40),
    round_trips=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 1500)), max_size=3),
    model=st.sampled_from(["poison", "haircut", "fifo"]),
    start=st.integers(0, 7),
    min_usd=st.sampled_from([0.0, 100.0]),
    max_edges=st.sampled_from([5, 5000]),
)
def test_random_graphs_conserve_value(
    build: Any,
    moves: list[Any],
    round_trips: list[Any],
    model: str,
    start: int,
    min_usd: float,
    max_edges: int,
) -> None:
    b = build()
    for frm, to, usd, minute, status in moves:
        if frm != to:
            b.transfer(NODES[frm], NODES[to], usd, minute, status=status)
    # bridge round trips: a → bridge on ethereum, out to the same-named address on bsc, back to b on ethereum
    for i, (x, y, minute) in enumerate(round_trips):
        b.transfer(ADDR[x], BRIDGE, 5000.0, minute, tx=f"0xrt{b.case_id.lower()}{i}a")
        b.transfer(BRIDGE, ADDR[x], 4990.0, minute + 5, chain="bsc", tx=f"0xrt{b.case_id.lower()}{i}b")
        b.bridge(f"RT{i}a", "ethereum", f"0xrt{b.case_id.lower()}{i}a", ADDR[x], minute, "bsc",
                 f"0xrt{b.case_id.lower()}{i}b", ADDR[x], minute + 5, contract=BRIDGE)  # fmt: skip
        b.transfer(ADDR[x], BRIDGE, 4990.0, minute + 10, chain="bsc", tx=f"0xrt{b.case_id.lower()}{i}c")
        b.bridge(f"RT{i}b", "bsc", f"0xrt{b.case_id.lower()}{i}c", ADDR[x], minute + 10, "ethereum",
                 f"0xrt{b.case_id.lower()}{i}d", ADDR[y], minute + 15, contract=BRIDGE)  # fmt: skip
        b.transfer(BRIDGE, ADDR[y], 4980.0, minute + 15, tx=f"0xrt{b.case_id.lower()}{i}d")
    b.label(EX, "exchange")
    b.label(OTC, "OTC Broker")  # a raw spelling, normalised on load
    b.label(MIXER, "mixer")
    b.label(BRIDGE, "defi_bridge")
    b.label(BRIDGE, "defi_bridge", chain="bsc")
    cid = b.done()
    p = TraceParams(max_hops=8, taint_model=model, min_usd=min_usd, max_edges=max_edges)  # type: ignore[arg-type]
    r = trace_funds(b.db, cid, [ADDR[start]], params=p)
    if "error" in r:
        return  # the start never moved anything
    _check_conserved(r)
    theft = [m for m in b.transfers if m["from_address"] == ADDR[start] and m["status"] is not False]
    if theft:
        r = trace_funds(b.db, cid, [theft[0]["tx_hash"]], params=p)
        _check_conserved(r)


def _round_trip_case(b: Any) -> tuple[str, str, str]:
    """V → A (theft); A → bridge → A on bsc → bridge → back to A; A → exchange; A → OTC desk."""
    victim, a = ADDR[0], ADDR[1]
    b.transfer(victim, a, 100_000.0, 0, tx="0xtheft")
    b.transfer(a, BRIDGE, 40_000.0, 10, tx="0xout1")
    b.transfer(BRIDGE, a, 40_000.0, 20, chain="bsc", tx="0xin1")
    b.bridge("BR1", "ethereum", "0xout1", a, 10, "bsc", "0xin1", a, 20, contract=BRIDGE)
    b.transfer(a, BRIDGE, 40_000.0, 30, chain="bsc", tx="0xout2")
    b.transfer(BRIDGE, a, 40_000.0, 40, tx="0xin2")
    b.bridge("BR2", "bsc", "0xout2", a, 30, "ethereum", "0xin2", a, 40, contract=BRIDGE)
    b.transfer(a, EX, 60_000.0, 50, tx="0xcashout")
    b.transfer(a, OTC, 40_000.0, 60, tx="0xotc")
    b.label(EX, "cex")
    b.label(OTC, "otc")
    b.label(BRIDGE, "bridge")
    b.label(BRIDGE, "bridge", chain="bsc")
    b.role(a, "seed")
    return b.done(), a, victim


@pytest.mark.parametrize("model", ["poison", "haircut", "fifo"])
def test_bridge_round_trip_is_counted_once(build: Any, model: str) -> None:
    cid, _, _ = _round_trip_case(build())
    r = trace_funds(build().db, cid, ["0xtheft"], params=TraceParams(max_hops=10, taint_model=model))  # type: ignore[arg-type]
    _check_conserved(r)
    ex = r["endpoints"]["exchange"][0]
    assert ex["evidence"] == ["ethereum:0xcashout:native:5"] and ex["evidence_count"] == 1
    assert ex["tainted_usd"] <= 60_000.0
    assert r["summary"]["traced_usd"] == 100_000.0
    assert sum(e["tainted_usd"] for e in _endpoints(r)) <= 100_000.0 + 0.01
    assert sorted(e["bridge_event_id"] for e in r["edges"] if e["kind"] == "bridge") == ["BR1", "BR2"]


def test_otc_desk_and_cex_spellings_are_endpoints(build: Any) -> None:
    cid, a, _ = _round_trip_case(build())
    r = trace_funds(build().db, cid, [a], params=TraceParams(max_hops=10))
    assert {"exchange", "otc_desk"} <= set(r["endpoints"])
    assert r["endpoints"]["otc_desk"][0]["address"] == OTC
    nxt = next(n for n in r["nodes"] if n["address"] == OTC)
    assert nxt["endpoint"] and nxt["hop"] == 1  # not walked past
    only_ex = trace_funds(build().db, cid, [a], params=TraceParams(max_hops=10, stop_at_categories=("cex",)))
    assert set(only_ex["endpoints"]) == {"exchange"}  # configurable per call, spellings normalised


def test_trace_from_a_seed_only_intake(build: Any) -> None:
    b = build()
    cid, a, _ = _round_trip_case(b)
    ws = Workspace(":memory:", connection=b.db.connection)  # the same database: not closed here
    r = ws.trace(cid, max_hops=10)
    # the seed address is on both chains of the round trip: both are starts
    assert r["summary"]["start"] == {"given": [a], "kind": "roles", "roles": ["seed"],
                                     "resolved": [f"bsc:{a}", f"ethereum:{a}"]}  # fmt: skip
    assert {"exchange", "otc_desk"} <= set(r["endpoints"])
    by_addr = ws.trace(a, max_hops=2)
    assert by_addr["summary"]["start"]["kind"] == "address"


def test_unpriced_movements_are_followed_and_marked(build: Any) -> None:
    b = build()
    a, x = ADDR[1], ADDR[2]
    b.transfer(a, x, None, 0, tx="0xunpriced")  # a token with no price
    b.transfer(x, EX, 50.0, 10, tx="0xsmall")  # under min_usd, but unpriced taint has no USD to compare
    b.transfer(x, ADDR[3], None, 20, tx="0xfailed", status=False)  # failed: moves nothing
    b.label(EX, "exchange")
    cid = b.done()
    r = trace_funds(b.db, cid, [a], params=TraceParams(max_hops=4))
    ex = r["endpoints"]["exchange"][0]
    assert ex["unpriced_transfers"] == 1 and ex["tainted_usd"] == 0.0
    assert r["summary"]["unpriced"]["movements_followed"] == 2
    assert all(e["tx_hashes"] != ["0xfailed"] for e in r["edges"])
    assert r["summary"]["traced_usd"] == 0.0  # nothing priced left the start: no figure is invented
    off = trace_funds(b.db, cid, [a], params=TraceParams(max_hops=4, follow_unpriced=False))
    assert "error" not in off and not off["endpoints"]


def test_taint_models_differ_and_never_exceed_what_arrived(build: Any) -> None:
    b = build()
    a = ADDR[1]
    b.transfer(ADDR[4], a, 100.0 * 1000, 0, tx="0xclean")
    b.transfer(ADDR[0], a, 100.0 * 1000, 10, tx="0xtheft")
    b.transfer(a, ADDR[5], 100.0 * 1000, 20, tx="0xfirst")
    b.transfer(a, EX, 100.0 * 1000, 30, tx="0xsecond")
    b.label(EX, "exchange")
    cid = b.done()
    got = {}
    for model in ("poison", "haircut", "fifo"):
        r = trace_funds(b.db, cid, ["0xtheft"], params=TraceParams(max_hops=3, taint_model=model))  # type: ignore[arg-type]
        _check_conserved(r)
        got[model] = r["summary"]["endpoint_usd_by_category"].get("exchange")
    assert got == {"poison": 50_000.0, "haircut": 50_000.0, "fifo": 100_000.0}
    with pytest.raises(ValueError, match="forward only"):
        TraceParams(taint_model="fifo", direction="backward")


def test_failed_status_moves_nothing_and_db_is_shared(case_db: CaseDB, build: Any) -> None:
    b = build()
    b.transfer(ADDR[1], EX, 10_000.0, 0, status=False)
    b.transfer(ADDR[1], ADDR[2], 1_000.0, 5)
    b.label(EX, "exchange")
    cid = b.done()
    r = trace_funds(case_db, cid, [ADDR[1]], params=TraceParams(max_hops=2))
    assert not r["endpoints"] and r["summary"]["traced_usd"] == 1_000.0
