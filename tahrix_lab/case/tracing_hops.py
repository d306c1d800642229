"""One hop of a trace: the frontier's movements in one query, taint shared out, bridges crossed, endpoints kept.

``take_hop`` takes the frontier (the addresses taint reached in the last hop) and
returns the next one; everything it learns along the way (edges, nodes,
endpoints, held and cut-off USD) is written into the trace's ``State``.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.tracing_index import TraceIndex
from tahrix_lab.case.tracing_taint import allocate, fifo_ledgers, received_usd
from tahrix_lab.case.tracing_types import Arrival, Key, State, TraceParams

# Followed through the same transaction (a swap's output); an endpoint only where the trail ends there.
SWAP_CATEGORIES = frozenset({"defi_dex"})
EVIDENCE_CAP = 25


def take_hop(
    db: CaseDB, case_id: str, ix: TraceIndex, st: State, frontier: dict[Key, Arrival], hop: int, p: TraceParams,
    categories: dict[Key, str], stop: set[str],
) -> dict[Key, Arrival]:  # fmt: skip
    fwd = p.direction == "forward"
    swaps = {k for k in frontier if categories.get(k) in SWAP_CATEGORIES and hop > 1}
    rows = _hop_rows(ix, frontier, swaps, p)
    by_here: dict[Key, list[dict[str, Any]]] = {}
    for r in rows:
        if r["transfer_id"] not in st.followed:
            by_here.setdefault((r["chain"], r["here"]), []).append(r)
    bridges = _bridges_for(db, case_id, rows, fwd) if p.follow_bridges else {}
    finite = [k for k in frontier if not math.isinf(frontier[k].usd)]
    ledgers = fifo_ledgers(ix, finite) if p.taint_model == "fifo" else {}
    received = received_usd(ix, finite, p.direction) if p.taint_model == "haircut" else {}
    nxt: dict[Key, Arrival] = {}
    for here, arr in frontier.items():
        out = by_here.get(here, [])
        if here in swaps:
            out = [r for r in out if r["tx_hash"] in arr.txs]
        elif fwd:
            out = _round_trips(ix, st, here, arr, out, hop, categories, p.min_usd)
        alloc = allocate(st, here, arr, out, p, ledgers.get(here), received.get(here, 0.0))
        passed = 0.0
        for r, taint in alloc:
            if taint is not None and taint < p.min_usd:
                st.cut_off_usd += taint
                passed += taint
                continue
            if len(st.edges) >= p.max_edges:
                st.truncated = True
                break
            passed += taint or 0.0
            _follow(st, r, taint, hop, fwd, bridges, categories, stop, nxt, start=math.isinf(arr.usd))
        rest = 0.0 if math.isinf(arr.usd) else max(0.0, arr.usd - passed)
        if st.truncated and rest > 0:
            st.frontier.append({"chain": here[0], "address": here[1], "reason": "edge_cap", "hop": hop - 1,
                                "tainted_usd": round(rest, 2), "unpriced": arr.unknown})  # fmt: skip
            continue
        if here in swaps and not alloc:  # a DEX where the trail ends is an endpoint
            _endpoint(st, here, "defi_dex", hop - 1, arr.t, arr.usd, None, None, unpriced=arr.unknown)
            continue
        if rest > 0 or (not alloc and arr.unknown):
            st.held_usd += rest
            node = st.nodes[here]
            node["held_usd"] = round(node.get("held_usd", 0.0) + rest, 2)
            st.frontier.append({"chain": here[0], "address": here[1], "hop": hop - 1, "tainted_usd": round(rest, 2),
                                "reason": "held" if alloc else "no_further_movement", "unpriced": arr.unknown})  # fmt: skip
    return nxt


def _round_trips(
    ix: TraceIndex, st: State, here: Key, arr: Arrival, out: list[dict[str, Any]], hop: int,
    categories: dict[Key, str], min_usd: float,
) -> list[dict[str, Any]]:  # fmt: skip
    """``out`` without the swaps that pay ``here`` back in the same transaction (a token into a DEX
    router, the native coin back by an internal transfer): a swap converts the value, it does not spend
    it, so the taint stays with the sender for what it sends on. Both legs are drawn as edges (``swap``,
    with the taint that went through, when it is not below ``min_usd``) and never followed again; the
    taint is counted where the sender sends it on, once."""
    cands = [r for r in out if categories.get((r["chain"], r["there"])) in SWAP_CATEGORIES]
    if not cands:
        return out
    cols = ("t.transfer_id, t.chain, t.tx_hash, t.block_time, t.kind, t.from_address AS here, "
            "t.to_address AS there, t.asset_key, t.amount, t.usd_value AS usd")  # fmt: skip
    back: dict[str, list[dict[str, Any]]] = {}
    for b in ix.fetch("tx_hash", sorted({r["tx_hash"] for r in cands}), cols, "t.status IS NOT FALSE"):
        if (b["chain"], b["there"]) == here and b["here"] != here[1]:
            back.setdefault(b["tx_hash"], []).append(b)
    trips = [r for r in cands if r["tx_hash"] in back]
    for r in trips:
        for leg in [r, *back[r["tx_hash"]]]:
            st.followed.add(leg["transfer_id"])
            through = None if leg["usd"] is None else min(leg["usd"], arr.usd)
            if through is not None and through < min_usd:
                continue
            st.node((r["chain"], r["there"]), hop, r["block_time"])
            st.edges.append({**_edge(leg, hop, through, True), "swap": True})
    gone = {r["transfer_id"] for r in trips}
    return [r for r in out if r["transfer_id"] not in gone]


def _follow(
    st: State, r: dict[str, Any], taint: float | None, hop: int, fwd: bool, bridges: dict[Key, dict[str, Any]],
    categories: dict[Key, str], stop: set[str], nxt: dict[Key, Arrival], *, start: bool,
) -> None:  # fmt: skip
    there: Key = (r["chain"], r["there"])
    st.followed.add(r["transfer_id"])
    st.unpriced_edges += taint is None
    st.unknown_amount_edges += r["amount"] is None
    st.edges.append(_edge(r, hop, taint, fwd))
    bridge = bridges.get((r["chain"], r["tx_hash"]))
    if bridge is not None:
        st.node(there, hop, r["block_time"], bridge_contract=True)
        _follow_bridge(st, bridge, r, hop, taint, fwd, nxt)
        return
    node = st.node(there, hop, r["block_time"])
    if taint is not None:
        node["tainted_usd"] = round(node["tainted_usd"] + taint, 2)
    cat = categories.get(there)
    if cat in stop:
        _endpoint(
            st,
            there,
            cat,
            hop,
            r["block_time"],
            taint,
            r["transfer_id"],
            r["tx_hash"],
            unpriced=taint is None,
        )
        return
    if taint is not None:
        st.fifo_in.setdefault(there, {})[r["transfer_id"]] = taint
    nxt.setdefault(there, Arrival(None)).add(r["block_time"], taint, r["tx_hash"], None)


def _endpoint(
    st: State, k: Key, cat: str, hop: int, t: datetime | None, usd: float | None, transfer_id: str | None,
    tx_hash: str | None, *, unpriced: bool, **extra: Any,
) -> None:  # fmt: skip
    ep = st.endpoints.setdefault(k, {"chain": k[0], "address": k[1], "category": cat, "hop": hop, "tainted_usd": 0.0,
                                     "first_time": t, "evidence_count": 0, "evidence": [], "tx_hashes": [],
                                     "unpriced_transfers": 0, **extra})  # fmt: skip
    if usd is not None:
        ep["tainted_usd"] = round(ep["tainted_usd"] + usd, 2)
    ep["unpriced_transfers"] += int(unpriced)
    if transfer_id is not None:
        ep["evidence_count"] += 1
        if len(ep["evidence"]) < EVIDENCE_CAP:
            ep["evidence"].append(transfer_id)
    if tx_hash is not None and tx_hash not in ep["tx_hashes"] and len(ep["tx_hashes"]) < EVIDENCE_CAP:
        ep["tx_hashes"].append(tx_hash)


def _hop_rows(
    ix: TraceIndex, frontier: dict[Key, Arrival], swaps: set[Key], p: TraceParams
) -> list[dict[str, Any]]:
    """The movements out of (into, backward) the frontier after taint reached each address (a swap node:
    only those of the same transaction), oldest first, through the index."""
    fwd = p.direction == "forward"
    here, there = ("from_address", "to_address") if fwd else ("to_address", "from_address")
    cols = (f"t.transfer_id, t.chain, t.tx_hash, t.block_time, t.kind, t.{here} AS here, t.{there} AS there, "
            "t.asset_key, t.amount, t.usd_value AS usd")  # fmt: skip
    where = (
        f"t.{there} IS NOT NULL AND t.status IS NOT FALSE AND t.amount_raw <> '0' AND t.{here} <> t.{there}"
    )
    window = timedelta(hours=p.time_window_hours) if p.time_window_hours else None
    out = []
    for r in ix.fetch(here, [f"{c}|{a}" for c, a in frontier], cols, where):
        k = (r["chain"], r["here"])
        arr = frontier.get(k)
        if arr is None:
            continue  # a hash neighbour, not the frontier
        if k in swaps:
            if r["tx_hash"] in arr.txs:
                out.append(r)
            continue
        t = None if p.taint_model == "fifo" else arr.t  # fifo reads the whole history
        if t is not None and (r["block_time"] < t if fwd else r["block_time"] > t):
            continue
        if (
            window is not None
            and arr.t is not None
            and (r["block_time"] > arr.t + window if fwd else r["block_time"] < arr.t - window)
        ):
            continue
        out.append(r)
    out.sort(key=lambda r: (r["block_time"], r["transfer_id"]))
    return out[: p.max_edges * 4]


def _bridges_for(
    db: CaseDB, case_id: str, rows: list[dict[str, Any]], fwd: bool
) -> dict[Key, dict[str, Any]]:
    if not rows:
        return {}
    leg = "src" if fwd else "dst"
    found = db.rows(
        f"SELECT * FROM bridge_events WHERE case_id = ? AND {leg}_tx_hash IN (SELECT unnest(?::VARCHAR[]))",
        [case_id, sorted({r["tx_hash"] for r in rows})],
    )
    return {(b[f"{leg}_chain"], b[f"{leg}_tx_hash"]): b for b in found}


def _edge(r: dict[str, Any], hop: int, taint: float | None, fwd: bool) -> dict[str, Any]:
    src, dst = (r["here"], r["there"]) if fwd else (r["there"], r["here"])
    return {
        "kind": "transfer", "hop": hop, "chain": r["chain"], "from": src, "to": dst, "tx_hash": r["tx_hash"],
        "transfer_id": r["transfer_id"], "time": r["block_time"], "asset_key": r["asset_key"], "amount": r["amount"],
        "usd": r["usd"], "tainted_usd": None if taint is None else round(taint, 2), "unpriced": taint is None,
    }  # fmt: skip


def _follow_bridge(
    st: State,
    b: dict[str, Any],
    r: dict[str, Any],
    hop: int,
    taint: float | None,
    fwd: bool,
    nxt: dict[Key, Arrival],
) -> None:
    """Across a bridge once per bridge event: further movements into the same event add to its one edge."""
    if fwd and (not b["dst_tx_hash"] or not b["dst_address"]):
        contract: Key = (b["src_chain"], b["src_contract"] or r["there"])
        _endpoint(st, contract, "defi_bridge", hop, r["block_time"], taint, r["transfer_id"], r["tx_hash"],
                  unpriced=taint is None, unresolved=True, bridge_event_id=b["bridge_event_id"],
                  declared_dst_chain=b["declared_dst_chain"], reason="bridge_unmatched")  # fmt: skip
        return
    if fwd:
        far: Key = (b["dst_chain"], b["dst_address"])
        t, ends = b["dst_time"], (b["src_chain"], r["there"], b["dst_chain"], b["dst_address"])
    else:
        far = (b["src_chain"], b["src_address"])
        t, ends = b["src_time"], (b["src_chain"], b["src_address"], b["dst_chain"], b["dst_address"])
    edge = st.bridges_done.get(b["bridge_event_id"])
    if edge is None:
        edge = st.bridges_done[b["bridge_event_id"]] = {
            "kind": "bridge", "hop": hop, "bridge_event_id": b["bridge_event_id"], "bridge_name": b["bridge_name"],
            "from_chain": ends[0], "from": ends[1], "to_chain": ends[2], "to": ends[3], "src_tx_hash": b["src_tx_hash"],
            "dst_tx_hash": b["dst_tx_hash"], "time": t, "usd": b["dst_usd"] if fwd else b["src_usd"], "tainted_usd": 0.0,
            "unpriced": False, "match_method": b["match_method"], "match_confidence": b["match_confidence"],
        }  # fmt: skip
        st.edges.append(edge)
    if taint is None:
        edge["unpriced"] = True
    else:
        edge["tainted_usd"] = round(edge["tainted_usd"] + taint, 2)
    node = st.node(far, hop, t, via_bridge=b["bridge_event_id"])
    if taint is not None:
        node["tainted_usd"] = round(node["tainted_usd"] + taint, 2)
    st.fifo_in.setdefault(far, {})
    nxt.setdefault(far, Arrival(None)).add(t, taint, b["dst_tx_hash"] if fwd else b["src_tx_hash"], None)
