"""A trace's result: the summary first (what was traced, where it ended, what is unaccounted), then detail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tahrix_lab.case.db import CaseDB, jsonable
from tahrix_lab.case.labels.library import cite

if TYPE_CHECKING:
    from tahrix_lab.case.tracing_types import State, TraceParams

TOP_ENDPOINTS = 8


def build_result(
    db: CaseDB, case_id: str, st: State, start: dict[str, Any], p: TraceParams, unknown: list[str]
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
        n["label_source"] = best["source"] if best else None
        n["endpoint"] = k in st.endpoints
        n["id"] = f"{k[0]}:{k[1]}"
        nodes.append(n)
    by_cat: dict[str, list[dict[str, Any]]] = {}
    flat = []
    for k, ep in st.endpoints.items():
        found = labels.get(k) or {}
        best = found.get("best")
        # where the attribution comes from: every label with its source, version and validity, and
        # whether they disagree (never a silent pick between sources)
        ep = {**ep, "label": best["label"] if best else None, "entity": best["entity"] if best else None,
              "source": best["source"] if best else None, "attribution": [cite(x) for x in found.get("labels", [])],
              "label_conflict": bool(found.get("conflict"))}  # fmt: skip
        by_cat.setdefault(ep["category"], []).append(ep)
        flat.append(ep)
    for eps in by_cat.values():
        eps.sort(key=lambda e: -e["tainted_usd"])
    flat.sort(key=lambda e: (-e["tainted_usd"], e["chain"], e["address"]))
    edges = aggregate_edges(st.edges)
    for e in edges:  # graph ids ("chain:address") so a panel can draw without knowing the chains
        e["source"] = f"{e.get('from_chain') or e['chain']}:{e['from']}"
        e["target"] = f"{e.get('to_chain') or e['chain']}:{e['to']}"
    endpoint_usd = sum(e["tainted_usd"] for e in flat)
    frontier_usd = sum(
        f.get("tainted_usd") or 0.0 for f in st.frontier if f["reason"] in ("hop_limit", "edge_cap")
    )
    summary = {
        "start": {**start, "resolved": [f"{k[0]}:{k[1]}" for k, n in st.nodes.items() if n.get("role") == "start"]},
        "traced_usd": round(st.traced_usd, 2),
        "endpoints_usd": round(endpoint_usd, 2),
        "endpoint_usd_by_category": {c: round(sum(e["tainted_usd"] for e in eps), 2) for c, eps in by_cat.items()},
        "frontier_usd": round(frontier_usd, 2),
        "held_usd": round(st.held_usd, 2),
        "cut_off_usd": round(st.cut_off_usd, 2),
        "unpriced": {"movements_followed": st.unpriced_edges, "unknown_decimals": st.unknown_amount_edges,
                     "note": "unpriced movements are followed and count in no USD figure"},
        "top_endpoints": [{k: e.get(k) for k in ("category", "chain", "address", "label", "source", "tainted_usd", "hop",
                                                   "evidence_count", "tx_hashes", "unpriced_transfers")}
                          | {"tx_hashes": e["tx_hashes"][:5]} for e in flat[:TOP_ENDPOINTS]],
        "accounting": "traced_usd = endpoints_usd + frontier_usd + held_usd + cut_off_usd (each movement once)",
    }  # fmt: skip
    out = {
        "case_id": case_id,
        "start": start["given"],
        "summary": summary,
        "params": p.to_dict(),
        "endpoints": by_cat,
        "frontier": st.frontier,
        "totals": {
            "nodes": len(nodes),
            "edges": len(edges),
            "transfers_followed": len(st.followed),
            "endpoint_usd_by_category": summary["endpoint_usd_by_category"],
        },
        "truncated": st.truncated,
        "edges": edges,
        "nodes": nodes,
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
                if k not in ("transfer_id", "tx_hash", "amount", "usd", "tainted_usd", "time", "unpriced")
            }
            agg.update({"chain": chain, "transfers": 0, "usd": None, "tainted_usd": None, "unpriced_transfers": 0,
                        "first_time": e["time"], "last_time": e["time"], "tx_hashes": [], "transfer_ids": []})  # fmt: skip
        agg["transfers"] += 1
        for k in (
            "usd",
            "tainted_usd",
        ):  # unknown stays unknown: a sum of known values, None if none is known
            if e.get(k) is not None:
                agg[k] = round((agg[k] or 0.0) + float(e[k]), 2)
        agg["unpriced_transfers"] += int(bool(e.get("unpriced")))
        agg["hop"] = min(agg["hop"], e["hop"])
        if e["time"] is not None:
            agg["first_time"] = min(agg["first_time"] or e["time"], e["time"])
            agg["last_time"] = max(agg["last_time"] or e["time"], e["time"])
        h = e.get("tx_hash") or e.get("src_tx_hash")
        if h and len(agg["tx_hashes"]) < sample and h not in agg["tx_hashes"]:
            agg["tx_hashes"].append(h)
        if e.get("transfer_id") and len(agg["transfer_ids"]) < sample:
            agg["transfer_ids"].append(e["transfer_id"])
    return sorted(out.values(), key=lambda a: (a["hop"], -(a["tainted_usd"] or 0.0)))
