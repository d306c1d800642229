"""Exposure tool: screening addresses against listed entities, direct and indirect."""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.db import jdict
from tahrix_lab.case.labels.library import cite
from tahrix_lab.case.tools import headlines
from tahrix_lab.case.tools.common import CHAINS, DATA_NOTE, chain_addr, register
from tahrix_lab.case.tracing_index import TraceIndex

# -- 10. exposure ----------------------------------------------------------------------------
LISTS = {
    "sanctions": "(l.abuse = 'sanction' OR l.category = 'sanction')",
    "mixer": "l.category = 'mixing_service'",
    "scam": "(l.category IN ('scam', 'phishing') OR l.abuse IN ('scam', 'phishing'))",
    "exchange": "l.category = 'exchange'",
    "hack": "(l.abuse = 'service_hack' OR l.category = 'perpetrator')",
}


@register(
    "screen_exposure",
    "Screen addresses for exposure to listed entities (sanctions, mixer, scam, exchange, hack): direct (own "
    "transfers with a listed address) and indirect (through counterparties, up to max_hops), as a share of the "
    "address's USD flow, with the path. A label counts only inside its validity window (valid_from/valid_to) "
    "at the transfer's time, and only if still valid at as_of when given.",
    {
        "properties": {
            "addresses": {"type": "array", "minItems": 1, "maxItems": 20, "items": {
                "type": "object", "properties": {"chain": {"type": "string", "enum": CHAINS}, "address": {"type": "string"}},
                "required": ["address"], "additionalProperties": False}},
            "lists": {"type": "array", "items": {"type": "string", "enum": list(LISTS)}, "default": ["sanctions", "mixer"]},
            "max_hops": {"type": "integer", "minimum": 0, "maximum": 2, "default": 1},
            "as_of": {"type": "string", "format": "date-time"},
        },
        "required": ["addresses"],
    },
    [{"addresses": [{"chain": "bitcoin", "address": "bc1qexample"}], "lists": ["sanctions"], "max_hops": 2},
     {"addresses": [{"address": "0x1111111111111111111111111111111111111111"}]}],
    detail=('results',),
    headline=headlines.exposure,
)  # fmt: skip
def screen_exposure(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    lists = args.get("lists") or ["sanctions", "mixer"]
    hops = int(args.get("max_hops", 1))
    as_of = args.get("as_of")
    cond = " OR ".join(f"({LISTS[n]})" for n in lists)
    case_names = " ".join(f"WHEN {LISTS[n]} THEN '{n}'" for n in lists)

    ix = TraceIndex(ctx.db, ctx.case_id)  # each address's transfers by row id, not a scan per query

    def touching(chain: str, address: str) -> list[int]:
        key = [f"{chain}|{address}"]
        return ix.rowids("from_address", key) + ix.rowids("to_address", key)

    def direct(chain: str, address: str) -> dict[str, Any]:
        ids = touching(chain, address)
        rows = ctx.db.rows(
            f"""
            WITH io AS (
              SELECT to_address AS cp, usd_value, block_time, tx_hash, 'out' AS dir FROM transfers
               WHERE rowid = ANY($ids::BIGINT[]) AND case_id = $case AND chain = $chain AND from_address = $addr
                 AND status IS NOT FALSE
              UNION ALL
              SELECT from_address, usd_value, block_time, tx_hash, 'in' FROM transfers
               WHERE rowid = ANY($ids::BIGINT[]) AND case_id = $case AND chain = $chain AND to_address = $addr
                 AND status IS NOT FALSE)
            SELECT io.cp, io.dir, io.usd_value, io.tx_hash, io.block_time, l.label_id, l.label, l.category, l.abuse,
                   l.entity, l.source, l.source_version, l.program, l.origin, l.from_case, l.valid_from, l.valid_to,
                   l.confidence, CASE {case_names} END AS list_name
            FROM io JOIN case_labels l ON l.case_id = $case AND l.chain = $chain AND l.address = io.cp AND ({cond})
            WHERE (l.valid_from IS NULL OR io.block_time >= l.valid_from) AND (l.valid_to IS NULL OR io.block_time < l.valid_to)
              AND ($as_of IS NULL OR ((l.valid_from IS NULL OR l.valid_from <= CAST($as_of AS TIMESTAMPTZ))
                   AND (l.valid_to IS NULL OR CAST($as_of AS TIMESTAMPTZ) < l.valid_to)))
            ORDER BY io.block_time
            """,
            {"case": ctx.case_id, "chain": chain, "addr": address, "as_of": as_of, "ids": ids},
        )
        total = ctx.db.one(
            "SELECT coalesce(sum(usd_value), 0) AS total FROM transfers WHERE rowid = ANY(?::BIGINT[]) AND case_id = ? "
            "AND chain = ? AND (from_address = ? OR to_address = ?) AND status IS NOT FALSE",
            [ids, ctx.case_id, chain, address, address],
        ) or {"total": 0}
        seen_tx: dict[str, dict[str, Any]] = {}
        listed: dict[str, list[dict[str, Any]]] = {}  # every label behind a hit, each with its source
        for r in rows:
            seen_tx.setdefault(r["tx_hash"] + r["dir"] + r["cp"], r)
            listed.setdefault(r["tx_hash"] + r["dir"] + r["cp"], []).append(r)
        usd = sum((r["usd_value"] or 0) for r in seen_tx.values())
        by_list: dict[str, float] = {}
        for r in seen_tx.values():
            by_list[r["list_name"]] = by_list.get(r["list_name"], 0) + (r["usd_value"] or 0)
        return {
            "usd": round(usd, 2), "share": round(usd / total["total"], 4) if total["total"] else 0.0, "by_list": by_list,
            "unpriced_hits": sum(1 for r in seen_tx.values() if r["usd_value"] is None),
            "hits": [{**{k: r[k] for k in ("cp", "dir", "usd_value", "tx_hash", "block_time", "label_id", "label", "list_name")},
                      "listed_by": [cite(x) for x in listed[r["tx_hash"] + r["dir"] + r["cp"]]]}
                     for r in list(seen_tx.values())[:20]],
        }  # fmt: skip

    results = []
    for item in args["addresses"]:
        keys = chain_addr(ctx, item["address"], item.get("chain"))
        if not keys:
            results.append({"address": item["address"], "chain": item.get("chain"), "found": False})
            continue
        for chain, address in keys:
            d = direct(chain, address)
            indirect: list[dict[str, Any]] = []
            frontier = [(address, [address], 1.0)]
            for hop in range(1, hops + 1):
                nxt = []
                for node, path, weight in frontier:
                    cps = ctx.db.rows(
                        """
                        SELECT cp, sum(usd) AS usd FROM (
                          SELECT to_address AS cp, coalesce(usd_value, 0) AS usd FROM transfers WHERE rowid = ANY($4::BIGINT[])
                            AND case_id = $1 AND chain = $2 AND from_address = $3 AND status IS NOT FALSE
                          UNION ALL SELECT from_address, coalesce(usd_value, 0) FROM transfers WHERE rowid = ANY($4::BIGINT[])
                            AND case_id = $1 AND chain = $2 AND to_address = $3 AND status IS NOT FALSE)
                        WHERE cp IS NOT NULL AND cp <> $3 GROUP BY cp ORDER BY usd DESC, cp LIMIT 15
                        """,
                        [ctx.case_id, chain, node, touching(chain, node)],
                    )  # fmt: skip
                    node_total = sum(c["usd"] for c in cps) or 1.0
                    for c in cps:
                        if c["cp"] in path:
                            continue
                        w = weight * c["usd"] / node_total
                        dd = direct(chain, c["cp"])
                        if dd["usd"] > 0:
                            indirect.append({"hops": hop + 1, "path": [*path, c["cp"]], "counterparty_share": round(w, 4),
                                             "counterparty_exposure_share": dd["share"], "weighted_share": round(w * dd["share"], 4),
                                             "by_list": dd["by_list"], "evidence_tx_hashes": [h["tx_hash"] for h in dd["hits"][:5]]})  # fmt: skip
                        nxt.append((c["cp"], [*path, c["cp"]], w))
                frontier = nxt[:15]
            indirect.sort(key=lambda x: -x["weighted_share"])
            results.append({"chain": chain, "address": address, "found": True, "direct": d, "indirect": indirect[:20],
                            "indirect_share": round(min(1.0, sum(x["weighted_share"] for x in indirect)), 4)})  # fmt: skip
    return jdict({"results": results, "lists": lists, "max_hops": hops, "as_of": as_of,
                     "note": "direct share = listed USD / all priced USD in+out of the address (failed transfers move nothing; unpriced hits are counted, not valued); labels count only inside their validity window [valid_from, valid_to) at the transfer's time; each hit lists every label behind it with its source and version (listed_by)",
                     "data_note": DATA_NOTE})  # fmt: skip
