"""The flags panel's rows: the triage roll-up (the rows the assistant sees) in an analyst's words.

``flag_rows(db, case_id)`` is ``triage(db, case_id)`` with, per row and per
raw flag, a label, the chains, an amount, a time span, a status and a one-line
explanation written from the flag's evidence. Row order and membership are
triage's, unchanged.

A row's ``amount_usd`` is, per member address, the largest USD figure among
that address's flags, summed over the members: flags of one address describe
the same money from several angles, so adding them would count it twice.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tahrix_lab.case.db import CaseDB, jdict
from tahrix_lab.case.detectors import triage

USD_FIELDS = ("usd", "usd_out", "missend_usd", "usd_in")


def _usd(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "?"
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= size:
            return f"${x / size:.1f}{suffix}"
    return f"${x:,.0f}"


def _short(a: Any) -> str:
    s = str(a or "")
    return s[:6] + "…" + s[-4:] if len(s) > 14 else s


def _list(v: Any) -> str:
    return ", ".join(str(x).replace("_", " ") for x in v) if isinstance(v, list) else str(v or "")


def _exposure(what: str, ev: dict[str, Any]) -> str:
    if ev.get("exposure") == "indirect":
        share = ev.get("share_of_inflow", ev.get("share_of_outflow"))
        pct = f"{float(share):.0%} of its flow, " if isinstance(share, int | float) else ""
        return f"Indirect {what} exposure, {ev.get('hops', '?')} hops away: {pct}{_usd(ev.get('usd'))}"
    n = ev.get("transfers")
    count = f"{n} transfer{'s' if n != 1 else ''}, " if isinstance(n, int) else ""
    return f"Direct {what} exposure ({_list(ev.get('directions'))}): {count}{_usd(ev.get('usd'))}"


def explain(flag_type: str, ev: dict[str, Any]) -> str:
    """One line an analyst reads, from the flag's own evidence (nothing is guessed)."""
    g = ev.get
    texts = {
        "peel_chain": lambda: f"Peel chain of {g('length', '?')} steps, a little peeled off at each",
        "mixer_exposure": lambda: _exposure("mixer", ev),
        "mixer_bulk_deposit": lambda: (
            f"{g('deposits', '?')} deposits into mixer {_short(g('mixer'))} "
            f"(up to {g('max_deposits_in_window', '?')} in one window), {_usd(g('usd'))}"
        ),
        "chain_hopping": lambda: (
            f"Hopped chains {' → '.join(((g('hops') or [{}])[0]).get('route') or g('chains') or [])}"
            f" within {g('min_gap_minutes', '?')} min, {_usd(g('usd'))}"
        ),
        "structuring": lambda: (
            f"{g('count_in_window', '?')} transfers just under {_usd(g('threshold_usd'))} "
            f"to {len(g('recipients') or [])} recipients, {_usd(g('usd'))}"
        ),
        "repeated_amount": lambda: (
            f"{g('total', '?')} transfers of exactly {g('amount', '?')} "
            f"to {_short(g('counterparty'))}, {_usd(g('usd'))}"
        ),
        "dusting": lambda: f"Dust sent to {g('recipients', '?')} addresses",
        "address_poisoning": lambda: (
            f"Look-alike of {_list([_short(a) for a in g('imitated') or []])}; "
            f"{_usd(g('missend_usd'))} mis-sent to it"
        ),
        "fresh_address_funding": lambda: (
            f"Fresh address funded by {g('funder_label') or _short(g('funder'))}, {_usd(g('usd'))}"
        ),
        "pass_through": lambda: (
            f"Passed {_usd(g('usd_out'))} straight through (median hold {g('median_hold_minutes', '?')} min)"
        ),
        "sanctions_exposure": lambda: _exposure("sanctions", ev),
    }
    make = texts.get(flag_type)
    return make() if make else flag_type.replace("_", " ").capitalize()


def _amount(ev: dict[str, Any]) -> float | None:
    found = [float(ev[k]) for k in USD_FIELDS if isinstance(ev.get(k), int | float)]
    return max(found) if found else None


def _status(statuses: list[str]) -> str:
    counts = Counter(statuses)
    if len(counts) == 1:
        return next(iter(counts))
    return " · ".join(f"{n} {s}" for s, n in counts.most_common())


def _label(row: dict[str, Any], first: dict[str, Any]) -> str:
    s = row["subject"]
    if s["kind"] == "entity":
        return str(s["entity"])
    if s["kind"] == "cohort":
        return f"{s['members']} addresses ({str(s['pattern']).replace('_', ' ').replace(',', ', ')})"
    return str(s.get("label") or row.get("role") or _short(s.get("address")))


def flag_rows(db: CaseDB, case_id: str) -> dict[str, Any]:
    """Triage's rows with the panel's columns; every raw flag keeps its own line and evidence summary."""
    out = triage(db, case_id)
    raw = {
        r["flag_id"]: r
        for r in db.rows(
            "SELECT flag_id, evidence, window_start, window_end, score FROM anomaly_flags WHERE case_id = ?",
            [case_id],
        )
    }
    for row in out["rows"]:
        groups = [row["flags"], *(rel["flags"] for rel in row.get("related", []))]
        for flags in groups:
            for f in flags:
                r = raw.get(f["flag_id"]) or {}
                ev = json.loads(r["evidence"]) if r.get("evidence") else {}
                f.update(explanation=explain(f["flag_type"], ev), amount_usd=_amount(ev), score=r.get("score"),
                         first_time=r.get("window_start"), last_time=r.get("window_end"))  # fmt: skip
        flags = row["flags"]
        per_address: dict[tuple[str, str], float] = {}
        for f in flags:
            if f["amount_usd"] is not None:
                k = (f["chain"], f["address"])
                per_address[k] = max(per_address.get(k, 0.0), f["amount_usd"])
        starts = [str(f["first_time"]) for f in flags if f["first_time"] is not None]
        ends = [str(f["last_time"]) for f in flags if f["last_time"] is not None]
        more = len({f["flag_type"] for f in flags}) - 1
        row.update(
            label=_label(row, flags[0]),
            chains=sorted({f["chain"] for f in flags if f["chain"]}),
            amount_usd=round(sum(per_address.values()), 2) if per_address else None,
            first_time=min(starts) if starts else None,
            last_time=max(ends) if ends else None,
            status=_status([f["status"] for f in flags]),
            explanation=flags[0]["explanation"]
            + (f" (+{more} more kind{'s' if more > 1 else ''})" if more else ""),
        )
    return jdict(out)


__all__ = ["explain", "flag_rows"]
