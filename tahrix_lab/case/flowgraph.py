"""The fund-flow graph an analyst reads: a trace result joined with what the case knows.

``flow_graph(db, case_id, trace)`` takes a ``Workspace.trace`` result and adds,
from the case database:

* per edge, the transfers it stands for (hash, time, native amount and asset,
  USD, an explorer link) and their native sums per asset, so an edge reads
  "198.68 ETH · $665K · 2024-04-02" and its USD equals the sum of its rows;
  a bridge edge carries its two legs (source and destination transaction);
* per node, the name an analyst uses (the label, else the case role, else
  "hop N"), the label's source and confidence, the case's in/out totals for the
  address and its flags.

``onward_starts`` says where "trace onward" starts: a node's own address, or,
for a bridge contract, the destination legs of the bridge events the graph's
flows went into (never the contract's other, unrelated outflows).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.db import CaseDB, jdict
from tahrix_lab.case.taxonomy import normalise_category

CASE_ROLES = ("perpetrator", "suspect", "victim", "seed")
SWAP_CATEGORIES = frozenset({"defi_dex"})
BRIDGE_CATEGORIES = frozenset({"defi_bridge"})
MAX_EDGE_TXS = 200  # rows listed per edge; the sums always cover every transfer
MAX_NODE_FLAGS = 20
EXPLORERS = {
    "ethereum": "https://etherscan.io",
    "bsc": "https://bscscan.com",
    "polygon": "https://polygonscan.com",
    "arbitrum": "https://arbiscan.io",
    "optimism": "https://optimistic.etherscan.io",
    "avalanche_c": "https://snowtrace.io",
    "base": "https://basescan.org",
    "tron": "https://tronscan.org/#",
    "bitcoin": "https://mempool.space",
}
Key = tuple[str, str]


def explorer_url(chain: str | None, kind: str, value: str | None) -> str | None:
    """A block explorer page for a transaction (``kind="tx"``) or an address, or None for an unknown chain."""
    base = EXPLORERS.get(chain or "")
    if base is None or not value:
        return None
    if chain == "tron":
        return f"{base}/{'transaction' if kind == 'tx' else 'address'}/{value}"
    return f"{base}/{kind}/{value}"


# -- text -----------------------------------------------------------------------------
def compact_usd(usd: float | None) -> str:
    """$4.2M, $665K, $950: what fits on an edge (the drawer shows the exact figure)."""
    if usd is None:
        return "$?"
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(usd) >= size:
            return f"${usd / size:.1f}{suffix}".replace(".0" + suffix, suffix)
    return f"${usd:,.0f}"


def native_text(amount: Decimal | str | None) -> str:
    """1,200 / 198.68 / 0.0012: grouped, at most four significant decimals, never rescaled."""
    if amount is None:
        return "?"
    d = Decimal(str(amount))
    if d == d.to_integral() or abs(d) >= 1000:
        return f"{d:,.0f}"
    if abs(d) >= 1:
        return f"{d:,.2f}".rstrip("0").rstrip(".")
    return format(d.normalize(), "f")[:8].rstrip("0").rstrip(".") or "0"


def edge_text(edge: dict[str, Any]) -> str:
    """The edge line: "1,200 ETH · $4.2M · 2024-03-14", and " · ×N transfers" when it stands for several."""
    bits = [f"{native_text(a['amount'])} {a['symbol']}" for a in edge.get("amounts", [])[:2]]
    if len(edge.get("amounts", [])) > 2:
        bits[-1] += f" +{len(edge['amounts']) - 2} assets"
    if edge.get("usd") is not None:
        bits.append(compact_usd(edge["usd"]))
    first, last = str(edge.get("first_time") or "")[:10], str(edge.get("last_time") or "")[:10]
    if first:
        bits.append(first if last in ("", first) else f"{first} → {last}")
    if (edge.get("transfers") or 0) > 1:
        bits.append(f"×{edge['transfers']} transfers")
    return " · ".join(bits)


# -- the graph ------------------------------------------------------------------------
def flow_graph(db: CaseDB, case_id: str, trace: dict[str, Any]) -> dict[str, Any]:
    """The panel's payload (nodes, edges, assets, summary) for one trace result."""
    keys: list[Key] = [(n["chain"], n["address"]) for n in trace.get("nodes", [])]
    categories = {k: (normalise_category(n.get("category") or "")[0] or n.get("category"))
                  for k, n in zip(keys, trace.get("nodes", []), strict=True)}  # fmt: skip
    roles = _roles(db, case_id, keys)
    labels = db.labels_for(case_id, keys)
    flags = _flags(db, case_id, keys)
    totals = _totals(db, case_id, keys)
    symbols = _symbols(db)
    nodes = [
        _node(n, roles.get(k), (labels.get(k) or {}).get("best"), flags.get(k, []), totals.get(k, {}))
        for k, n in zip(keys, trace.get("nodes", []), strict=True)
    ]
    edges = []
    for i, e in enumerate(trace.get("edges", [])):
        if e.get("kind") == "bridge":
            edge = _bridge_edge(db, case_id, e, symbols)
        else:
            edge = _transfer_edge(db, case_id, e, symbols)
            ends = {categories.get(_key(e["source"])), categories.get(_key(e["target"]))}
            if ends & SWAP_CATEGORIES:
                edge["kind"] = "swap"
        edge["id"] = f"e{i}:{e['source']}>{e['target']}"
        edge["text"] = edge_text(edge)
        edges.append(edge)
    assets = sorted({a["symbol"] for e in edges for a in e["amounts"]})
    return jdict({"case_id": case_id, "nodes": nodes, "edges": edges, "assets": assets,
                  "summary": trace.get("summary", {})})  # fmt: skip


