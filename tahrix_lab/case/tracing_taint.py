"""Taint models for the tracer: how the taint that reached an address is shared among what leaves it.

Whatever the model says, no address passes on more than reached it (the
conservation cap in ``allocate``) and no movement carries more than its USD.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tahrix_lab.case.db import CaseDB

if TYPE_CHECKING:
    from tahrix_lab.case.tracing import Arrival, Key, State, TraceParams

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - block times are naive UTC


def allocate(
    db: CaseDB, case_id: str, st: State, here: Key, arr: Arrival, out: list[dict[str, Any]], p: TraceParams,
    ledger: list[dict[str, Any]] | None,
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
        received = _received_usd(db, case_id, here, p.direction)
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


def _received_usd(db: CaseDB, case_id: str, k: Key, direction: str) -> float:
    """Everything an address received (sent, backward) that moved and has a price: the haircut base."""
    col, other = ("to_address", "from_address") if direction == "forward" else ("from_address", "to_address")
    v = db.scalar(
        f"SELECT sum(usd_value) FROM transfers WHERE case_id = ? AND chain = ? AND {col} = ? AND status IS NOT FALSE "
        f"AND {other} IS DISTINCT FROM {col}",
        [case_id, k[0], k[1]],
    )
    return float(v or 0.0)


def fifo_ledgers(db: CaseDB, case_id: str, keys: list[Key]) -> dict[Key, list[dict[str, Any]]]:
    """Every priced movement in and out of each address, oldest first."""
    if not keys:
        return {}
    rows = db.rows(
        """WITH k AS (SELECT unnest(?::VARCHAR[]) AS chain, unnest(?::VARCHAR[]) AS address)
        SELECT k.chain, k.address, t.transfer_id, t.tx_hash, t.block_time, t.usd_value AS usd,
               t.to_address = k.address AS is_in
        FROM transfers t JOIN k ON k.chain = t.chain AND (t.to_address = k.address OR t.from_address = k.address)
        WHERE t.case_id = ? AND t.status IS NOT FALSE AND t.usd_value IS NOT NULL AND t.from_address IS DISTINCT FROM t.to_address
        ORDER BY t.block_time, NOT (t.to_address = k.address), t.transfer_id""",
        [[k[0] for k in keys], [k[1] for k in keys], case_id],
    )
    out: dict[Key, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["chain"], r["address"]), []).append(r)
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
