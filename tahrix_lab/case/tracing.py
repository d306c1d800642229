"""Fund tracing over one case: hop-by-hop SQL, bridges followed, services as endpoints.

Taint models:
* ``poison`` — everything an address sends after tainted value arrives is tainted in full;
* ``haircut`` — what it sends is tainted in proportion to the tainted share of all it received.

Each hop is one parameterised query over the frontier, so a six-hop trace
costs six scans whatever the case size. Bridge events are followed from the
source leg to the destination leg (backward: the reverse); a pending bridge
leg is reported in the frontier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tahrix_lab.case.db import CaseDB, jsonable

DEFAULT_STOP = ("exchange", "mixing_service", "defi_dex", "otc_desk")
Key = tuple[str, str]


@dataclass
class TraceParams:
    direction: Literal["forward", "backward"] = "forward"
    max_hops: int = 6
    min_usd: float = 100.0
    time_window_hours: float | None = None
    taint_model: Literal["poison", "haircut"] = "poison"
    follow_bridges: bool = True
    stop_at_categories: tuple[str, ...] = DEFAULT_STOP
    max_edges: int = 5000

    def to_dict(self) -> dict[str, Any]:
        return {
            "direction": self.direction, "max_hops": self.max_hops, "min_usd": self.min_usd,
            "time_window_hours": self.time_window_hours, "taint_model": self.taint_model,
            "follow_bridges": self.follow_bridges, "stop_at_categories": list(self.stop_at_categories),
            "max_edges": self.max_edges,
        }  # fmt: skip


@dataclass
class _State:
    nodes: dict[Key, dict[str, Any]] = field(default_factory=dict)
    edges: list[dict[str, Any]] = field(default_factory=list)
    endpoints: dict[Key, dict[str, Any]] = field(default_factory=dict)
    frontier: list[dict[str, Any]] = field(default_factory=list)
    frac: dict[Key, float] = field(default_factory=dict)
    truncated: bool = False


def resolve_start(
    db: CaseDB, case_id: str, start: str, chain: str | None, direction: str
) -> list[tuple[Key, datetime | None, float]]:
    """Start nodes with the time tainted value is there (None = all history) and the USD tainted."""
    start = start.strip()
    txs = db.rows(
        "SELECT chain, from_address, to_address, block_time, coalesce(usd_value, 0) AS usd FROM transfers "
        "WHERE case_id = ? AND (tx_hash = ? OR tx_hash = lower(?)) AND (? IS NULL OR chain = ?) AND status IS NOT FALSE",
        [case_id, start, start, chain, chain],
    )
    if txs:
        out: dict[Key, tuple[datetime | None, float]] = {}
        for r in txs:
            addr = r["to_address"] if direction == "forward" else r["from_address"]
            if addr is None:
                continue
            k = (r["chain"], addr)
            prev = out.get(k, (r["block_time"], 0.0))
            out[k] = (min(prev[0] or r["block_time"], r["block_time"]), prev[1] + r["usd"])
        return [(k, t, usd) for k, (t, usd) in out.items()]
    rows = db.rows(
        "SELECT chain, address FROM addresses WHERE case_id = ? AND (address = ? OR address = lower(?)) "
        "AND (? IS NULL OR chain = ?) ORDER BY chain",
        [case_id, start, start, chain, chain],
    )
    return [((r["chain"], r["address"]), None, 0.0) for r in rows]


def trace_funds(
    db: CaseDB,
    case_id: str,
    starts: list[str],
    *,
    chain: str | None = None,
    params: TraceParams | None = None,
) -> dict[str, Any]:
    p = params or TraceParams()
    fwd = p.direction == "forward"
    st = _State()
    frontier: dict[Key, datetime | None] = {}
    unknown = []
    for s in starts:
        found = resolve_start(db, case_id, s, norm_chain(chain), p.direction)
        if not found:
            unknown.append(s)
        for k, t, usd in found:
            st.nodes[k] = {"chain": k[0], "address": k[1], "hop": 0, "tainted_usd": round(usd, 2), "role": "start",
                           "first_time": t}  # fmt: skip
            st.frac[k] = 1.0
            frontier[k] = t
    if not frontier:
        return {
            "error": f"No address or transaction {', '.join(unknown)!s} in case {case_id}.",
            "start": starts,
        }
    categories = db.category_map(case_id)
    stop = set(p.stop_at_categories)
    expanded: set[Key] = set()
    for hop in range(1, p.max_hops + 1):
        if not frontier or st.truncated:
            break
        rows = _hop_rows(db, case_id, frontier, p)
        expanded |= set(frontier)
        bridges = _bridges_for(db, case_id, rows, fwd) if p.follow_bridges else {}
        nxt: dict[Key, datetime | None] = {}
        moved: set[Key] = set()
        for r in rows:
            here: Key = (r["chain"], r["here"])
            there: Key = (r["chain"], r["there"])
            tainted = (r["usd"] or 0.0) * st.frac.get(here, 1.0)
            if tainted < p.min_usd:
                continue
            if len(st.edges) >= p.max_edges:
                st.truncated = True
                break
            moved.add(here)
            edge = _edge(r, hop, tainted, fwd)
            st.edges.append(edge)
            bridge = bridges.get((r["chain"], r["tx_hash"]))
            if bridge is not None:
                st.nodes.setdefault(there, {"chain": there[0], "address": there[1], "hop": hop, "tainted_usd": 0.0,
                                            "first_time": r["block_time"], "bridge_contract": True})  # fmt: skip
                _follow_bridge(st, bridge, edge, hop, tainted, fwd, nxt)
                continue
            cat = categories.get(there)
            node = st.nodes.setdefault(
                there, {"chain": there[0], "address": there[1], "hop": hop, "tainted_usd": 0.0, "first_time": r["block_time"]}
            )  # fmt: skip
            node["tainted_usd"] = round(node["tainted_usd"] + tainted, 2)
            if cat in stop:
                ep = st.endpoints.setdefault(there, {"chain": there[0], "address": there[1], "category": cat, "hop": hop,
                                                      "tainted_usd": 0.0, "first_time": r["block_time"], "evidence": []})  # fmt: skip
                ep["tainted_usd"] = round(ep["tainted_usd"] + tainted, 2)
                if len(ep["evidence"]) < 10:
                    ep["evidence"].append(r["transfer_id"])
                continue
            if there in expanded or there in frontier:
                continue
            prev = nxt.get(there)
            nxt[there] = r["block_time"] if prev is None else min(prev, r["block_time"])
        for k in frontier:
            if k not in moved and k not in st.endpoints:
                st.frontier.append(
                    {"chain": k[0], "address": k[1], "reason": "no_further_movement", "hop": hop - 1}
                )
        if p.taint_model == "haircut":
            _haircut(db, case_id, st, nxt, fwd)
        frontier = nxt
    for k in frontier:
        reason = "edge_cap" if st.truncated else "hop_limit"
        st.frontier.append({"chain": k[0], "address": k[1], "reason": reason, "hop": st.nodes[k]["hop"]})
    return _result(db, case_id, st, starts, p, unknown)


def norm_chain(chain: str | None) -> str | None:
    return chain.strip().lower() if chain else None


def _hop_rows(
    db: CaseDB, case_id: str, frontier: dict[Key, datetime | None], p: TraceParams
) -> list[dict[str, Any]]:
    keys = list(frontier)
    here, there = (
        ("from_address", "to_address") if p.direction == "forward" else ("to_address", "from_address")
    )
    cmp = ">=" if p.direction == "forward" else "<="
    window = ""
    if p.time_window_hours:
        window = (
            f"AND (f.t IS NULL OR t.block_time {'<=' if p.direction == 'forward' else '>='} f.t "
            f"{'+' if p.direction == 'forward' else '-'} to_seconds({int(p.time_window_hours * 3600)}::BIGINT))"
        )
    return db.rows(
        f"""
        WITH f AS (SELECT unnest(?::VARCHAR[]) AS chain, unnest(?::VARCHAR[]) AS address, unnest(?::TIMESTAMP[]) AS t)
        SELECT t.transfer_id, t.chain, t.tx_hash, t.block_time, t.kind, t.{here} AS here, t.{there} AS there,
               t.asset_key, t.amount, t.usd_value AS usd
        FROM transfers t JOIN f ON f.chain = t.chain AND f.address = t.{here}
        WHERE t.case_id = ? AND t.{there} IS NOT NULL AND t.status IS NOT FALSE AND t.amount > 0
          AND (f.t IS NULL OR t.block_time {cmp} f.t) {window}
        ORDER BY t.usd_value DESC NULLS LAST, t.block_time, t.transfer_id
        LIMIT ?
        """,
        [[k[0] for k in keys], [k[1] for k in keys], [frontier[k] for k in keys], case_id, p.max_edges * 4],
    )


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


def _edge(r: dict[str, Any], hop: int, tainted: float, fwd: bool) -> dict[str, Any]:
    src, dst = (r["here"], r["there"]) if fwd else (r["there"], r["here"])
    return {
        "kind": "transfer", "hop": hop, "chain": r["chain"], "from": src, "to": dst, "tx_hash": r["tx_hash"],
        "transfer_id": r["transfer_id"], "time": r["block_time"], "asset_key": r["asset_key"], "amount": r["amount"],
        "usd": r["usd"], "tainted_usd": round(tainted, 2),
    }  # fmt: skip


def _follow_bridge(
    st: _State,
    b: dict[str, Any],
    edge: dict[str, Any],
    hop: int,
    tainted: float,
    fwd: bool,
    nxt: dict[Key, datetime | None],
) -> None:
    if fwd:
        if not b["dst_tx_hash"] or not b["dst_address"]:
            st.frontier.append({"chain": b["src_chain"], "address": b["src_contract"] or edge["to"], "reason": "bridge_unmatched",
                                "bridge_event_id": b["bridge_event_id"], "declared_dst_chain": b["declared_dst_chain"],
                                "hop": hop, "tainted_usd": round(tainted, 2)})  # fmt: skip
            return
        far: Key = (b["dst_chain"], b["dst_address"])
        t = b["dst_time"]
        a_chain, a_addr, b_chain, b_addr = b["src_chain"], edge["to"], b["dst_chain"], b["dst_address"]
    else:
        far = (b["src_chain"], b["src_address"])
        t = b["src_time"]
        a_chain, a_addr, b_chain, b_addr = b["src_chain"], b["src_address"], b["dst_chain"], b["dst_address"]
    st.edges.append(
        {"kind": "bridge", "hop": hop, "bridge_event_id": b["bridge_event_id"], "bridge_name": b["bridge_name"],
         "from_chain": a_chain, "from": a_addr, "to_chain": b_chain, "to": b_addr, "src_tx_hash": b["src_tx_hash"],
         "dst_tx_hash": b["dst_tx_hash"], "time": t, "usd": b["dst_usd"] if fwd else b["src_usd"],
         "tainted_usd": round(tainted, 2), "match_method": b["match_method"], "match_confidence": b["match_confidence"]}
    )  # fmt: skip
    node = st.nodes.setdefault(far, {"chain": far[0], "address": far[1], "hop": hop, "tainted_usd": 0.0, "first_time": t,
                                     "via_bridge": b["bridge_event_id"]})  # fmt: skip
    node["tainted_usd"] = round(node["tainted_usd"] + tainted, 2)
    prev = nxt.get(far)
    nxt[far] = t if prev is None else min(prev, t)


def _haircut(db: CaseDB, case_id: str, st: _State, nxt: dict[Key, datetime | None], fwd: bool) -> None:
    if not nxt:
        return
    keys = list(nxt)
    col = "total_in_usd" if fwd else "total_out_usd"
    rows = db.rows(
        f"""SELECT a.chain, a.address, a.{col} AS total FROM addresses a
        JOIN (SELECT unnest(?::VARCHAR[]) AS chain, unnest(?::VARCHAR[]) AS address) k USING (chain, address)
        WHERE a.case_id = ?""",
        [[k[0] for k in keys], [k[1] for k in keys], case_id],
    )
    totals = {(r["chain"], r["address"]): r["total"] or 0.0 for r in rows}
    for k in keys:
        total = totals.get(k) or 0.0
        tainted = st.nodes[k]["tainted_usd"]
        st.frac[k] = min(1.0, tainted / total) if total > 0 else 1.0


def _result(
    db: CaseDB, case_id: str, st: _State, starts: list[str], p: TraceParams, unknown: list[str]
) -> dict[str, Any]:
    keys = list(st.nodes) + [k for k in st.endpoints if k not in st.nodes]
    labels = db.labels_for(case_id, keys)
    nodes = []
    for k in keys:
        n = dict(st.nodes.get(k) or {"chain": k[0], "address": k[1]})
        best = (labels.get(k) or {}).get("best")
        n["label"] = best["label"] if best else None
        n["category"] = best["category"] if best else None
        n["label_ids"] = [lab["label_id"] for lab in (labels.get(k) or {}).get("labels", [])]
        n["endpoint"] = k in st.endpoints
        n["id"] = f"{k[0]}:{k[1]}"
        nodes.append(n)
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for k, ep in st.endpoints.items():
        best = (labels.get(k) or {}).get("best")
        ep = {**ep, "label": best["label"] if best else None, "entity": best["entity"] if best else None}
        by_cat.setdefault(ep["category"], []).append(ep)
    for eps in by_cat.values():
        eps.sort(key=lambda e: -e["tainted_usd"])
    edges = aggregate_edges(st.edges)
    for e in edges:  # graph ids ("chain:address") so a panel can draw without knowing the chains
        e["source"] = f"{e.get('from_chain') or e['chain']}:{e['from']}"
        e["target"] = f"{e.get('to_chain') or e['chain']}:{e['to']}"
    out = {
        "case_id": case_id,
        "start": starts,
        "params": p.to_dict(),
        "nodes": nodes,
        "edges": edges,
        "endpoints": by_cat,
        "frontier": st.frontier,
        "totals": {
            "nodes": len(nodes),
            "edges": len(edges),
            "transfers_followed": len(st.edges),
            "endpoint_usd_by_category": {
                c: round(sum(e["tainted_usd"] for e in eps), 2) for c, eps in by_cat.items()
            },
        },
        "truncated": st.truncated,
    }
    if unknown:
        out["not_found"] = unknown
    return jsonable(out)  # type: ignore[no-any-return]


def aggregate_edges(raw: list[dict[str, Any]], sample: int = 5) -> list[dict[str, Any]]:
    """One edge per (kind, chain, from, to, bridge event): counts, USD and sample evidence."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in raw:
        chain = e.get("chain") or e.get("from_chain")
        key = (e["kind"], chain, e["from"], e.get("to_chain"), e["to"], e.get("bridge_event_id"))
        agg = out.get(key)
        if agg is None:
            agg = out[key] = {
                k: v
                for k, v in e.items()
                if k not in ("transfer_id", "tx_hash", "amount", "usd", "tainted_usd", "time")
            }
            agg.update({"chain": chain, "transfers": 0, "usd": 0.0, "tainted_usd": 0.0, "first_time": e["time"],
                        "last_time": e["time"], "tx_hashes": [], "transfer_ids": []})  # fmt: skip
        agg["transfers"] += 1
        agg["usd"] = round(agg["usd"] + float(e.get("usd") or 0), 2)
        agg["tainted_usd"] = round(agg["tainted_usd"] + float(e.get("tainted_usd") or 0), 2)
        agg["hop"] = min(agg["hop"], e["hop"])
        if e["time"] is not None:
            agg["first_time"] = min(agg["first_time"] or e["time"], e["time"])
            agg["last_time"] = max(agg["last_time"] or e["time"], e["time"])
        h = e.get("tx_hash") or e.get("src_tx_hash")
        if h and len(agg["tx_hashes"]) < sample and h not in agg["tx_hashes"]:
            agg["tx_hashes"].append(h)
        if e.get("transfer_id") and len(agg["transfer_ids"]) < sample:
            agg["transfer_ids"].append(e["transfer_id"])
    return sorted(out.values(), key=lambda a: (a["hop"], -a["tainted_usd"]))
