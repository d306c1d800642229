"""Chain hops and bridges tools: fund tracing, bridge events, matching a bridge leg."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.errors import ToolRetry, UserFacingError
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.db import LABEL_RANK_KEY, jdict
from tahrix_lab.case.tools import headlines
from tahrix_lab.case.tools.common import CHAINS, DATA_NOTE, cap, register
from tahrix_lab.case.tracing import DEFAULT_STOP, TraceParams, role_starts, trace_funds


# -- 5. trace ---------------------------------------------------------------------------------
@register(
    "trace_funds",
    "Follow value hop by hop forward (where it went) or backward (where it came from), from addresses or "
    "transaction hashes, or (start omitted) from the case's perpetrator and suspect addresses, else its seeds "
    "(from_roles picks roles). Value is conserved: each movement is followed once and no address passes on "
    "more taint than reached it. Taint models: 'poison' (spread over every later movement out), 'haircut' "
    "(the tainted share of all received), 'fifo' (first in, first out; forward only). Crosses bridge events "
    "once, follows DEX swaps through their output, and ends at services in stop_at_categories (exchanges, OTC "
    "desks, instant exchangers, mixers, payment processors, gambling, sanctioned) and at bridges whose far leg "
    "is unknown. Movements without a price are followed and marked unpriced (min_usd applies only where a "
    "price is known). The answer leads with a summary (traced, endpoints, frontier, held and cut-off USD; "
    "the top endpoints with tx hashes), then endpoints, frontier, edges and nodes, paged with cursor.",
    {
        "properties": {
            "start": {"oneOf": [{"type": "string", "minLength": 3}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 50}],
                      "description": "Address(es) or transaction hash(es); omit to start from the case's roles."},
            "from_roles": {"type": "array", "items": {"type": "string", "enum": ["perpetrator", "suspect", "seed", "victim"]},
                           "minItems": 1, "uniqueItems": True},
            "chain": {"type": "string", "enum": CHAINS},
            "direction": {"type": "string", "enum": ["forward", "backward"], "default": "forward"},
            "max_hops": {"type": "integer", "minimum": 1, "maximum": 25, "default": 6},
            "min_usd": {"type": "number", "minimum": 0, "default": 100},
            "time_window_hours": {"type": "number", "exclusiveMinimum": 0},
            "taint_model": {"type": "string", "enum": ["poison", "haircut", "fifo"], "default": "poison"},
            "follow_bridges": {"type": "boolean", "default": True},
            "follow_unpriced": {"type": "boolean", "default": True},
            "stop_at_categories": {"type": "array", "items": {"type": "string"}, "default": list(DEFAULT_STOP)},
            "max_edges": {"type": "integer", "minimum": 1, "maximum": 20000, "default": 3000,
                          "description": "Cap on transfers followed (the result aggregates them per address pair)."},
        },
    },
    [{"start": "0x1111111111111111111111111111111111111111", "max_hops": 4}, {"from_roles": ["seed"]},
     {"start": ["0x" + "ab" * 32], "direction": "backward", "taint_model": "haircut", "min_usd": 1000}],
    detail=("endpoints", "frontier", "edges", "nodes"),
    headline=headlines.trace,
)  # fmt: skip
def trace_funds_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    kind, roles = None, None
    if args.get("start"):
        starts = args["start"] if isinstance(args["start"], list) else [args["start"]]
    else:
        try:
            starts, roles = role_starts(ctx.db, ctx.case_id, args.get("from_roles"))
        except UserFacingError as exc:
            raise ToolRetry(str(exc)) from None
        kind = "roles"
    try:
        params = TraceParams(
            direction=args.get("direction", "forward"), max_hops=int(args.get("max_hops", 6)), min_usd=float(args.get("min_usd", 100)),
            time_window_hours=args.get("time_window_hours"), taint_model=args.get("taint_model", "poison"),
            follow_bridges=bool(args.get("follow_bridges", True)), follow_unpriced=bool(args.get("follow_unpriced", True)),
            stop_at_categories=tuple(args.get("stop_at_categories", DEFAULT_STOP)), max_edges=int(args.get("max_edges", 3000)),
        )  # fmt: skip
    except ValueError as exc:
        raise ToolRetry(str(exc)) from None
    result = trace_funds(
        ctx.db, ctx.case_id, starts, chain=args.get("chain"), params=params, start_kind=kind, roles=roles
    )
    if "error" in result:
        raise ToolRetry(result["error"])
    ctx.see("address", [f"{n['chain']}:{n['address']}" for n in result["nodes"]][:500])
    for n in result["nodes"]:  # keep the model-facing result small; the panel calls Workspace.trace
        n.pop("label_ids", None)
    # one list, biggest first, so the paging keeps what matters on the first page
    result["endpoints"] = sorted((e for eps in result["endpoints"].values() for e in eps),
                                 key=lambda e: (-e["tainted_usd"], e["chain"], e["address"]))  # fmt: skip
    result["_effects"] = [
        {"type": "trace_ready", "case_id": ctx.case_id, "start": starts, "params": params.to_dict()}
    ]
    result["data_note"] = DATA_NOTE
    return result


# -- 6/7. bridges -----------------------------------------------------------------------------
@register(
    "find_bridge_events",
    "Bridge transfers with both legs (source and destination chain, tx hashes, amounts, time between legs, how "
    "they were matched and with what confidence). Filter by address (either leg), chain, tx hash, bridge, status "
    "(matched/pending/refunded/unmatched) and time.",
    {
        "properties": {
            "address": {"type": "string"}, "chain": {"type": "string", "enum": CHAINS}, "tx_hash": {"type": "string"},
            "bridge_name": {"type": "string"}, "status": {"type": "string"},
            "time_from": {"type": "string", "format": "date-time"}, "time_to": {"type": "string", "format": "date-time"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
        },
    },
    [{"bridge_name": "thorchain"}, {"status": "pending"}, {"address": "0x1111111111111111111111111111111111111111", "limit": 10}],
    detail=('bridge_events',),
    headline=headlines.bridge_events,
)  # fmt: skip
def find_bridge_events(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    where, params = ["case_id = $case"], {"case": ctx.case_id, "limit": int(args.get("limit", 50)) + 1}
    if args.get("address"):
        where.append(
            "(src_address = $a OR dst_address = $a OR src_address = lower($a) OR dst_address = lower($a) OR declared_recipient = $a)"
        )
        params["a"] = args["address"]
    if args.get("chain"):
        where.append("(src_chain = $chain OR dst_chain = $chain)")
        params["chain"] = args["chain"]
    if args.get("tx_hash"):
        where.append(
            "(src_tx_hash = lower($h) OR dst_tx_hash = lower($h) OR src_tx_hash = $h OR dst_tx_hash = $h)"
        )
        params["h"] = args["tx_hash"]
    for key, clause in (("bridge_name", "bridge_name = $bridge_name"), ("status", "status = $status"),
                        ("time_from", "src_time >= CAST($time_from AS TIMESTAMPTZ)"), ("time_to", "src_time < CAST($time_to AS TIMESTAMPTZ)")):  # fmt: skip
        if args.get(key):
            where.append(clause)
            params[key] = args[key]
    rows = ctx.db.rows(
        f"SELECT * EXCLUDE (case_id), date_diff('second', src_time, dst_time) AS time_delta_s FROM bridge_events "
        f"WHERE {' AND '.join(where)} ORDER BY src_time, bridge_event_id LIMIT $limit",
        params,
    )
    rows, truncated = cap(rows, int(args.get("limit", 50)))
    ctx.see("bridge_event", [r["bridge_event_id"] for r in rows])
    return jdict({"bridge_events": rows, "count": len(rows), "truncated": truncated})


@register(
    "match_bridge_leg",
    "Find the destination leg of a bridge deposit. First by protocol id (THORChain 'OUT:<hash>' memo, Multichain "
    "source-hash, LayerZero guid in both legs), then by amount and time: same canonical asset (or any asset for "
    "swap bridges), destination USD within fee_tolerance_pct below the source, within max_delay_minutes, paid by "
    "a bridge-labelled address. Returns ranked candidates with a confidence and the stored bridge record.",
    {
        "properties": {
            "src_tx_hash": {"type": "string", "minLength": 8}, "src_chain": {"type": "string", "enum": CHAINS},
            "dst_chain": {"type": "string", "enum": CHAINS},
            "max_delay_minutes": {"type": "integer", "minimum": 1, "maximum": 10080, "default": 1440},
            "fee_tolerance_pct": {"type": "number", "minimum": 0, "maximum": 50, "default": 3},
        },
        "required": ["src_tx_hash"],
    },
    [{"src_tx_hash": "0x" + "ab" * 32}, {"src_tx_hash": "0x" + "cd" * 32, "src_chain": "ethereum", "dst_chain": "bitcoin", "fee_tolerance_pct": 5}],
    detail=('candidates',),
    headline=headlines.bridge_leg,
)  # fmt: skip
def match_bridge_leg(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    db, cid = ctx.db, ctx.case_id
    h = args["src_tx_hash"].strip()
    src = db.one(
        "SELECT * FROM transactions WHERE case_id = ? AND (tx_hash = ? OR tx_hash = lower(?)) AND (? IS NULL OR chain = ?)",
        [cid, h, h, args.get("src_chain"), args.get("src_chain")],
    )
    if src is None:
        raise ToolRetry(f"No source transaction {h!r} in case {cid}.")
    moved = (
        db.one(
            "SELECT t.asset_key, a.canonical_asset, sum(t.usd_value) AS usd, sum(t.amount) AS amount, any_value(t.to_address) AS to_address "
            "FROM transfers t LEFT JOIN assets a USING (asset_key) WHERE t.case_id = ? AND t.chain = ? AND t.tx_hash = ? "
            "AND t.from_address = ? GROUP BY ALL ORDER BY usd DESC NULLS LAST LIMIT 1",
            [cid, src["chain"], src["tx_hash"], src["from_address"]],
        )
        or {}
    )
    bare = src["tx_hash"][2:] if src["tx_hash"].startswith("0x") else src["tx_hash"]
    memo = src.get("memo") or ""
    guid = memo.split("guid:", 1)[1].strip() if "guid:" in memo else None
    candidates: list[dict[str, Any]] = []
    exact = db.rows(
        """
        SELECT chain, tx_hash, block_time, memo, method_name FROM transactions
        WHERE case_id = $case AND chain <> $chain AND ($dst IS NULL OR chain = $dst) AND memo IS NOT NULL AND (
              upper(memo) = upper('OUT:' || $bare) OR upper(memo) = upper('REFUND:' || $bare)
           OR memo = 'anySwapIn:' || $hash OR ($guid IS NOT NULL AND memo = 'guid:' || $guid))
        """,
        {
            "case": cid,
            "chain": src["chain"],
            "dst": args.get("dst_chain"),
            "bare": bare,
            "hash": src["tx_hash"],
            "guid": guid,
        },
    )
    for r in exact:
        method = (
            "memo"
            if "OUT:" in (r["memo"] or "").upper() or "REFUND:" in (r["memo"] or "").upper()
            else "protocol_id"
        )
        candidates.append({"dst_chain": r["chain"], "dst_tx_hash": r["tx_hash"], "dst_time": r["block_time"], "match_method": method,
                           "confidence": 1.0, "evidence": {"memo": r["memo"]}})  # fmt: skip
    tol = float(args.get("fee_tolerance_pct", 3)) / 100
    if not candidates and moved.get("usd"):
        rows = db.rows(
            f"""
            WITH lab AS (SELECT chain, address, arg_max(category, {LABEL_RANK_KEY}) AS category
                         FROM case_labels l WHERE case_id = $case GROUP BY ALL)
            SELECT t.chain, t.tx_hash, t.block_time, t.to_address, t.asset_key, a.canonical_asset, t.usd_value, t.transfer_id
            FROM transfers t LEFT JOIN assets a USING (asset_key)
            JOIN lab ON lab.chain = t.chain AND lab.address = t.from_address AND lab.category = 'defi_bridge'
            WHERE t.case_id = $case AND t.chain <> $chain AND ($dst IS NULL OR t.chain = $dst)
              AND t.block_time BETWEEN $t0 AND $t0 + to_minutes($delay::BIGINT)
              AND t.usd_value BETWEEN $usd * (1 - $tol) AND $usd * 1.001
            ORDER BY abs(t.usd_value - $usd), t.block_time LIMIT 20
            """,
            {"case": cid, "chain": src["chain"], "dst": args.get("dst_chain"), "t0": src["block_time"],
             "delay": int(args.get("max_delay_minutes", 1440)), "usd": float(moved["usd"]), "tol": tol},
        )  # fmt: skip
        for r in rows:
            same = r["canonical_asset"] == moved.get("canonical_asset")
            conf = round((0.8 if same else 0.6) / len(rows), 3)
            candidates.append({"dst_chain": r["chain"], "dst_tx_hash": r["tx_hash"], "dst_time": r["block_time"],
                               "dst_address": r["to_address"], "match_method": "amount_time", "confidence": conf,
                               "evidence": {"transfer_id": r["transfer_id"], "usd": r["usd_value"], "src_usd": moved["usd"],
                                            "same_canonical_asset": same}})  # fmt: skip
    stored = db.rows(
        "SELECT * EXCLUDE (case_id) FROM bridge_events WHERE case_id = ? AND src_tx_hash = ?",
        [cid, src["tx_hash"]],
    )
    return jdict({
        "source": {"chain": src["chain"], "tx_hash": src["tx_hash"], "time": src["block_time"], "from": src["from_address"],
                   "to": src["to_address"], "memo": memo, "asset_key": moved.get("asset_key"), "usd": moved.get("usd")},
        "candidates": candidates, "stored_bridge_events": stored,
        "thresholds": {"max_delay_minutes": int(args.get("max_delay_minutes", 1440)), "fee_tolerance_pct": tol * 100},
        "data_note": DATA_NOTE,
    })  # fmt: skip
