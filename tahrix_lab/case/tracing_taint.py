"""Taint models for the tracer: how the taint that reached an address is shared among what leaves it.

Whatever the model says, no address passes on more than reached it (the
conservation cap in ``allocate``) and no movement carries more than its USD.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tahrix_lab.case.tracing_index import TraceIndex
    from tahrix_lab.case.tracing_types import Arrival, Key, State, TraceParams

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - block times are naive UTC


def allocate(
    st: State, here: Key, arr: Arrival, out: list[dict[str, Any]], p: TraceParams,
    ledger: list[dict[str, Any]] | None, received: float,
) -> list[tuple[dict[str, Any], float | None]]:  # fmt: skip
    """(movement, taint USD or None when unknown) for the movements out of ``here``; never more than arrived."""
    if not out:
        return []
    if math.isinf(arr.usd):  # a start address: everything it sent is what is traced
        st.traced_usd += sum(r["usd"] for r in out if r["usd"] is not None)
        return [(r, r["usd"]) for r in out]
    priced = [r for r in out if r["usd"] is not None]
    total = sum(r["usd"] for r in priced)
    if p.taint_model == "fifo" and ledger is not None:
        share = _fifo_shares(ledger, st.fifo_in.get(here, {}), {r["transfer_id"] for r in priced}, arr)
        raw = {r["transfer_id"]: share.get(r["transfer_id"], 0.0) for r in priced}
    elif p.taint_model == "haircut":
        frac = min(1.0, arr.usd / received) if received else 1.0
        raw = {r["transfer_id"]: r["usd"] * frac for r in priced}
    else:
        frac = min(1.0, arr.usd / total) if total else 0.0
        raw = {r["transfer_id"]: r["usd"] * frac for r in priced}
    spent = sum(raw.values())
    scale = min(1.0, arr.usd / spent) if spent else 0.0  # the conservation cap, whatever the model said
    alloc: list[tuple[dict[str, Any], float | None]] = []
    for r in out:
        if r["usd"] is None:
            if p.follow_unpriced:
                alloc.append((r, None))
        elif arr.usd > 0 and raw[r["transfer_id"]] * scale > 0:
            alloc.append((r, min(r["usd"], raw[r["transfer_id"]] * scale)))
        elif arr.usd == 0 and arr.unknown and p.follow_unpriced:
            alloc.append((r, None))  # only unpriced taint arrived: how much of this is tainted is unknown
    return alloc


def _moves(ix: TraceIndex, keys: list[Key]) -> list[dict[str, Any]]:
    """Every priced movement that happened in or out of the keys, each once."""
    cols = "t.transfer_id, t.chain, t.tx_hash, t.block_time, t.usd_value AS usd, t.from_address, t.to_address"
    where = (
        "t.status IS NOT FALSE AND t.usd_value IS NOT NULL AND t.from_address IS DISTINCT FROM t.to_address"
    )
    names = [f"{c}|{a}" for c, a in keys]
    rows = {
        r["transfer_id"]: r
        for col in ("to_address", "from_address")
        for r in ix.fetch(col, names, cols, where)
    }
    return list(rows.values())


def received_usd(ix: TraceIndex, keys: list[Key], direction: str) -> dict[Key, float]:
    """The haircut base: all an address received (sent, backward) that moved and has a price."""
    col = "to_address" if direction == "forward" else "from_address"
    want = set(keys)
    out: dict[Key, float] = {}
    for r in _moves(ix, keys):
        k = (r["chain"], r[col])
        if k in want:
            out[k] = out.get(k, 0.0) + r["usd"]
    return out


def fifo_ledgers(ix: TraceIndex, keys: list[Key]) -> dict[Key, list[dict[str, Any]]]:
    """Every priced movement in and out of each address, oldest first (inflows first at one time)."""
    want = set(keys)
    out: dict[Key, list[dict[str, Any]]] = {}
    for r in _moves(ix, keys):
        for col, is_in in (("to_address", True), ("from_address", False)):
            k = (r["chain"], r[col])
            if k in want:
                out.setdefault(k, []).append({**r, "is_in": is_in})
    for ledger in out.values():
        ledger.sort(key=lambda r: (r["block_time"], not r["is_in"], r["transfer_id"]))
    return out


def _fifo_shares(
    ledger: list[dict[str, Any]], tainted_in: dict[str, float], wanted: set[str], arr: Arrival
) -> dict[str, float]:
    """Tainted USD in each outgoing movement when value leaves first in, first out. Taint that came by a
    bridge (no inflow of this address carries it) is one pure lot at the time it arrived."""
    lots: list[list[float]] = []  # [usd left, tainted usd left]
    out: dict[str, float] = {}
    tainted_in = dict(tainted_in)
    matched = sum(tainted_in.get(r["transfer_id"], 0.0) for r in ledger if r["is_in"])
    bridged = max(0.0, arr.usd - matched)
    for r in ledger:  # taint that crossed a bridge rides the destination leg's inflow
        if bridged > 0 and r["is_in"] and r["tx_hash"] in arr.txs and r["transfer_id"] not in tainted_in:
            tainted_in[r["transfer_id"]] = take = min(r["usd"], bridged)
            bridged -= take
    if bridged > 0:
        ledger = sorted([*ledger, {"transfer_id": "", "block_time": arr.t, "usd": bridged, "is_in": True, "bridged": True}],
                        key=lambda r: (r["block_time"] is not None, r["block_time"] or _EPOCH, not r["is_in"]))  # fmt: skip
    for r in ledger:
        if r.get("bridged"):
            lots.append([r["usd"], r["usd"]])
            continue
        if r["is_in"]:
            tainted = min(r["usd"], tainted_in.get(r["transfer_id"], 0.0))
            lots.append([r["usd"], tainted])
            continue
        need, got = r["usd"], 0.0
        while need > 1e-9 and lots:
            lot = lots[0]
            take = min(need, lot[0])
            t = lot[1] * take / lot[0] if lot[0] else 0.0
            lot[0] -= take
            lot[1] -= t
            got += t
            need -= take
            if lot[0] <= 1e-9:
                lots.pop(0)
        if r["transfer_id"] in wanted:
            out[r["transfer_id"]] = got
    return out
