"""Case data tools: the overview, an address profile, a transaction, transfer lists."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.errors import ToolRetry
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.db import LABEL_RANK_KEY, jdict, norm_address
from tahrix_lab.case.detectors import data_quality, triage
from tahrix_lab.case.tools import headlines
from tahrix_lab.case.tools.common import CHAINS, DATA_NOTE, cap, chain_addr, register


# -- 1. overview -------------------------------------------------------------------------------
@register(
    "get_case_overview",
    "Summary of the session's case: the case record, addresses with roles, data quality (how much is unpriced, "
    "has unknown decimals or an unknown or failed status), the triage of its flags by severity, transfer totals "
    "by chain and asset (failed transfers move nothing; unknown USD is null, never 0), flag counts by type and "
    "severity, and bridge events by status. Start here.",
    {"properties": {}},
    [{}],
    detail=("addresses_with_roles", "totals_by_asset", "flags_by_type", "bridge_events_by_status"),
    headline=headlines.case_overview,
)
def get_case_overview(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    db, cid = ctx.db, ctx.case_id
    case = db.one("SELECT * FROM cases WHERE case_id = ?", [cid])
    roles = db.rows(
        "SELECT chain, address, role, note, added_by FROM case_addresses WHERE case_id = ? ORDER BY role, chain, address",
        [cid],
    )
    totals = db.rows(
        "SELECT t.chain, t.asset_key, any_value(a.symbol) AS symbol, count(*) AS transfers, "
        "round(sum(t.usd_value), 2) AS usd, count(*) FILTER (WHERE t.usd_value IS NULL) AS unpriced, "
        "count(*) FILTER (WHERE t.amount IS NULL) AS unknown_decimals "
        "FROM transfers t LEFT JOIN assets a USING (asset_key) "
        "WHERE t.case_id = ? AND t.status IS NOT FALSE GROUP BY ALL ORDER BY usd DESC NULLS LAST, transfers DESC",
        [cid],
    )
    flags = db.rows(
        "SELECT flag_type, severity, count(*) AS n FROM anomaly_flags WHERE case_id = ? GROUP BY ALL ORDER BY flag_type, severity",
        [cid],
    )
    bridges = db.rows(
        "SELECT bridge_name, coalesce(status, 'unknown') AS status, count(*) AS n FROM bridge_events WHERE case_id = ? "
        "GROUP BY ALL ORDER BY bridge_name, status",
        [cid],
    )
    counts = db.one(
        "SELECT (SELECT count(*) FROM transactions WHERE case_id = $1) AS transactions, "
        "(SELECT count(*) FROM transfers WHERE case_id = $1) AS transfers, "
        "(SELECT count(*) FROM addresses WHERE case_id = $1) AS addresses, "
        "(SELECT count(*) FROM case_labels WHERE case_id = $1) AS labels",
        [cid],
    )
    ctx.see("address", [f"{r['chain']}:{r['address']}" for r in roles])
    tri = triage(db, cid)
    return jdict({
        "case": case, "counts": counts, "data_quality": data_quality(db, cid),
        "triage": {"rows": tri["rows_total"], "flags": tri["flags_total"], "by_severity": tri["by_severity"],
                   "next": "list_flags (triage view) lists the rows, most important first"},
        "addresses_with_roles": roles, "totals_by_asset": totals,
        "flags_by_type": flags, "bridge_events_by_status": bridges, "data_note": DATA_NOTE,
    })  # fmt: skip


# -- 2. address -------------------------------------------------------------------------------
@register(
    "lookup_address",
    "Profile of one address in the case: first/last seen, in/out counts and USD, top counterparties, every label "
    "with its source, confidence and validity (the best one first, conflicts marked), case roles, flags on it, and "
    "whether this session already looked at it. Give chain when the same address exists on several chains.",
    {
        "properties": {
            "address": {
                "type": "string",
                "minLength": 3,
                "description": "The address (EVM hex, Tron base58, BTC bech32).",
            },
            "chain": {"type": "string", "enum": CHAINS},
            "counterparties": {"type": "integer", "minimum": 0, "maximum": 50, "default": 10},
        },
        "required": ["address"],
    },
    [
        {"address": "0x1111111111111111111111111111111111111111"},
        {"address": "bc1qexample", "chain": "bitcoin", "counterparties": 5},
    ],
    detail=("matches",),
    headline=headlines.lookup_address,
)
def lookup_address(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    keys = chain_addr(ctx, args["address"], args.get("chain"))
    if not keys:
        raise ToolRetry(
            f"The address {args['address']!r} does not appear in case {ctx.case_id}. Check the chain and spelling."
        )
    top = int(args.get("counterparties", 10))
    labels = ctx.db.labels_for(ctx.case_id, keys)
    before = ctx.see("address", [f"{c}:{a}" for c, a in keys])
    out = []
    for chain, address in keys:
        prof = profile(ctx, chain, address)
        cps = ctx.db.rows(
            """
            SELECT counterparty, direction, count(*) AS transfers, round(sum(usd_value), 2) AS usd,
                   count(*) FILTER (WHERE usd_value IS NULL) AS unpriced,
                   min(block_time) AS first_time, any_value(tx_hash) AS example_tx
            FROM (SELECT to_address AS counterparty, 'out' AS direction, usd_value, block_time, tx_hash FROM transfers
                  WHERE case_id = $1 AND chain = $2 AND from_address = $3 AND status IS NOT FALSE
                  UNION ALL
                  SELECT from_address, 'in', usd_value, block_time, tx_hash FROM transfers
                  WHERE case_id = $1 AND chain = $2 AND to_address = $3 AND status IS NOT FALSE)
            GROUP BY ALL ORDER BY usd DESC NULLS LAST, transfers DESC, counterparty LIMIT $4
            """,
            [ctx.case_id, chain, address, top],
        )
        cp_labels = ctx.db.labels_for(
            ctx.case_id, [(chain, c["counterparty"]) for c in cps if c["counterparty"]]
        )
        for c in cps:
            best = (cp_labels.get((chain, c["counterparty"])) or {}).get("best")
            c["label"] = best["label"] if best else None
            c["category"] = best["category"] if best else None
            c["label_source"] = best["source"] if best else None
        roles = ctx.db.rows(
            "SELECT role, note, added_by, added_at FROM case_addresses WHERE case_id = ? AND chain = ? AND address = ?",
            [ctx.case_id, chain, address],
        )
        flags, _ = ctx.db.list_flags(ctx.case_id, address=address, limit=20)
        flags = [f for f in flags if f["chain"] == chain]
        ctx.see("flag", [f["flag_id"] for f in flags])
        entry = labels.get((chain, address)) or {"best": None, "labels": [], "conflict": False}
        out.append({
            "chain": chain, "address": address, "already_seen_in_session": f"{chain}:{address}" in before,
            "profile": prof, "labels": entry["labels"], "best_label": entry["best"], "label_conflict": entry["conflict"],
            "roles": roles, "top_counterparties": cps,
            "flags": [{k: f[k] for k in ("flag_id", "flag_type", "severity", "score", "status")} for f in flags],
        })  # fmt: skip
    return jdict({"matches": out, "data_note": DATA_NOTE})


# -- 3. transaction ---------------------------------------------------------------------------
@register(
    "get_transaction",
    "One transaction with all its value movements (native, internal, token, UTXO inputs/outputs), method and memo, "
    "the bridge events it is a leg of, and the flags that cite it.",
    {
        "properties": {
            "tx_hash": {"type": "string", "minLength": 8},
            "chain": {"type": "string", "enum": CHAINS},
        },
        "required": ["tx_hash"],
    },
    [{"tx_hash": "0x" + "ab" * 32}, {"tx_hash": "cd" * 32, "chain": "bitcoin"}],
    detail=("matches",),
    headline=headlines.transaction,
)
def get_transaction(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    h, chain = args["tx_hash"].strip(), args.get("chain")
    txs = ctx.db.rows(
        "SELECT * EXCLUDE (case_id) FROM transactions WHERE case_id = ? AND (tx_hash = ? OR tx_hash = lower(?)) "
        "AND (? IS NULL OR chain = ?)",
        [ctx.case_id, h, h, chain, chain],
    )
    if not txs:
        raise ToolRetry(f"No transaction {h!r} in case {ctx.case_id}.")
    out = []
    for tx in txs:
        key = [ctx.case_id, tx["chain"], tx["tx_hash"]]
        transfers = ctx.db.rows(
            "SELECT t.transfer_id, t.kind, t.from_address, t.to_address, t.asset_key, a.symbol, a.name AS token_name, "
            "t.amount_raw, t.amount, t.usd_value, t.status FROM transfers t LEFT JOIN assets a USING (asset_key) "
            "WHERE t.case_id = ? AND t.chain = ? AND t.tx_hash = ? ORDER BY t.transfer_id",
            key,
        )
        io = ctx.db.rows(
            "SELECT direction, idx, address, amount_sats, script_type, prev_tx_hash, prev_vout, spent_by_tx FROM utxo_io "
            "WHERE case_id = ? AND chain = ? AND tx_hash = ? ORDER BY direction, idx",
            key,
        )
        bridges = ctx.db.rows(
            "SELECT bridge_event_id, bridge_name, status, src_chain, src_tx_hash, dst_chain, dst_tx_hash, match_method "
            "FROM bridge_events WHERE case_id = ? AND ((src_chain = ? AND src_tx_hash = ?) OR (dst_chain = ? AND dst_tx_hash = ?))",
            [ctx.case_id, tx["chain"], tx["tx_hash"], tx["chain"], tx["tx_hash"]],
        )
        flags = ctx.db.rows(
            "SELECT flag_id, flag_type, severity, status FROM anomaly_flags WHERE case_id = ? AND "
            "(tx_hash = ? OR contains(evidence::VARCHAR, ?)) ORDER BY flag_id LIMIT 50",
            [ctx.case_id, tx["tx_hash"], tx["tx_hash"]],
        )
        ctx.see("tx", [tx["tx_hash"]])
        ctx.see("bridge_event", [b["bridge_event_id"] for b in bridges])
        out.append(
            {
                "transaction": tx,
                "transfers": transfers,
                "utxo_io": io,
                "bridge_events": bridges,
                "flags": flags,
            }
        )
    return jdict({"matches": out, "data_note": DATA_NOTE})


# -- 4. transfers -----------------------------------------------------------------------------
@register(
    "list_transfers",
    "Transfers filtered by address (direction in/out/both), chain, asset, kind, time window, minimum USD and the "
    "counterparty's label category, with counterparty labels. Ordered by time or by USD; capped by limit.",
    {
        "properties": {
            "address": {"type": "string"},
            "chain": {"type": "string", "enum": CHAINS},
            "direction": {"type": "string", "enum": ["in", "out", "both"], "default": "both"},
            "asset": {"type": "string", "description": "asset_key (e.g. 'ethereum:native') or a symbol (e.g. 'USDT')"},
            "kind": {"type": "string", "enum": ["native", "internal", "token", "utxo"]},
            "time_from": {"type": "string", "format": "date-time"},
            "time_to": {"type": "string", "format": "date-time"},
            "min_usd": {"type": "number", "minimum": 0},
            "counterparty_category": {"type": "string"},
            "order_by": {"type": "string", "enum": ["time", "usd"], "default": "time"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
        },
    },
    [{"address": "0x1111111111111111111111111111111111111111", "direction": "out", "min_usd": 10000},
     {"chain": "tron", "asset": "USDT", "order_by": "usd", "limit": 20}],
    detail=('transfers',),
    headline=headlines.transfers,
)  # fmt: skip
def list_transfers(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    where, params = ["t.case_id = $case"], {"case": ctx.case_id, "limit": int(args.get("limit", 50)) + 1}
    address = args.get("address")
    direction = args.get("direction", "both")
    cp = (
        "CASE WHEN t.from_address = $addr THEN t.to_address ELSE t.from_address END"
        if address
        else "t.to_address"
    )
    if address:
        params["addr"] = (
            norm_address(args.get("chain") or "ethereum", address) if address.startswith("0x") else address
        )
        where.append(
            {"in": "t.to_address = $addr", "out": "t.from_address = $addr"}.get(
                direction, "(t.to_address = $addr OR t.from_address = $addr)"
            )
        )
    for key, clause in (("chain", "t.chain = $chain"), ("kind", "t.kind = $kind"), ("time_from", "t.block_time >= CAST($time_from AS TIMESTAMPTZ)"),
                        ("time_to", "t.block_time < CAST($time_to AS TIMESTAMPTZ)"), ("min_usd", "t.usd_value >= $min_usd")):  # fmt: skip
        if args.get(key) is not None:
            where.append(clause)
            params[key] = args[key]
    if args.get("asset"):
        where.append("(t.asset_key = $asset OR upper(a.symbol) = upper($asset))")
        params["asset"] = args["asset"]
    if args.get("counterparty_category"):
        where.append("lab.category = $cat")
        params["cat"] = args["counterparty_category"]
    order = (
        "t.usd_value DESC NULLS LAST, t.block_time"
        if args.get("order_by") == "usd"
        else "t.block_time, t.transfer_id"
    )
    rows = ctx.db.rows(
        f"""
        WITH lab AS (SELECT chain, address, arg_max(category, {LABEL_RANK_KEY}) AS category,
                            arg_max(label, {LABEL_RANK_KEY}) AS label
                     FROM case_labels l WHERE case_id = $case GROUP BY ALL)
        SELECT t.transfer_id, t.chain, t.tx_hash, t.block_time, t.kind, t.from_address, t.to_address, t.asset_key,
               a.symbol, t.amount, t.usd_value, t.status, {cp} AS counterparty, lab.label AS counterparty_label,
               lab.category AS counterparty_category
        FROM transfers t LEFT JOIN assets a USING (asset_key)
        LEFT JOIN lab ON lab.chain = t.chain AND lab.address = {cp}
        WHERE {" AND ".join(where)} ORDER BY {order} LIMIT $limit
        """,
        params,
    )
    rows, truncated = cap(rows, int(args.get("limit", 50)))
    return jdict({"transfers": rows, "count": len(rows), "truncated": truncated, "filters": {k: v for k, v in args.items() if k != "case_id"},
                     "data_note": DATA_NOTE})  # fmt: skip


def profile(ctx: ToolContext, chain: str, address: str) -> dict[str, Any] | None:
    """In/out of one address from its transfers: failed ones move nothing (counted apart), unknown USD is
    null (never 0) and counted, unknown status counts as moved and is reported."""
    return ctx.db.one(
        """
        WITH io AS (
          SELECT TRUE AS is_in, usd_value, block_time, status, amount FROM transfers
           WHERE case_id = $1 AND chain = $2 AND to_address = $3
          UNION ALL
          SELECT FALSE, usd_value, block_time, status, amount FROM transfers
           WHERE case_id = $1 AND chain = $2 AND from_address = $3)
        SELECT min(block_time) FILTER (WHERE status IS NOT FALSE) AS first_seen,
               max(block_time) FILTER (WHERE status IS NOT FALSE) AS last_seen,
               count(*) FILTER (WHERE is_in AND status IS NOT FALSE) AS n_in,
               count(*) FILTER (WHERE NOT is_in AND status IS NOT FALSE) AS n_out,
               round(sum(usd_value) FILTER (WHERE is_in AND status IS NOT FALSE), 2) AS usd_in,
               round(sum(usd_value) FILTER (WHERE NOT is_in AND status IS NOT FALSE), 2) AS usd_out,
               count(*) FILTER (WHERE usd_value IS NULL AND status IS NOT FALSE) AS unpriced,
               count(*) FILTER (WHERE amount IS NULL) AS unknown_decimals,
               count(*) FILTER (WHERE status = FALSE) AS failed_not_counted,
               count(*) FILTER (WHERE status IS NULL) AS unknown_status,
               (SELECT first_out_nonce FROM addresses WHERE case_id = $1 AND chain = $2 AND address = $3) AS first_out_nonce
        FROM io
        """,
        [ctx.case_id, chain, address],
    )
