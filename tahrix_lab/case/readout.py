"""Amounts beside the triage rows and the trace endpoints, for reading them without the notebook.

Nothing here changes what triage or the tracer decided; it only adds the figures an
analyst asks for next, from the case's own evidence:

* ``triage_usd(db, case_id, rows)``: per triage row, the USD its flags state. Flags of one
  address describe the same money from several angles (mixer exposure and the bulk deposit
  behind it), so per address the largest figure counts, and the row sums its addresses:
  never the same money twice. ``None`` when no flag states one.
* ``endpoint_amounts(db, case_id, trace)``: per endpoint of a ``Workspace.trace`` result, what
  reached it along the traced flows, per asset in native units with its USD, beside the
  tracer's tainted USD. An edge's transfers are read back from ``transfers`` (from → to on its
  chain within its time span); when their count differs from the edge's, its native amount is
  unknown (``None``) rather than a guess. Nothing is rescaled: native amounts are whole
  transfers; the tainted share is the tracer's USD figure.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from tahrix_lab.case.db import CaseDB

USD_FIELDS = ("usd", "usd_out", "usd_in", "missend_usd")


def flag_usd(evidence: dict[str, Any]) -> float | None:
    found = [float(v) for k in USD_FIELDS if isinstance(v := evidence.get(k), int | float)]
    return max(found) if found else None


def triage_usd(db: CaseDB, case_id: str, rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """``{row_id: usd}`` for triage rows (see the module docstring)."""
    stated = {
        r["flag_id"]: flag_usd(json.loads(r["evidence"]) if r["evidence"] else {})
        for r in db.rows("SELECT flag_id, evidence FROM anomaly_flags WHERE case_id = ?", [case_id])
    }
    out: dict[str, float | None] = {}
    for row in rows:
        per_address: dict[tuple[str, str], float] = {}
        for f in row["flags"]:
            usd = stated.get(f["flag_id"])
            if usd is not None:
                key = (f["chain"], f["address"])
                per_address[key] = max(per_address.get(key, 0.0), usd)
        out[row["row_id"]] = round(sum(per_address.values()), 2) if per_address else None
    return out


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).replace(tzinfo=None)


def _edge_amount(db: CaseDB, case_id: str, edge: dict[str, Any]) -> Decimal | None:
    """The native sum of an edge's transfers, or None when they cannot be told apart exactly."""
    if edge.get("kind") != "transfer" or edge.get("asset_key") is None:
        return None
    rows = db.rows(
        "SELECT amount FROM transfers WHERE case_id = ? AND chain = ? AND from_address = ? AND to_address = ? "
        "AND asset_key = ? AND block_time BETWEEN ? AND ? AND status IS NOT FALSE AND amount_raw <> '0'",
        [case_id, edge["chain"], edge["from"], edge["to"], edge["asset_key"],
         _time(edge.get("first_time")), _time(edge.get("last_time"))],
    )  # fmt: skip
    if len(rows) != edge.get("transfers") or any(r["amount"] is None for r in rows):
        return None
    return sum((Decimal(str(r["amount"])) for r in rows), Decimal(0))


def endpoint_amounts(db: CaseDB, case_id: str, trace: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``{"chain:address": [{asset_key, symbol, amount, usd, transfers}, …]}`` for each endpoint."""
    symbols = {r["asset_key"]: r["symbol"] for r in db.rows("SELECT asset_key, symbol FROM assets")}
    ends = {f"{e['chain']}:{e['address']}" for eps in trace.get("endpoints", {}).values() for e in eps}
    out: dict[str, dict[str, dict[str, Any]]] = {end: {} for end in ends}
    for edge in trace.get("edges", []):
        if edge.get("target") not in ends:
            continue
        asset = str(edge.get("asset_key") or edge.get("kind"))
        amount = _edge_amount(db, case_id, edge)
        cur = out[edge["target"]].setdefault(
            asset, {"asset_key": edge.get("asset_key"), "symbol": symbols.get(asset) or asset,
                    "amount": Decimal(0), "usd": None, "transfers": 0},
        )  # fmt: skip
        cur["amount"] = None if cur["amount"] is None or amount is None else cur["amount"] + amount
        if edge.get("usd") is not None:  # unknown stays unknown: a sum of the known, None if none
            cur["usd"] = round((cur["usd"] or 0.0) + float(edge["usd"]), 2)
        cur["transfers"] += int(edge.get("transfers") or 0)
    return {end: sorted(assets.values(), key=lambda a: -(a["usd"] or 0.0)) for end, assets in out.items()}


__all__ = ["endpoint_amounts", "flag_usd", "triage_usd"]