def _key(node_id: str) -> Key:
    chain, _, address = node_id.partition(":")
    return chain, address


def _node(
    n: dict[str, Any], role: str | None, best: dict[str, Any] | None, flags: list[dict[str, Any]],
    totals: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    hop = n.get("hop")
    category = n.get("category")
    role = role or ("start" if n.get("role") == "start" else None)
    if n.get("bridge_contract") and not category:
        category = "defi_bridge"
    name = n.get("label") or role or (f"hop {hop}" if hop is not None else "address")
    return {
        "id": n["id"], "chain": n["chain"], "address": n["address"], "name": name, "label": n.get("label"),
        "category": category, "role": role, "hop": hop, "tainted_usd": n.get("tainted_usd"),
        "held_usd": n.get("held_usd"), "endpoint": bool(n.get("endpoint")), "first_time": n.get("first_time"),
        "bridge_contract": bool(n.get("bridge_contract")) or category in BRIDGE_CATEGORIES,
        "via_bridge": n.get("via_bridge"),
        "label_source": best.get("source") if best else None,
        "label_confidence": best.get("confidence") if best else None,
        "label_entity": best.get("entity") if best else None,
        "flags": flags[:MAX_NODE_FLAGS], "flag_count": len(flags),
        "explorer": explorer_url(n["chain"], "address", n["address"]), **totals,
    }  # fmt: skip


def _roles(db: CaseDB, case_id: str, keys: list[Key]) -> dict[Key, str]:
    rank = {r: i for i, r in enumerate(CASE_ROLES)}
    out: dict[Key, str] = {}
    for r in db.rows("SELECT chain, address, role FROM case_addresses WHERE case_id = ?", [case_id]):
        k = (r["chain"], r["address"])
        if k in out and rank.get(out[k], 99) <= rank.get(r["role"], 99):
            continue
        out[k] = r["role"]
    want = set(keys)
    return {k: v for k, v in out.items() if k in want}


def _flags(db: CaseDB, case_id: str, keys: list[Key]) -> dict[Key, list[dict[str, Any]]]:
    if not keys:
        return {}
    rows = db.rows(
        "SELECT f.flag_id, f.flag_type, f.severity, f.score, f.status, f.chain, f.address FROM anomaly_flags f "
        "JOIN (SELECT unnest($2::VARCHAR[]) AS chain, unnest($3::VARCHAR[]) AS address) k "
        "ON k.chain = f.chain AND k.address = f.address WHERE f.case_id = $1 "
        "ORDER BY f.chain, f.address, f.score DESC NULLS LAST, f.flag_id",
        [case_id, [k[0] for k in keys], [k[1] for k in keys]],
    )
    out: dict[Key, list[dict[str, Any]]] = {}
    for r in rows:
        k = (r.pop("chain"), r.pop("address"))
        out.setdefault(k, []).append(r)
    return out


def _totals(db: CaseDB, case_id: str, keys: list[Key]) -> dict[Key, dict[str, Any]]:
    """Everything the case holds in and out of each address (not only what the trace followed)."""
    if not keys:
        return {}
    out: dict[Key, dict[str, Any]] = {k: {"in_usd": None, "out_usd": None, "in_count": 0, "out_count": 0}
                                      for k in keys}  # fmt: skip
    for side, col in (("in", "to_address"), ("out", "from_address")):
        rows = db.rows(
            f"SELECT t.chain, t.{col} AS address, count(*) AS n, sum(t.usd_value) AS usd FROM transfers t "
            "JOIN (SELECT unnest($2::VARCHAR[]) AS chain, unnest($3::VARCHAR[]) AS address) k "
            f"ON k.chain = t.chain AND k.address = t.{col} WHERE t.case_id = $1 AND t.status IS NOT FALSE "
            f"GROUP BY t.chain, t.{col}",
            [case_id, [k[0] for k in keys], [k[1] for k in keys]],
        )
        for r in rows:
            entry = out[(r["chain"], r["address"])]
            entry[f"{side}_count"] = r["n"]
            entry[f"{side}_usd"] = None if r["usd"] is None else round(float(r["usd"]), 2)
    return out


def _symbols(db: CaseDB) -> dict[str, str]:
    return {
        r["asset_key"]: r["symbol"] or r["asset_key"] for r in db.rows("SELECT asset_key, symbol FROM assets")
    }


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "")).replace(tzinfo=None)


