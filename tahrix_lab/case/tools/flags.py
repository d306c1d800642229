"""Flag tools: run the detectors, read the triage list or the raw flags."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.errors import ToolRetry
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.detectors import DEFAULTS, DETECTORS, run_detectors, triage
from tahrix_lab.case.record_sync import push
from tahrix_lab.case.schema import FLAG_TYPES, SEVERITIES
from tahrix_lab.case.tools import headlines
from tahrix_lab.case.tools.common import register


# -- 8/9. flags ------------------------------------------------------------------------------
@register(
    "run_detectors",
    "Run anomaly detectors over the case and store their flags (writes). Detectors: " + ", ".join(DETECTORS)
    + ". param_overrides maps a detector to thresholds to change (e.g. {\"structuring\": {\"min_count\": 4}}); "
    "re-running updates flags in place and keeps analysts' decisions.",
    {
        "properties": {
            "detectors": {"type": "array", "items": {"type": "string", "enum": list(DETECTORS)}, "uniqueItems": True},
            "param_overrides": {"type": "object", "properties": {k: {"type": "object"} for k in DETECTORS}, "additionalProperties": False},
        },
    },
    [{}, {"detectors": ["structuring"], "param_overrides": {"structuring": {"min_count": 4}}}],
    writes=True,
    headline=headlines.detectors,
    timeout=120.0,
)  # fmt: skip
def run_detectors_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    overrides = args.get("param_overrides") or {}
    for det, over in overrides.items():
        unknown = sorted(set(over) - set(DEFAULTS[det]) - {"service_categories"})
        if unknown:
            raise ToolRetry(f"Unknown parameter(s) {unknown} for {det}; known: {sorted(DEFAULTS[det])}.")
    count_sql = "SELECT flag_type, count(*) FROM anomaly_flags WHERE case_id = ? GROUP BY ALL ORDER BY 1"
    before = dict(ctx.db.cursor().execute(count_sql, [ctx.case_id]).fetchall())
    result = run_detectors(ctx.db, ctx.case_id, args.get("detectors"), overrides)
    ids = result.pop("flag_ids")
    after = dict(ctx.db.cursor().execute(count_sql, [ctx.case_id]).fetchall())
    with ctx.db.write() as cur:  # agent writes are audited, detector runs included
        result["audit_id"] = ctx.db.audit(
            cur, actor=ctx.actor, session_id=ctx.session_id, case_id=ctx.case_id, action="run_detectors",
            target_kind="case", target_id=ctx.case_id, before={"flags_by_type": before},
            after={"flags_by_type": after, "params": {k: v["params"] for k, v in result["by_detector"].items()}},
        )  # fmt: skip
        push(ctx.db, cur, result["audit_id"], None, None, None)  # the audit entry into the record
    result["flags_written"] = len(ids)
    result["triage"] = {
        k: v for k, v in triage(ctx.db, ctx.case_id).items() if k in ("rows_total", "by_severity")
    }
    result["_effects"] = [{"type": "flags_changed", "case_id": ctx.case_id, "count": len(ids)}]
    return result


ROW_FLAGS = 8  # underlying flags shown per triage row (all are in view="raw")
ROW_ADDRESSES = 10


@register(
    "list_flags",
    "The case's anomaly flags. view='triage' (default): flags rolled up per entity, address or cohort "
    "(addresses sharing one service-exposure pattern), each row with one severity and score, its role in the "
    "case, and its underlying flags (flag ids, types, tx hashes) as evidence; ordered by what matters, so the "
    "high-and-above list is a few dozen rows. view='raw': the flags themselves with full evidence and the "
    "parameters the detector used. Filter by type, minimum severity, address and status (new/confirmed/dismissed).",
    {
        "properties": {
            "view": {"type": "string", "enum": ["triage", "raw"], "default": "triage"},
            "flag_type": {"type": "string", "enum": list(FLAG_TYPES)},
            "min_severity": {"type": "string", "enum": list(SEVERITIES)},
            "address": {"type": "string"},
            "status": {"type": "string", "enum": ["new", "confirmed", "dismissed"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 30},
            "include_evidence": {"type": "boolean", "default": True},
        },
    },
    [{"min_severity": "high"}, {"view": "raw", "flag_type": "peel_chain", "limit": 5},
     {"view": "raw", "address": "0x1111111111111111111111111111111111111111"}],
    detail=("rows", "flags"),
    headline=headlines.flags,
)  # fmt: skip
def list_flags(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    limit = int(args.get("limit", 30))
    if args.get("view", "triage") == "triage":
        return _triage_view(args, ctx, limit)
    flags, total = ctx.db.list_flags(
        ctx.case_id, flag_type=args.get("flag_type"), min_severity=args.get("min_severity"), address=args.get("address"),
        status=args.get("status"), limit=limit,
    )  # fmt: skip
    if not args.get("include_evidence", True):
        for f in flags:
            f.pop("evidence", None)
    ctx.see("flag", [f["flag_id"] for f in flags])
    return {
        "view": "raw",
        "count": len(flags),
        "total": total,
        "truncated": total > len(flags),
        "flags": flags,
    }


def _triage_view(args: dict[str, Any], ctx: ToolContext, limit: int) -> dict[str, Any]:
    tri = triage(ctx.db, ctx.case_id, min_severity=args.get("min_severity"),
                 include_dismissed=args.get("status") == "dismissed")  # fmt: skip
    rows = tri["rows"]
    if args.get("flag_type"):
        rows = [r for r in rows if args["flag_type"] in r["flag_types"]]
    if args.get("address"):
        a = args["address"].strip().lower()
        rows = [r for r in rows if any(x.split(":", 1)[1].lower() == a for x in r["addresses"])]
    if args.get("status"):
        rows = [r for r in rows if any(f["status"] == args["status"] for f in r["flags"])]
    shown = []
    for r in rows[:limit]:
        r = dict(r)
        r["flags_shown"] = min(len(r["flags"]), ROW_FLAGS)
        r["flags"] = r["flags"][:ROW_FLAGS] if args.get("include_evidence", True) else []
        r["addresses_total"] = len(r["addresses"])
        r["addresses"] = r["addresses"][:ROW_ADDRESSES]
        for rel in r["related"]:
            rel["flags"] = rel["flags"][:ROW_FLAGS]
        shown.append(r)
    ctx.see("flag", [f["flag_id"] for r in shown for f in r["flags"]])
    return {
        "view": "triage", "count": len(shown), "rows_matching": len(rows), "rows_total": tri["rows_total"],
        "flags_total": tri["flags_total"], "by_severity": tri["by_severity"], "truncated": len(rows) > len(shown),
        "how": tri["how"], "more": "list_flags(view='raw', address=…) gives every flag of a row with full evidence",
        "rows": shown,
    }  # fmt: skip
