"""One line per tool result, written by the tool that knows what its figures mean.

Each case tool's result carries ``headline``: a short sentence built from the
result itself (counts, totals, the biggest findings) before it is paged, so
every surface (the notebook card, the service page, the terminal) shows the
same line and none has to guess from the shape of the JSON. The key stays in
the result the model reads too: it is one line, and it is true.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

Headline = Callable[[dict[str, Any], dict[str, Any]], str]

CATEGORY_NAMES = {
    "mixing_service": "mixer", "exchange": "exchanges", "otc_desk": "OTC desks",
    "instant_exchanger": "instant exchangers", "defi_bridge": "bridges (far leg unknown)",
    "payment_processor": "payment processors", "gambling": "gambling", "sanction": "sanctioned",
}  # fmt: skip
SEVERITY_ORDER = ("critical", "high", "medium", "low", "info")


def usd(value: Any) -> str:
    """$167.1M, $6.6M, $202.4k, $950; unknown stays "unpriced" (never $0)."""
    if value is None:
        return "unpriced"
    n = float(value)
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"${n / size:.1f}{unit}"
    return f"${n:,.0f}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def short(value: str | None) -> str:
    text = str(value or "?")
    return text[:6] + "…" + text[-4:] if len(text) > 16 else text


def amount(value: Any, symbol: str | None) -> str | None:
    """A native amount as the analyst reads it: 48,000 ETH, 0.5 BTC (``None`` when unknown)."""
    if value is None:
        return None
    n = float(value)
    text = f"{n:,.0f}" if n >= 1000 or n == int(n) else f"{n:,.4f}".rstrip("0").rstrip(".")
    return f"{text} {symbol or '?'}"


def severities(items: list[dict[str, Any]]) -> str:
    by = Counter(str(i.get("severity")) for i in items)
    return ", ".join(f"{by[s]} {s}" for s in SEVERITY_ORDER if by.get(s))


# -- one function per tool ----------------------------------------------------------------------
def case_overview(result: dict[str, Any], args: dict[str, Any]) -> str:
    counts = result.get("counts") or {}
    tri = result.get("triage") or {}
    roles = result.get("addresses_with_roles") or []
    sev = ", ".join(f"{n} {s}" for s, n in (tri.get("by_severity") or {}).items() if n)
    return (
        f"{(result.get('case') or {}).get('case_id', 'case')}: {count(counts.get('transfers') or 0, 'transfer')}, "
        f"{count(counts.get('addresses') or 0, 'address', 'addresses')}, {count(len(roles), 'role address', 'role addresses')}"
        f" · triage {count(tri.get('rows') or 0, 'row')} from {count(tri.get('flags') or 0, 'flag')}"
        + (f" ({sev})" if sev else "")
    )


def lookup_address(result: dict[str, Any], args: dict[str, Any]) -> str:
    matches = result.get("matches") or []
    bits = []
    for m in matches[:2]:
        prof = m.get("profile") or {}
        who = (
            (m.get("best_label") or {}).get("label")
            or ", ".join(r["role"] for r in m.get("roles") or [])
            or "no label"
        )
        bits.append(
            f"{m['chain']} {short(m['address'])} ({who}): in {usd(prof.get('usd_in'))} in {count(prof.get('n_in') or 0, 'transfer')}, "
            f"out {usd(prof.get('usd_out'))} in {count(prof.get('n_out') or 0, 'transfer')}, {count(len(m.get('flags') or []), 'flag')}"
        )  # fmt: skip
    more = f" (+{len(matches) - 2} more chains)" if len(matches) > 2 else ""
    return " · ".join(bits) + more


def transaction(result: dict[str, Any], args: dict[str, Any]) -> str:
    bits = []
    for m in (result.get("matches") or [])[:2]:
        tx, transfers = m.get("transaction") or {}, m.get("transfers") or []
        moved = [a for t in transfers[:2] if (a := amount(t.get("amount"), t.get("symbol")))]
        priced = [t["usd_value"] for t in transfers if t.get("usd_value") is not None]
        bits.append(
            f"{tx.get('chain')} tx {short(tx.get('tx_hash'))}: {count(len(transfers), 'transfer')}"
            + (f" ({', '.join(moved)}{', …' if len(transfers) > 2 else ''})" if moved else "")
            + (f" {usd(sum(priced))}" if priced else "")
            + f", {count(len(m.get('flags') or []), 'flag')}, {count(len(m.get('bridge_events') or []), 'bridge event')}"
        )
    return " · ".join(bits)


def transfers(result: dict[str, Any], args: dict[str, Any]) -> str:
    rows = result.get("transfers") or []
    priced = [r["usd_value"] for r in rows if r.get("usd_value") is not None]
    unpriced = len(rows) - len(priced)
    line = f"{count(len(rows), 'transfer')}" + (
        " (limit reached, more match)" if result.get("truncated") else ""
    )
    line += f" · {usd(sum(priced))} priced" if priced else ""
    return line + (f" · {unpriced} unpriced" if unpriced else "")


def trace(result: dict[str, Any], args: dict[str, Any]) -> str:
    s = result.get("summary") or {}
    cats = sorted((s.get("endpoint_usd_by_category") or {}).items(), key=lambda kv: -kv[1])
    ends = result.get("endpoints") or []
    line = f"{usd(s.get('traced_usd'))} traced · {usd(s.get('endpoints_usd'))} reached {count(len(ends), 'endpoint')}"
    if cats:
        line += ": " + ", ".join(
            f"{CATEGORY_NAMES.get(c, c.replace('_', ' '))} {usd(v)}" for c, v in cats[:4]
        )
    if s.get("held_usd"):
        line += f" · {usd(s['held_usd'])} held"
    if s.get("frontier_usd"):
        line += f" · {usd(s['frontier_usd'])} beyond the hop limit"
    return line


def bridge_events(result: dict[str, Any], args: dict[str, Any]) -> str:
    rows = result.get("bridge_events") or []
    by = Counter(str(r.get("status") or "unknown") for r in rows)
    line = count(len(rows), "bridge event") + (
        " (limit reached, more match)" if result.get("truncated") else ""
    )
    if by:
        line += ": " + ", ".join(f"{n} {s}" for s, n in by.most_common())
    priced = [r["src_usd"] for r in rows if r.get("src_usd") is not None]
    return line + (f" · {usd(sum(priced))} sent" if priced else "")


def bridge_leg(result: dict[str, Any], args: dict[str, Any]) -> str:
    cands = result.get("candidates") or []
    src = result.get("source") or {}
    line = f"{src.get('chain')} {short(src.get('tx_hash'))}: {count(len(cands), 'candidate')}"
    if cands:
        best = max(cands, key=lambda c: c.get("confidence") or 0)
        line += f", best {best.get('dst_chain')} {short(best.get('dst_tx_hash'))} ({best.get('match_method')}, confidence {best.get('confidence')})"
    return line + f" · {count(len(result.get('stored_bridge_events') or []), 'stored bridge event')}"


def detectors(result: dict[str, Any], args: dict[str, Any]) -> str:
    tri = result.get("triage") or {}
    return (
        f"{count(result.get('flags_written') or 0, 'flag')} written by "
        f"{count(len(result.get('by_detector') or {}), 'detector')} · triage {count(tri.get('rows_total') or 0, 'row')}"
    )


def flags(result: dict[str, Any], args: dict[str, Any]) -> str:
    if result.get("view") == "triage":
        rows = result.get("rows") or []
        sev = severities(rows)
        return (
            f"{result.get('count', len(rows))} of {count(result.get('rows_matching') or 0, 'triage row')} shown"
            f" ({result.get('rows_total')} rows from {count(result.get('flags_total') or 0, 'flag')} in all)"
            + (f" · {sev}" if sev else "")
        )
    items = result.get("flags") or []
    sev = severities(items)
    return f"{result.get('count', len(items))} of {count(result.get('total') or 0, 'flag')} shown" + (
        f" · {sev}" if sev else ""
    )


def exposure(result: dict[str, Any], args: dict[str, Any]) -> str:
    res = result.get("results") or []
    found = [r for r in res if r.get("found")]
    line = (
        f"{count(len(res), 'address', 'addresses')} screened against {', '.join(result.get('lists') or [])}"
    )
    if len(found) < len(res):
        line += f" ({len(res) - len(found)} not in the case)"
    if found:
        direct = sum((r.get("direct") or {}).get("usd") or 0 for r in found)
        top = max(r.get("indirect_share") or 0 for r in found)
        line += f" · direct {usd(direct)} · indirect up to {top:.1%}"
    return line


def sql(result: dict[str, Any], args: dict[str, Any]) -> str:
    rows = result.get("rows") or []
    return (
        f"{count(result.get('row_count', len(rows)), 'row')} × {count(len(result.get('columns') or []), 'column')}"
        + (" (limit reached)" if result.get("truncated") else "")
    )


def annotation(result: dict[str, Any], args: dict[str, Any]) -> str:
    if result.get("needs_confirmation"):
        return f"not changed: {args.get('target')} needs the analyst's confirmation"
    return f"{str(result.get('action', 'change')).replace('_', ' ')} {args.get('target')} · audit {result.get('audit_id')}"


def citations(result: dict[str, Any], args: dict[str, Any]) -> str:
    """verify_citations: its own summary line ("14 citations verified · 1 not found")."""
    return str(result["line"])