def _transfer_edge(db: CaseDB, case_id: str, e: dict[str, Any], symbols: dict[str, str]) -> dict[str, Any]:
    """The transfers a trace edge aggregates: those from → to on its chain in its time span that the
    tracer follows (settled, non-zero). Where the span holds more (movements cut off under ``min_usd``),
    the edge's own sample hashes are kept first, then the largest, up to its count."""
    rows = db.rows(
        "SELECT t.transfer_id, t.tx_hash, t.block_time, t.asset_key, t.amount, t.usd_value AS usd FROM transfers t "
        "WHERE t.case_id = ? AND t.chain = ? AND t.from_address = ? AND t.to_address = ? "
        "AND t.block_time BETWEEN ? AND ? AND t.status IS NOT FALSE AND t.amount_raw <> '0'",
        [case_id, e["chain"], e["from"], e["to"], _time(e.get("first_time")), _time(e.get("last_time"))],
    )
    want = int(e.get("transfers") or len(rows))
    if len(rows) > want:
        sample = set(e.get("transfer_ids") or [])
        rows.sort(key=lambda r: (r["transfer_id"] not in sample, -(r["usd"] or 0.0)))
        rows = rows[:want]
    rows.sort(key=lambda r: (r["block_time"], r["transfer_id"]))
    txs = [{"tx_hash": r["tx_hash"], "transfer_id": r["transfer_id"], "chain": e["chain"], "time": r["block_time"],
            "symbol": symbols.get(r["asset_key"], r["asset_key"]), "amount": r["amount"], "usd": r["usd"],
            "explorer": explorer_url(e["chain"], "tx", r["tx_hash"])} for r in rows]  # fmt: skip
    known = [r["usd"] for r in rows if r["usd"] is not None]
    return {
        "kind": "transfer", "source": e["source"], "target": e["target"], "chain": e["chain"],
        "hop": e.get("hop"), "transfers": len(rows), "usd": round(sum(known), 2) if known else None,
        "tainted_usd": e.get("tainted_usd"), "unpriced_transfers": len(rows) - len(known),
        "first_time": e.get("first_time"), "last_time": e.get("last_time"), "amounts": _amounts(txs),
        "txs": txs[:MAX_EDGE_TXS], "txs_total": len(txs),
    }  # fmt: skip


