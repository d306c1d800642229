"""The case commands' tables: triage rows, raw flags and trace endpoints, drawn with rich.

Every string from the evidence (labels, entity names, addresses) passes through ``shown``:
a label is attacker-written and must not drive the terminal or rich markup."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rich.table import Table

from tahrix_lab.flow.textsafe import shown


def short(address: Any) -> str:
    """0x3373…3eb2: enough to tell addresses apart in a table (--json has them whole)."""
    s = str(address or "")
    return s[:6] + "…" + s[-4:] if len(s) > 14 else s


def usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.0f}"


def native(amount: Decimal | str | None, symbol: str | None) -> str:
    """40,200 ETH / 848.5 ETH: grouped, trailing zeros dropped, never rounded away."""
    if amount is None:
        return f"? {shown(symbol or '')}".strip()
    d = Decimal(str(amount)).normalize()
    whole, _, frac = f"{d:f}".partition(".")
    text = f"{int(whole):,}" + (f".{frac}" if frac else "") if whole.lstrip("-").isdigit() else f"{d:f}"
    return f"{text} {shown(symbol or '', multiline=False)}"


def _words(name: str) -> str:
    return name.replace("_", " ")


def _subject(row: dict[str, Any]) -> str:
    s = row["subject"]
    if s["kind"] == "entity":
        return shown(s["entity"], multiline=False) + (
            f" ({s['members']} addresses)" if s["members"] > 1 else ""
        )
    if s["kind"] == "cohort":
        return f"{s['members']} addresses"
    return short(s["address"])


def _label(row: dict[str, Any]) -> str:
    s = row["subject"]
    if s["kind"] == "cohort":  # its pattern is the flag types column; say whom they share
        via = ", ".join(dict.fromkeys(short(c.split(":")[0]) for c in s["counterparty"]))
        return f"cohort via {via}" if via else "cohort"
    label = shown(s.get("label") or "", multiline=False)
    role = row.get("role") or ""
    return " · ".join(x for x in (label, role) if x)


def _chains(addresses: list[str]) -> str:
    return ", ".join(sorted({a.split(":", 1)[0] for a in addresses}))


def triage_table(triage: dict[str, Any], amounts: dict[str, float | None]) -> Table:
    """One line per triage row, in triage's order; ``amounts`` from ``case.readout.triage_usd``."""
    table = Table(title=f"Triage of {shown(triage['case_id'])}: {triage['count']} rows from "
                  f"{triage['flags_total']} flags", title_justify="left")  # fmt: skip
    for name, justify in (("severity", "left"), ("flag types", "left"), ("subject", "left"), ("label", "left"),
                          ("chain", "left"), ("amount (USD)", "right"), ("flags", "right")):  # fmt: skip
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in triage["rows"]:
        table.add_row(
            row["severity"],
            ", ".join(_words(t) for t in row["flag_types"]),
            _subject(row),
            _label(row),
            _chains(row["addresses"]),
            usd(amounts.get(row["row_id"])),
            str(row["flag_count"]),
        )
    counts = " · ".join(f"{n} {s}" for s, n in triage["by_severity"].items() if n) or "No flags"
    table.caption = (
        f"{counts}. Amounts are the USD the flags state (per address the largest, never summed twice)."
    )
    return table


def raw_table(case_id: str, flags: list[dict[str, Any]], stated: dict[str, float | None]) -> Table:
    table = Table(title=f"Raw flags of {shown(case_id)}: {len(flags)}", title_justify="left")
    for name in ("flag", "severity", "type", "chain", "address", "status", "amount (USD)", "from (UTC)"):
        table.add_column(name, overflow="fold", justify="right" if name == "amount (USD)" else "left")
    for f in flags:
        table.add_row(
            f["flag_id"],
            f["severity"],
            _words(f["flag_type"]),
            f["chain"] or "",
            short(f["address"]),
            f["status"],
            usd(stated.get(f["flag_id"])),
            str(f.get("window_start") or "")[:16].replace("T", " "),
        )
    return table


def trace_table(trace: dict[str, Any], received: dict[str, list[dict[str, Any]]]) -> Table:
    """The endpoints by category: what reached each along the traced flows, native and USD."""
    s = trace["summary"]
    start = s.get("start") or {}
    whence = ", ".join(start.get("roles") or []) or ", ".join(short(a) for a in start.get("given") or [])
    table = Table(title=f"Endpoints of the trace of {shown(trace['case_id'])} from {shown(whence)}",
                  title_justify="left")  # fmt: skip
    for name in ("category", "endpoint", "label", "hop", "received", "USD", "tainted USD", "transfers"):
        right = name in ("hop", "USD", "tainted USD", "transfers")
        table.add_column(name, overflow="fold", justify="right" if right else "left")
    for category, endpoints in trace["endpoints"].items():
        for i, e in enumerate(endpoints):
            assets = received.get(f"{e['chain']}:{e['address']}", [])
            table.add_row(
                _words(category) if i == 0 else "",
                f"{e['chain']}:{short(e['address'])}",
                shown(e.get("label") or "", multiline=False),
                str(e.get("hop", "")),
                "\n".join(native(a["amount"], a["symbol"]) for a in assets) or "–",
                "\n".join(usd(a["usd"]) for a in assets) or "–",
                usd(e.get("tainted_usd")),
                str(sum(a["transfers"] for a in assets)),
            )
        table.add_section()
    table.caption = (
        f"traced {usd(s.get('traced_usd'))} · at endpoints {usd(s.get('endpoints_usd'))} · "
        f"held {usd(s.get('held_usd'))} · frontier {usd(s.get('frontier_usd'))}. "
        "Received: whole transfers along the traced flows; tainted: the tracer's share of them."
    )
    return table
