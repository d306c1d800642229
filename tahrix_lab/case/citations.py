"""Checking an answer's citations against the case's evidence.

``verify_citations(db, text, case_id)`` finds every citation (``citations_find``)
and looks each up in the case, one batched, parameterised query per kind:

* ``verified``: the evidence holds it; ``match`` is the row (table, key, and the
  fields a reader checks: chain, time, amount, label);
* ``close``: a near miss (one character off, an amount off by more than its
  rounding but within 1 %, the right hash on another chain than the text names,
  a shortened form that fits several values); ``match`` is the row it nearly is;
* ``not_found``: nothing in the case.

Amounts and USD figures are checked against single movements, bridge legs,
per-address totals and the case's reported loss; a figure a tool computed (a
trace's endpoint total) is verified when that tool result is given
(``tool_results``: what the session's tools returned). Nothing else is taken
on the model's word.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from tahrix_lab.case.citations_find import Citation, find_citations
from tahrix_lab.case.citations_index import one_check
from tahrix_lab.case.citations_lookup import (
    lookup_amounts,
    lookup_blocks,
    lookup_ids,
    lookup_shorts,
    lookup_times,
    lookup_values,
)
from tahrix_lab.case.db import CaseDB, jdict

log = logging.getLogger(__name__)

STATUSES = ("verified", "close", "not_found")
CLOSE_FRACTION = Decimal("0.005")  # an amount this near (or one shown unit) is "off by rounding"


def verify_citations(
    db: CaseDB, text: str, case_id: str, *, tool_results: Iterable[tuple[str, Any]] = ()
) -> dict[str, Any]:
    """Every citation of ``text`` checked against case ``case_id``.

    ``tool_results``: ``(tool name, result)`` pairs of the session, for figures a tool computed.
    Returns ``{case_id, counts, line, citations: [...]}`` (citations in order of first mention).
    """
    with db.connection.lease(), one_check(db, case_id):  # one hold of the file, one index check
        return _verify(db, text, case_id, list(tool_results))


def _verify(db: CaseDB, text: str, case_id: str, tool_results: list[tuple[str, Any]]) -> dict[str, Any]:
    symbols = tuple(
        r[0]
        for r in db.cursor().execute("SELECT DISTINCT symbol FROM assets WHERE symbol IS NOT NULL").fetchall()
    )
    found = find_citations(text, symbols)
    by_kind: dict[str, list[Citation]] = {}
    for c in found:
        by_kind.setdefault(c.kind, []).append(c)
    if by_kind.get("tx"):
        lookup_values(db, case_id, "tx", by_kind["tx"])
    if by_kind.get("address"):
        lookup_values(db, case_id, "address", by_kind["address"])
    if by_kind.get("short"):
        lookup_shorts(db, case_id, by_kind["short"])
    if by_kind.get("id"):
        lookup_ids(db, case_id, by_kind["id"])
    if by_kind.get("block"):
        lookup_blocks(db, case_id, by_kind["block"])
    if by_kind.get("time"):
        lookup_times(db, case_id, by_kind["time"])
    figures = [c for c in found if c.kind in ("amount", "usd")]
    if figures:
        lookup_amounts(db, case_id, figures, CLOSE_FRACTION)
        _from_tool_results(db, figures, tool_results)
    counts = {s: sum(1 for c in found if c.status == s) for s in STATUSES}
    return {
        "case_id": case_id,
        "counts": {**counts, "total": len(found)},
        "line": summary_line(counts),
        "citations": [jdict(c.to_dict()) for c in found],
    }


def summary_line(counts: dict[str, int]) -> str:
    """``14 citations verified · 1 close · 1 not found`` (zero parts left out)."""
    total = sum(counts.get(s, 0) for s in STATUSES)
    if total == 0:
        return "no citations"
    bits = [f"{counts.get('verified', 0)} citation{'s' if counts.get('verified', 0) != 1 else ''} verified"]
    if counts.get("close"):
        bits.append(f"{counts['close']} close")
    if counts.get("not_found"):
        bits.append(f"{counts['not_found']} not found")
    return " · ".join(bits)


def with_citations(
    events: Iterable[tuple[str, dict[str, Any]]], db: CaseDB, case_id: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The loop's events, with ``("citations", {...})`` just before the turn's ``done``.

    The answer checked is every text token of the turn (what the reader sees); the
    turn's tool results verify the figures the tools computed. A stopped turn and a
    turn without text get no line; a failing check is logged and the answer goes on.
    """
    text: list[str] = []
    results: list[tuple[str, Any]] = []
    for event, payload in events:
        if event == "token":
            text.append(payload.get("text") or "")
        elif event == "tool_result" and payload.get("status") == "ok":
            results.append((str(payload.get("name")), payload.get("result")))
        elif event == "done" and payload.get("stop_reason") != "cancelled" and "".join(text).strip():
            try:
                yield "citations", verify_citations(db, "".join(text), case_id, tool_results=results)
            except Exception:  # the answer matters more than its check
                log.exception("could not check the citations of an answer in case %s", case_id)
        yield event, payload


# -- figures computed by tools ---------------------------------------------------------------------
def _from_tool_results(db: CaseDB, figures: list[Citation], results: list[tuple[str, Any]]) -> None:
    """A figure not verified by a row may be a total a tool computed from the rows."""
    todo = [c for c in figures if c.status != "verified"]
    if not todo or not results:
        return
    keys_of: dict[str, set[str]] = {}
    for key, sym in db.cursor().execute("SELECT asset_key, upper(symbol) FROM assets").fetchall():
        keys_of.setdefault(sym, set()).add(key)
    leaves = [leaf for name, result in results for leaf in _numbers(name, result, "", None)]
    for c in todo:
        assert c.number is not None and c.unit is not None
        half = c.unit / 2
        for tool, path, value, asset in leaves:
            is_usd = "usd" in path.lower()
            if c.kind == "usd" and not is_usd:
                continue
            if c.kind == "amount" and (
                is_usd or asset is None or asset not in keys_of.get(c.symbol or "", set())
            ):
                continue
            if abs(value - c.number) <= half:
                c.status, c.note = "verified", f"computed by {tool}"
                c.match = {"table": "tool_result", "tool": tool, "path": path, "value": float(value)}
                break


def _numbers(
    tool: str, value: Any, path: str, asset: str | None
) -> Iterable[tuple[str, str, Decimal, str | None]]:
    """Numeric leaves of a tool result, with their path and the asset named in their object."""
    if isinstance(value, dict):
        here = value.get("asset_key") if isinstance(value.get("asset_key"), str) else asset
        if isinstance(value.get("symbol"), str) and here is None:
            here = "symbol:" + value["symbol"]
        for k, v in value.items():
            yield from _numbers(tool, v, f"{path}.{k}" if path else str(k), here)
    elif isinstance(value, list):
        for i, v in enumerate(value[:2000]):
            yield from _numbers(tool, v, f"{path}[{i}]", asset)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield tool, path, Decimal(str(value)), asset
    elif isinstance(value, str) and value.replace(".", "", 1).isdigit() and len(value) < 40:
        yield tool, path, Decimal(value), asset


__all__ = ["STATUSES", "summary_line", "verify_citations", "with_citations"]
