"""Fund tracing over one case: hop-by-hop SQL, value conserved, bridges followed, services as endpoints.

Taint is USD that left the start. Each movement is followed at most once per
trace, and what an address passes on never exceeds what reached it:

* ``poison`` — every later movement out of a tainted address is followed; the
  taint that reached it is spread over them in proportion to their USD;
* ``haircut`` — each movement out carries the tainted share of everything the
  address received (the rest of the taint stays there, ``held``);
* ``fifo`` — first in, first out over the address's own history (forward only).

Where value goes is accounted for: endpoints (services in ``stop_at_categories``,
a bridge whose far leg is unknown, a DEX where the trail ends), the frontier
(hop limit, edge cap), ``held`` (taint that stayed at an address) and
``cut_off`` (movements under ``min_usd``). Movements without a price are
followed too (``follow_unpriced``), marked ``unpriced`` and counted in no USD
figure. Each hop is one parameterised query over the frontier.
"""

from __future__ import annotations

import math
from typing import Any

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.taxonomy import normalise_category
from tahrix_lab.case.tracing_hops import EVIDENCE_CAP as EVIDENCE_CAP
from tahrix_lab.case.tracing_hops import SWAP_CATEGORIES as SWAP_CATEGORIES
from tahrix_lab.case.tracing_hops import take_hop
from tahrix_lab.case.tracing_index import TraceIndex
from tahrix_lab.case.tracing_result import aggregate_edges, build_result
from tahrix_lab.case.tracing_types import DEFAULT_STOP, Arrival, Key, State, TraceParams


def resolve_start(
    db: CaseDB, case_id: str, start: str, chain: str | None, direction: str, ix: TraceIndex | None = None
) -> list[tuple[Key, Arrival]]:
    """Start nodes: a transaction's recipients (senders backward) with what it moved, or an address (all it sent)."""
    start = start.strip()
    ix = ix or TraceIndex(db, case_id)
    txs = [
        r
        for r in ix.fetch(
            "tx_hash",
            sorted({start, start.lower()}),
            "t.chain, t.transfer_id, t.tx_hash, t.from_address, t.to_address, t.block_time, t.usd_value AS usd",
            "t.status IS NOT FALSE",
        )
        if r["tx_hash"] in (start, start.lower()) and (chain is None or r["chain"] == chain)
    ]
    if txs:
        out: dict[Key, Arrival] = {}
        for r in sorted(txs, key=lambda r: r["transfer_id"]):
            addr = r["to_address"] if direction == "forward" else r["from_address"]
            if addr is not None:
                out.setdefault((r["chain"], addr), Arrival(None)).add(
                    r["block_time"], r["usd"], r["tx_hash"], r["transfer_id"]
                )
        return list(out.items())
    rows = db.rows(
        "SELECT chain, address FROM addresses WHERE case_id = ? AND (address = ? OR address = lower(?)) "
        "AND (? IS NULL OR chain = ?) ORDER BY chain",
        [case_id, start, start, chain, chain],
    )
    return [((r["chain"], r["address"]), Arrival(None, usd=math.inf)) for r in rows]


def trace_funds(
    db: CaseDB,
    case_id: str,
    starts: list[str],
    *,
    chain: str | None = None,
    params: TraceParams | None = None,
    start_kind: str | None = None,
    roles: list[str] | None = None,
) -> dict[str, Any]:
    p = params or TraceParams()
    st = State()
    ix = TraceIndex(db, case_id)
    frontier: dict[Key, Arrival] = {}
    unknown: list[str] = []
    kinds: set[str] = set()
    for s in starts:
        found = resolve_start(db, case_id, s, norm_chain(chain), p.direction, ix)
        if not found:
            unknown.append(s)
        for k, arr in found:
            kinds.add("address" if math.isinf(arr.usd) else "transaction")
            node = st.node(k, 0, arr.t, role="start")
            if not math.isinf(arr.usd):
                node["tainted_usd"] += arr.usd
                st.traced_usd += arr.usd
                st.fifo_in.setdefault(k, {}).update(arr.tainted_in)
            prev = frontier.get(k)
            frontier[k] = arr if prev is None else _merge(prev, arr)
    if not frontier:
        return {
            "error": f"No address or transaction {', '.join(unknown)!s} in case {case_id}.",
            "start": starts,
        }
    categories = {k: normalise_category(v)[0] or v for k, v in db.category_map(case_id).items()}
    stop = set(p.stop_at_categories)
    for hop in range(1, p.max_hops + 1):
        if not frontier or st.truncated:
            break
        frontier = take_hop(db, case_id, ix, st, frontier, hop, p, categories, stop)
    for k, arr in frontier.items():
        usd = None if math.isinf(arr.usd) else round(arr.usd, 2)
        st.frontier.append({"chain": k[0], "address": k[1], "reason": "edge_cap" if st.truncated else "hop_limit",
                            "hop": st.nodes[k]["hop"], "tainted_usd": usd, "unpriced": arr.unknown})  # fmt: skip
    start = {"given": starts, "kind": start_kind or "+".join(sorted(kinds)), "roles": roles or []}
    return build_result(db, case_id, st, start, p, unknown)


TRACE_ROLES = (("perpetrator", "suspect"), ("seed",))


def role_starts(
    db: CaseDB, case_id: str, roles: list[str] | tuple[str, ...] | None = None
) -> tuple[list[str], list[str]]:
    """The addresses to trace a case from, and the roles they came from (``roles`` given, else the
    first of perpetrator+suspect, then seed, that the intake has)."""
    for group in [tuple(roles)] if roles else TRACE_ROLES:
        found = db.rows(
            "SELECT address, role FROM case_addresses WHERE case_id = ? AND list_contains(?, role) ORDER BY role, address",
            [case_id, list(group)],
        )
        if found:
            return [r["address"] for r in found], sorted({r["role"] for r in found})
    wanted = ", ".join(roles or [r for g in TRACE_ROLES for r in g])
    raise UserFacingError(
        f"Case {case_id} has no {wanted} address to trace from; give addresses or tx hashes."
    )


def norm_chain(chain: str | None) -> str | None:
    return chain.strip().lower() if chain else None


def _merge(a: Arrival, b: Arrival) -> Arrival:
    a.t = b.t if a.t is None or (b.t is not None and b.t < a.t) else a.t
    a.usd += b.usd
    a.unknown |= b.unknown
    a.txs |= b.txs
    for k, v in b.tainted_in.items():
        a.tainted_in[k] = a.tainted_in.get(k, 0.0) + v
    return a


__all__ = ["DEFAULT_STOP", "TRACE_ROLES", "TraceParams", "aggregate_edges", "role_starts", "trace_funds"]
