"""Read-only SQL and the one annotating (writing) tool."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.errors import ToolRetry
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.sqlguard import SQLRefused
from tahrix_lab.case.sqlguard import run_sql as _run_sql
from tahrix_lab.case.tools import headlines
from tahrix_lab.case.tools.common import CHAINS, DATA_NOTE, register


# -- 11. SQL -------------------------------------------------------------------------------
@register(
    "run_sql",
    "Read-only SQL: exactly one SELECT over the case tables (transfers, transactions, utxo_io, bridge_events, labels, "
    "anomaly_flags, addresses, case_addresses, cases, assets, prices, chains, notes), which show only this "
    "session's case. Writes, DDL, "
    "several statements, file/URL functions, COPY, ATTACH and PRAGMA are refused. Rows capped by limit; stopped after 10 s.",
    {
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 8000},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 200},
        },
        "required": ["query"],
    },
    [{"query": "SELECT flag_type, count(*) AS n FROM anomaly_flags WHERE case_id = 'CASE-001' GROUP BY flag_type"},
     {"query": "SELECT chain, count(*) FROM transfers GROUP BY chain", "limit": 10}],
    detail=('rows',),
    headline=headlines.sql,
)  # fmt: skip
def run_sql_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    try:
        result = _run_sql(ctx.db, args["query"], limit=int(args.get("limit", 200)), case_id=ctx.case_id)
    except SQLRefused as exc:
        raise ToolRetry(str(exc)) from None
    result["data_note"] = DATA_NOTE
    return result


# -- 12. annotate (writes) -----------------------------------------------------------------
@register(
    "annotate",
    "Change case data (writes; recorded in the audit log with before/after so it can be reversed). Actions: "
    "add_label (target address; payload label, category, optional entity/abuse), set_role (target address; payload "
    "role, optional note), confirm_flag / dismiss_flag (target flag id; payload optional note), note (any target; "
    "payload text). A change to a flag another analyst already decided waits for the analyst: they see your call "
    "with Approve / Deny, and you get the result or their reason.",
    {
        "properties": {
            "target_kind": {"type": "string", "enum": ["address", "flag", "bridge_event"]},
            "target": {"type": "string", "minLength": 1, "description": "Flag id, bridge event id, or address (with chain)."},
            "chain": {"type": "string", "enum": CHAINS},
            "action": {"type": "string", "enum": ["add_label", "set_role", "confirm_flag", "dismiss_flag", "note"]},
            "payload": {"type": "object", "properties": {
                "label": {"type": "string", "maxLength": 200}, "category": {"type": "string", "maxLength": 50},
                "entity": {"type": "string", "maxLength": 200}, "abuse": {"type": "string", "maxLength": 50},
                "role": {"type": "string", "maxLength": 50}, "note": {"type": "string", "maxLength": 2000},
                "text": {"type": "string", "maxLength": 4000}},
                "additionalProperties": False},
        },
        "required": ["target_kind", "target", "action"],
    },
    [{"target_kind": "flag", "target": "FLG-0123456789", "action": "confirm_flag", "payload": {"note": "matches the peel pattern"}},
     {"target_kind": "address", "target": "0x1111111111111111111111111111111111111111", "chain": "ethereum", "action": "add_label",
      "payload": {"label": "Suspected cash-out wallet", "category": "perpetrator"}}],
    writes=True,
    headline=headlines.annotation,
)  # fmt: skip
def annotate(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    from tahrix_lab.case.annotations import apply_annotation

    # On the analyst's approval the write is theirs: audited under their name.
    return apply_annotation(ctx, args, analyst=ctx.approval.by if ctx.approval is not None else None)
