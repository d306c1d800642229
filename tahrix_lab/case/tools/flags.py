"""Flag tools: run the detectors, read the triage list or the raw flags."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.errors import ToolRetry
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.detectors import DEFAULTS, DETECTORS, run_detectors
from tahrix_lab.case.schema import FLAG_TYPES, SEVERITIES
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
    result["flags_written"] = len(ids)
    result["_effects"] = [{"type": "flags_changed", "case_id": ctx.case_id, "count": len(ids)}]
    return result


@register(
    "list_flags",
    "Anomaly flags of the case with severity, score, evidence (tx hashes, addresses, bridge event ids) and the "
    "parameters the detector used. Filter by type, minimum severity, address and status (new/confirmed/dismissed).",
    {
        "properties": {
            "flag_type": {"type": "string", "enum": list(FLAG_TYPES)},
            "min_severity": {"type": "string", "enum": list(SEVERITIES)},
            "address": {"type": "string"},
            "status": {"type": "string", "enum": ["new", "confirmed", "dismissed"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 30},
            "include_evidence": {"type": "boolean", "default": True},
        },
    },
    [{"min_severity": "high"}, {"flag_type": "peel_chain", "limit": 5}, {"address": "0x1111111111111111111111111111111111111111"}],
)  # fmt: skip
def list_flags(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    limit = int(args.get("limit", 30))
    flags, total = ctx.db.list_flags(
        ctx.case_id, flag_type=args.get("flag_type"), min_severity=args.get("min_severity"), address=args.get("address"),
        status=args.get("status"), limit=limit,
    )  # fmt: skip
    if not args.get("include_evidence", True):
        for f in flags:
            f.pop("evidence", None)
    ctx.see("flag", [f["flag_id"] for f in flags])
    return {"flags": flags, "count": len(flags), "total": total, "truncated": total > len(flags)}
