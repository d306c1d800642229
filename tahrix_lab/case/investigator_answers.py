"""What the offline investigator says, written from the real tool results.

Each function turns one tool's result into a few Markdown lines an analyst
can check: native amounts beside USD, counts that are counts (the mixer
"received $131.7M in 402 deposits"), full hashes and flag ids to cite.
"""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.tools.headlines import CATEGORY_NAMES, amount, usd

NATIVE = {"ethereum": "ETH", "arbitrum": "ETH", "optimism": "ETH", "base": "ETH", "bsc": "BNB", "polygon": "POL",
          "avalanche_c": "AVAX", "tron": "TRX", "bitcoin": "BTC"}  # fmt: skip
ENDPOINT_NOUN = {"mixing_service": "deposit", "exchange": "deposit", "otc_desk": "transfer",
                 "instant_exchanger": "transfer", "defi_bridge": "bridge deposit"}  # fmt: skip


def plural(n: int, noun: str) -> str:
    return (
        f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}{'es' if noun.endswith(('s', 'x', 'ch', 'sh')) else 's'}"
    )


def and_list(items: list[str]) -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def role_phrase(roles: list[str]) -> str:
    """'the perpetrator and suspect addresses', 'the seed address'."""
    roles = sorted(set(roles), key=lambda r: ("perpetrator", "suspect", "seed", "victim").index(r) if r in (
        "perpetrator", "suspect", "seed", "victim") else 9)  # fmt: skip
    if not roles:
        return "the given addresses"
    return f"the {and_list(roles)} address{'es' if len(roles) > 1 else ''}"


def asset_amount(value: Any, asset_key: str | None, symbol: str | None = None) -> str | None:
    """48,000 ETH; a token without a known symbol is named by its contract."""
    if symbol is None and asset_key:
        chain, _, contract = asset_key.partition(":")
        symbol = NATIVE.get(chain) if contract == "native" else f"of token {contract[:6]}…{contract[-4:]}"
    return amount(value, symbol)


def received(transfers: list[dict[str, Any]], limit: int = 3) -> str:
    """'48,000 ETH ($156.6M) in tx 0x…, 21,500,000 USDC ($21.5M) in tx 0x…'."""
    bits = []
    for t in transfers[:limit]:
        native = asset_amount(t.get("amount"), t.get("asset_key"), t.get("symbol")) or "an unknown amount"
        bits.append(f"{native} ({usd(t.get('usd_value'))}) in tx {t.get('tx_hash')}")
    return and_list(bits)


def theft_line(transfers: list[dict[str, Any]], who: str, address: str) -> str | None:
    if not transfers:
        return None
    source = transfers[0].get("counterparty_label") or transfers[0].get("counterparty")
    return f"- {who.capitalize()} {address} received {received(transfers, 2)}, from {source}."


def endpoint_lines(trace: dict[str, Any], names: dict[str, str]) -> list[str]:
    summary = trace.get("summary") or {}
    tops = summary.get("top_endpoints") or []
    lines = []
    for cat, total in sorted((summary.get("endpoint_usd_by_category") or {}).items(), key=lambda kv: -kv[1]):
        members = [e for e in tops if e.get("category") == cat]
        if not members:
            continue
        first = members[0]
        n = int(first.get("evidence_count") or 0)
        hashes = first.get("tx_hashes") or []
        kind = CATEGORY_NAMES.get(cat, cat).removesuffix("s").removesuffix(" desk") + (
            " desk" if cat == "otc_desk" else ""
        )
        more = (
            f" ({plural(len(members) - 1, 'more ' + kind + ' endpoint')} shown)" if len(members) > 1 else ""
        )
        lines.append(
            f"- {names.get(cat, cat)}: {usd(total)} in total; the largest, {first['address']} "
            f"({first.get('label') or 'no label'}), received {usd(first.get('tainted_usd'))} in "
            f"{plural(n, ENDPOINT_NOUN.get(cat, 'transfer'))}"
            + (f" (first tx {hashes[0]})" if hashes else "")
            + more
            + "."
        )
    return lines


def trace_lines(trace: dict[str, Any], names: dict[str, str]) -> list[str]:
    s = trace.get("summary") or {}
    params = trace.get("params") or {}
    start = s.get("start") or {}
    return [
        f"- Traced {usd(s.get('traced_usd'))} from {role_phrase(start.get('roles') or [])} within "
        f"{params.get('max_hops')} hops ({params.get('taint_model')} taint): {usd(s.get('endpoints_usd'))} reached "
        f"services, {usd(s.get('held_usd'))} is still held, {usd(s.get('frontier_usd'))} is beyond the hop limit.",
        *endpoint_lines(trace, names),
    ]


def triage_lines(flags: dict[str, Any], limit: int = 3) -> list[str]:
    lines = []
    sev = ", ".join(f"{n} {k}" for k, n in (flags.get("by_severity") or {}).items() if n)
    if flags.get("rows_total") is not None:
        lines.append(f"- The triage has {plural(flags['rows_total'], 'row')} from {plural(flags.get('flags_total') or 0, 'flag')} ({sev}).")  # fmt: skip
    for r in (flags.get("rows") or [])[:limit]:
        f = r["flags"][0] if r.get("flags") else {}
        subject = r.get("subject") or {}
        who = (
            subject.get("address")
            or subject.get("entity")
            or plural(int(subject.get("members") or 0), "address")
        )
        tx = (f.get("tx_hashes") or [None])[0]
        lines.append(
            f"- Triage ({r['severity']}, score {r['score']}): {who}" + (f" [{r['role']}]" if r.get("role") else "")
            + f" — {', '.join(r['flag_types'])}; e.g. flag {f.get('flag_id')}" + (f" (tx {tx})." if tx else ".")
        )  # fmt: skip
    return lines


