"""Chain hops and bridges family: chain hopping, high-velocity pass-through (DOMAIN.md §3.3, 3.8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors.common import EVIDENCE_CAP, LAB, MOVED, register
from tahrix_lab.case.detectors.common import rows as _rows
from tahrix_lab.case.detectors.common import services as _services
from tahrix_lab.case.detectors.common import usd_severity as _usd_severity


# -- 3. chain hopping -------------------------------------------------------------------------
@register("chain_hopping", max_gap_hours=24, high_if_chains=3, high_window_hours=72)
def chain_hopping(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        """
        SELECT a.bridge_event_id AS hop1, b.bridge_event_id AS hop2, a.src_chain, a.dst_chain AS mid_chain,
               coalesce(b.dst_chain, b.declared_dst_chain) AS end_chain, a.dst_address AS mid_address,
               a.src_time, a.dst_time, b.src_time AS src_time2, b.dst_time AS dst_time2,
               date_diff('minute', a.dst_time, b.src_time) AS gap_min, a.bridge_name AS bridge1, b.bridge_name AS bridge2,
               a.src_tx_hash AS tx1, b.src_tx_hash AS tx2, coalesce(a.src_usd, 0) AS usd
        FROM bridge_events a JOIN bridge_events b
          ON b.case_id = a.case_id AND b.src_chain = a.dst_chain AND b.src_address = a.dst_address
         AND b.src_time BETWEEN a.dst_time AND a.dst_time + to_hours($gap::BIGINT)
        WHERE a.case_id = $case ORDER BY a.dst_time
        """,
        {"case": case_id, "gap": int(p["max_gap_hours"])},
    )
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((r["mid_chain"], r["mid_address"]), []).append(r)
    flags = []
    for (chain, address), hops in grouped.items():
        chains = (
            {h["src_chain"] for h in hops} | {h["mid_chain"] for h in hops} | {h["end_chain"] for h in hops}
        )
        fast = any(
            h["dst_time2"] is not None
            and h["dst_time2"] - h["src_time"] <= timedelta(hours=p["high_window_hours"])
            for h in hops
        )
        high = (len(chains) >= p["high_if_chains"] and fast) or "bitcoin" in {h["end_chain"] for h in hops}
        usd = sum(h["usd"] for h in hops)
        hops.sort(key=lambda h: (h["gap_min"], h["hop1"]))
        flags.append(
            {
                "chain": chain, "address": address, "severity": "high" if high else "medium",
                "score": round(min(1.0, len(chains) / 4 + len(hops) / 20), 3),
                "window_start": min(h["src_time"] for h in hops), "window_end": max(h["src_time2"] for h in hops),
                "evidence": {"chains": sorted(c for c in chains if c), "usd": round(usd, 2), "min_gap_minutes": hops[0]["gap_min"],
                             "tx_hashes": list(dict.fromkeys(x for h in hops for x in (h["tx1"], h["tx2"])))[:EVIDENCE_CAP],
                             "bridge_event_ids": sorted({x for h in hops for x in (h["hop1"], h["hop2"])})[:EVIDENCE_CAP],
                             "hops": [{"bridge_event_ids": [h["hop1"], h["hop2"]], "bridges": [h["bridge1"], h["bridge2"]],
                                       "route": [h["src_chain"], h["mid_chain"], h["end_chain"]], "gap_minutes": h["gap_min"],
                                       "tx_hashes": [h["tx1"], h["tx2"]]} for h in hops[:EVIDENCE_CAP]]},
            }
        )  # fmt: skip
    return flags


# -- 8. pass-through ------------------------------------------------------------------------------
@register(
    "pass_through",
    ratio_low=0.9,
    ratio_high=1.1,
    max_median_hold_hours=2.0,
    max_span_days=7,
    min_in_usd=10_000.0,
)
def pass_through(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        -- change an address sends itself (UTXO) is neither inflow nor outflow, and a failed transfer moves
        -- nothing; the address profiles count both, so their ratio is exact except where either occurs
        special AS (SELECT DISTINCT chain, from_address AS address FROM transfers
                    WHERE case_id = $case AND (from_address = to_address OR status = FALSE)
                    UNION SELECT DISTINCT chain, to_address FROM transfers WHERE case_id = $case AND status = FALSE),
        pre AS (SELECT a.chain, a.address FROM addresses a LEFT JOIN lab s ON s.chain = a.chain AND s.address = a.address
                LEFT JOIN special sp ON sp.chain = a.chain AND sp.address = a.address
                WHERE a.case_id = $case AND a.n_tx_in >= 1 AND a.n_tx_out >= 1 AND a.total_in_usd >= $min_in
                  AND (sp.address IS NOT NULL OR (a.total_out_usd / a.total_in_usd BETWEEN $lo AND $hi
                       AND a.last_seen - a.first_seen <= to_days($span::BIGINT)))
                  AND (s.category IS NULL OR NOT list_contains($services, s.category))),
        legs AS (
          SELECT t.chain, t.to_address AS address, t.tx_hash, t.block_time, t.usd_value AS net_in, 0.0 AS net_out
          FROM moved t SEMI JOIN pre ON pre.chain = t.chain AND pre.address = t.to_address
          WHERE t.from_address IS DISTINCT FROM t.to_address
          UNION ALL
          SELECT t.chain, t.from_address, t.tx_hash, t.block_time, 0.0, t.usd_value
          FROM moved t SEMI JOIN pre ON pre.chain = t.chain AND pre.address = t.from_address
          WHERE t.from_address IS DISTINCT FROM t.to_address),
        cand AS (
          SELECT chain, address, sum(net_in) AS total_in_usd, sum(net_out) AS total_out_usd, min(block_time) AS first_seen,
                 max(block_time) AS last_seen
          FROM legs GROUP BY ALL
          HAVING count(*) FILTER (WHERE net_in > 0) >= 1 AND count(*) FILTER (WHERE net_out > 0) >= 1
             AND sum(net_in) >= $min_in AND sum(net_out) / sum(net_in) BETWEEN $lo AND $hi
             AND max(block_time) - min(block_time) <= to_days($span::BIGINT)),
        inb AS (SELECT l.chain, l.address, l.block_time, l.tx_hash FROM legs l SEMI JOIN cand c USING (chain, address)
                WHERE l.net_in > 0),
        outb AS (SELECT l.chain, l.address, l.block_time, l.tx_hash FROM legs l SEMI JOIN cand c USING (chain, address)
                 WHERE l.net_out > 0),
        holds AS (SELECT inb.chain, inb.address, date_diff('second', inb.block_time, outb.block_time) AS hold_s,
                         inb.tx_hash AS in_tx, outb.tx_hash AS out_tx, inb.block_time AS in_t
                  FROM inb ASOF JOIN outb ON inb.chain = outb.chain AND inb.address = outb.address
                   AND outb.block_time >= inb.block_time)
        SELECT c.*, median(h.hold_s) AS median_hold_s, list(h.in_tx ORDER BY h.in_t, h.in_tx)[1:10] AS in_txs,
               list(h.out_tx ORDER BY h.in_t, h.out_tx)[1:10] AS out_txs
        FROM cand c JOIN holds h USING (chain, address) GROUP BY ALL
        HAVING median(h.hold_s) < $hold
        """,
        {"case": case_id, "min_in": p["min_in_usd"], "lo": p["ratio_low"], "hi": p["ratio_high"],
         "span": int(p["max_span_days"]), "services": _services(p), "hold": p["max_median_hold_hours"] * 3600},
    )  # fmt: skip
    return [
        {
            "chain": r["chain"], "address": r["address"], "severity": _usd_severity(r["total_in_usd"]),
            "score": round(1 - min(1.0, r["median_hold_s"] / (p["max_median_hold_hours"] * 3600)), 3),
            "window_start": r["first_seen"], "window_end": r["last_seen"],
            "evidence": {"usd_in": round(r["total_in_usd"], 2), "usd_out": round(r["total_out_usd"], 2), "netting": "change an address sends itself is not counted",
                         "ratio": round(r["total_out_usd"] / r["total_in_usd"], 4),
                         "median_hold_minutes": round(r["median_hold_s"] / 60, 1),
                         "span_hours": round((r["last_seen"] - r["first_seen"]).total_seconds() / 3600, 1),
                         "tx_hashes": list(dict.fromkeys([*r["in_txs"], *r["out_txs"]]))[:EVIDENCE_CAP]},
        }
        for r in rows
    ]  # fmt: skip