def _amounts(txs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Native sums per asset; an amount of unknown size makes that asset's sum unknown (None)."""
    sums: dict[str, Decimal | None] = {}
    for t in txs:
        cur = sums.get(t["symbol"], Decimal(0))
        sums[t["symbol"]] = None if cur is None or t["amount"] is None else cur + Decimal(str(t["amount"]))
    return [{"symbol": s, "amount": a} for s, a in sums.items()]


def _bridge_edge(db: CaseDB, case_id: str, e: dict[str, Any], symbols: dict[str, str]) -> dict[str, Any]:
    b = db.one("SELECT * FROM bridge_events WHERE case_id = ? AND bridge_event_id = ?",
               [case_id, e["bridge_event_id"]]) or {}  # fmt: skip
    return {**bridge_edge(b, symbols, e["source"], e["target"]), "hop": e.get("hop"),
            "tainted_usd": e.get("tainted_usd")}  # fmt: skip


def bridge_edge(b: dict[str, Any], symbols: dict[str, str], source: str, target: str) -> dict[str, Any]:
    """A bridge crossing as an edge: its two legs as the transactions, the destination amount as the edge's."""
    legs = [("src", "sent"), ("dst", "received")]
    txs = [{"tx_hash": b.get(f"{leg}_tx_hash"), "chain": b.get(f"{leg}_chain"), "time": b.get(f"{leg}_time"),
            "symbol": symbols.get(b.get(f"{leg}_asset_key") or "", b.get(f"{leg}_asset_key")),
            "amount": b.get(f"{leg}_amount"), "usd": b.get(f"{leg}_usd"), "leg": what,
            "explorer": explorer_url(b.get(f"{leg}_chain"), "tx", b.get(f"{leg}_tx_hash"))}
           for leg, what in legs if b.get(f"{leg}_tx_hash")]  # fmt: skip
    far = txs[-1] if txs else {"symbol": None, "amount": None, "usd": None, "time": None}
    return {
        "kind": "bridge", "source": source, "target": target, "chain": b.get("src_chain"),
        "to_chain": b.get("dst_chain"), "bridge_event_id": b.get("bridge_event_id"),
        "bridge_name": b.get("bridge_name"), "match_method": b.get("match_method"),
        "match_confidence": b.get("match_confidence"), "transfers": 1, "usd": far["usd"],
        "unpriced_transfers": int(far["usd"] is None), "first_time": far["time"], "last_time": far["time"],
        "amounts": [{"symbol": far["symbol"], "amount": far["amount"]}] if far["symbol"] else [],
        "txs": txs, "txs_total": len(txs),
    }  # fmt: skip


# -- trace onward -----------------------------------------------------------------------
def onward_starts(
    db: CaseDB, case_id: str, node: dict[str, Any], graph: dict[str, Any] | None = None
) -> tuple[list[str], str | None, list[dict[str, Any]]]:
    """(starts, chain, bridge events) to trace onward from ``node``.

    An ordinary address starts from itself. A bridge contract (a pool or router)
    starts from the destination transactions of the bridge events that the
    graph's flows went into, so the trace follows the matched legs and never the
    pool's other outflows; those events are returned to draw the crossing.
    """
    chain, address = node.get("chain"), node.get("address")
    if not chain or not address:
        chain, address = _key(str(node["id"]))
    category = normalise_category(node.get("category") or "")[0]
    if not (node.get("bridge_contract") or category in BRIDGE_CATEGORIES):
        return [address], chain, []
    node_id = f"{chain}:{address}"
    into = {t["tx_hash"] for e in (graph or {}).get("edges", []) if e.get("target") == node_id
            for t in e.get("txs", [])} | {h for e in (graph or {}).get("edges", []) if e.get("target") == node_id
                                          for h in e.get("tx_hashes", [])}  # fmt: skip
    events = db.rows(
        "SELECT * FROM bridge_events WHERE case_id = ? AND src_chain = ? "
        "AND src_tx_hash IN (SELECT unnest(?::VARCHAR[])) ORDER BY src_time, bridge_event_id",
        [case_id, chain, sorted(into)],
    )
    if not events:
        raise UserFacingError(
            f"No bridge deposit into {address} is in this graph, so there is no matched leg to follow; "
            "tracing the contract itself would follow other people's funds."
        )
    matched = [b for b in events if b["dst_tx_hash"] and b["dst_address"]]
    if not matched:
        ids = ", ".join(b["bridge_event_id"] for b in events)
        raise UserFacingError(
            f"The far leg of {ids} is not in the case (no matched destination transaction)."
        )
    return [b["dst_tx_hash"] for b in matched], None, matched


def bridge_edges(db: CaseDB, node_id: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The crossings ``onward_starts`` followed, drawn from the contract to each destination address."""
    symbols = _symbols(db)
    out = []
    for b in events:
        edge = bridge_edge(b, symbols, node_id, f"{b['dst_chain']}:{b['dst_address']}")
        edge["id"] = f"bridge:{b['bridge_event_id']}"
        edge["text"] = edge_text(edge)
        out.append(jdict(edge))
    return out


__all__ = [
    "bridge_edges",
    "compact_usd",
    "edge_text",
    "explorer_url",
    "flow_graph",
    "native_text",
    "onward_starts",
]