def raw_flag_lines(flags: dict[str, Any], limit: int = 5) -> list[str]:
    total, shown = flags.get("total") or 0, (flags.get("flags") or [])[:limit]
    more = f"; the first {len(shown)}:" if len(shown) < total else ":"
    lines = [f"- {plural(total, 'flag')} {'matches' if total == 1 else 'match'}{more}"]
    for f in shown:
        lines.append(
            f"  - {f['flag_id']}: {f['flag_type']} ({f['severity']}, score {f['score']}) on {f.get('address') or f.get('chain')}"
        )
    return lines


def address_lines(found: dict[str, Any]) -> list[str]:
    lines = []
    for m in found.get("matches") or []:
        prof = m.get("profile") or {}
        label = (m.get("best_label") or {}).get("label")
        roles = and_list([r["role"] for r in m.get("roles") or []])
        what = label or (f"the case's {roles}" if roles else "no label in the case")
        lines.append(
            f"- {m['chain']} {m['address']} ({what}): received {usd(prof.get('usd_in'))} in {plural(prof.get('n_in') or 0, 'transfer')} "
            f"and sent {usd(prof.get('usd_out'))} in {plural(prof.get('n_out') or 0, 'transfer')}, "
            f"from {prof.get('first_seen')} to {prof.get('last_seen')}."
        )  # fmt: skip
        for c in (m.get("top_counterparties") or [])[:3]:
            arrow = "from" if c["direction"] == "in" else "to"
            lines.append(f"  - {arrow} {c['counterparty']} ({c.get('label') or 'no label'}): {usd(c.get('usd'))} in "
                         f"{plural(c['transfers'], 'transfer')}, e.g. tx {c.get('example_tx')}")  # fmt: skip
        flags = m.get("flags") or []
        if flags:
            lines.append(
                "  - flags: "
                + ", ".join(f"{f['flag_id']} ({f['flag_type']}, {f['severity']})" for f in flags[:5])
            )
    return lines


def transaction_lines(found: dict[str, Any]) -> list[str]:
    lines = []
    for m in found.get("matches") or []:
        tx = m.get("transaction") or {}
        lines.append(f"- tx {tx.get('tx_hash')} on {tx.get('chain')} at {tx.get('block_time')}"
                     + (f", method {tx['method_name']}" if tx.get("method_name") else "") + ":")  # fmt: skip
        for t in (m.get("transfers") or [])[:5]:
            native = asset_amount(t.get("amount"), t.get("asset_key"), t.get("symbol")) or "an unknown amount"
            lines.append(
                f"  - {native} ({usd(t.get('usd_value'))}) from {t.get('from_address')} to {t.get('to_address')}"
            )
        for f in (m.get("flags") or [])[:5]:
            lines.append(f"  - cited by flag {f['flag_id']} ({f['flag_type']}, {f['severity']})")
    return lines


def bridge_lines(found: dict[str, Any], limit: int = 5) -> list[str]:
    rows = found.get("bridge_events") or []
    total = int(found.get("count") or len(rows))
    lines = [f"- {plural(total, 'bridge event')}" + (" (the limit; more match)" if found.get("truncated") else "")
             + (f"; the first {min(limit, len(rows))}:" if rows else ".")]  # fmt: skip
    for b in rows[:limit]:
        src = asset_amount(b.get("src_amount"), b.get("src_asset_key")) or "an unknown amount"
        dst = asset_amount(b.get("dst_amount"), b.get("dst_asset_key"))
        leg = (f"{b.get('dst_chain')} {dst} ({usd(b.get('dst_usd'))}) in tx {b.get('dst_tx_hash')}" if b.get("dst_tx_hash")
               else f"no destination leg yet (declared {b.get('declared_dst_chain')})")  # fmt: skip
        lines.append(f"  - {b['bridge_event_id']} ({b['bridge_name']}, {b.get('status')}): {b.get('src_chain')} {src} "
                     f"({usd(b.get('src_usd'))}) in tx {b.get('src_tx_hash')} → {leg}")  # fmt: skip
    return lines


def overview_lines(overview: dict[str, Any]) -> list[str]:
    case = overview.get("case") or {}
    counts = overview.get("counts") or {}
    tri = overview.get("triage") or {}
    roles = overview.get("addresses_with_roles") or []
    lines = [
        f"- {case.get('case_id')}: {case.get('title')} ({case.get('incident_type')}, {case.get('incident_time')}).",
        f"- {plural(counts.get('transfers') or 0, 'transfer')} in {plural(counts.get('transactions') or 0, 'transaction')}, "
        f"{plural(counts.get('addresses') or 0, 'address')}, {plural(counts.get('labels') or 0, 'label')}; "
        f"the triage has {plural(tri.get('rows') or 0, 'row')} from {plural(tri.get('flags') or 0, 'flag')}.",
    ]  # fmt: skip
    for r in roles[:6]:
        lines.append(
            f"- {r['role']}: {r['chain']} {r['address']}" + (f" ({r['note']})" if r.get("note") else "")
        )
    return lines
