"""The assistant checks its own draft: every hash, address, amount, time and id looked up in the case."""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.citations import verify_citations
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.tools import headlines
from tahrix_lab.case.tools.common import register


@register(
    "verify_citations",
    "Check a draft answer before sending it: finds every transaction hash, address (full or shortened like "
    "0x3373…3eb2), amount with its asset or USD, block, time and flag/label/bridge-event id in `text` and looks "
    "each up in the case. Each comes back verified (with the evidence row), close (one character off, an amount "
    "off by more than rounding, the right hash on another chain) or not_found. Fix or drop what is not verified. "
    "Figures a tool computed (a trace's totals) are checked against rows only, so they may show as not_found here.",
    {"properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200_000,
                             "description": "The draft answer, Markdown as it will be sent."}},
     "required": ["text"]},
    [{"text": "The attacker 0x33736dcca7f0c99e80b5244a4767e1fa79823eb2 drained 48,000 ETH (flag FLG-60401e4871)."}],
    detail=("problems", "verified"),
    headline=headlines.citations,
)  # fmt: skip
def verify_citations_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    result = verify_citations(ctx.db, args["text"], ctx.case_id)
    cits = [{k: v for k, v in c.items() if k != "spans"} for c in result["citations"]]
    return {
        "case_id": ctx.case_id,
        "line": result["line"],
        "counts": result["counts"],
        "problems": [c for c in cits if c["status"] != "verified"],
        "verified": cits_short(c for c in cits if c["status"] == "verified"),
    }


def cits_short(cits: Any) -> list[dict[str, Any]]:
    """Verified citations as the model needs them: what was cited and the row's key fields."""
    keep = (
        "table",
        "chain",
        "tx_hash",
        "address",
        "time",
        "amount",
        "symbol",
        "label",
        "role",
        "flag_type",
        "value",
    )
    return [{"text": c["text"], "kind": c["kind"], "match": {k: v for k, v in (c["match"] or {}).items() if k in keep}}
            for c in cits]  # fmt: skip
