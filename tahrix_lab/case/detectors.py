"""Anomaly detectors (DOMAIN.md §3). Each is SQL over one case plus a little Python.

A detector takes ``(db, case_id, params)`` and returns flag dicts (severity,
score, subject, evidence); ``run_detectors`` stores them with the parameters
used, so a re-run with other parameters updates the same flags in place.
Services (exchanges, DEXes, bridges, mixers, market makers…) are never the
subject of behavioural flags: their flow is not one person's flow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from tahrix_lab.case.db import CaseDB, jsonable
from tahrix_lab.case.taxonomy import SERVICE_CATEGORIES

VERSION = "1.0"
EVIDENCE_CAP = 25

# Resolved label per address: the highest-confidence label wins (conflicts are ranked, not merged).
LAB = """lab AS (
  SELECT chain, address,
         arg_max(category, (coalesce(confidence_level, 0), is_cluster_definer, lastmod)) AS category,
         arg_max(label, (coalesce(confidence_level, 0), is_cluster_definer, lastmod)) AS label
  FROM labels WHERE case_id = $case GROUP BY chain, address)"""

Detector = Callable[[CaseDB, str, dict[str, Any]], list[dict[str, Any]]]

DEFAULTS: dict[str, dict[str, Any]] = {
    "peel_chain": {"max_peel_ratio": 0.20, "min_length": 3, "max_hop_hours": 72},
    "mixer_exposure": {"indirect_min_share": 0.10, "min_usd": 0.0},
    "mixer_bulk_deposit": {"window_minutes": 60, "min_deposits": 3},
    "chain_hopping": {"max_gap_hours": 24, "high_if_chains": 3, "high_window_hours": 72},
    "structuring": {"thresholds_usd": [10_000], "band_low": 0.90, "window_hours": 24, "min_count": 3},
    "repeated_amount": {"window_hours": 6, "min_count": 5, "min_usd": 1.0},
    "dusting": {"btc_dust_sats": 546, "evm_dust_usd": 1.0, "min_recipients": 10},
    "address_poisoning": {"prefix_len": 4, "suffix_len": 4, "dust_usd": 1.0, "days": 90},
    "fresh_address_funding": {"funding_categories": ["mixing_service", "defi_bridge"], "min_usd": 20.0},
    "pass_through": {"ratio_low": 0.9, "ratio_high": 1.1, "max_median_hold_hours": 2.0, "max_span_days": 7,
                     "min_in_usd": 10_000.0},
    "sanctions_exposure": {"indirect_min_share": 0.10},
}  # fmt: skip


def _services(params: dict[str, Any]) -> list[str]:
    return sorted(params.get("service_categories") or SERVICE_CATEGORIES)


def _usd_severity(usd: float, tiers: tuple[float, float, float] = (10_000, 100_000, 1_000_000)) -> str:
    return (
        "critical"
        if usd >= tiers[2]
        else "high"
        if usd >= tiers[1]
        else "medium"
        if usd >= tiers[0]
        else "low"
    )


def _score(usd: float) -> float:
    # log-scaled 0..1 between $100 and $10M
    import math

    return round(max(0.0, min(1.0, (math.log10(max(usd, 1)) - 2) / 5)), 3)


def _rows(db: CaseDB, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = db.cursor().execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


# -- 1. peel chains --------------------------------------------------------------------------
def peel_chain(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        """
        WITH shape AS (
          SELECT u.chain, u.tx_hash,
                 count(*) FILTER (WHERE direction = 'in') n_in,
                 count(*) FILTER (WHERE direction = 'out' AND address IS NOT NULL AND amount_sats > 0) n_out,
                 max(amount_sats) FILTER (WHERE direction = 'out') big_out,
                 min(amount_sats) FILTER (WHERE direction = 'out' AND address IS NOT NULL AND amount_sats > 0) small_out
          FROM utxo_io u WHERE u.case_id = $case GROUP BY ALL),
        peel AS (
          SELECT s.*, small_out::DOUBLE / (big_out + small_out) AS ratio, t.block_time
          FROM shape s JOIN transactions t ON t.case_id = $case AND t.chain = s.chain AND t.tx_hash = s.tx_hash
          WHERE n_in = 1 AND n_out = 2 AND small_out::DOUBLE / (big_out + small_out) <= $ratio),
        ins AS (SELECT chain, tx_hash, address FROM utxo_io WHERE case_id = $case AND direction = 'in'),
        peel_out AS (SELECT o.chain, o.tx_hash, o.address, o.amount_sats FROM utxo_io o
                     JOIN peel p ON p.chain = o.chain AND p.tx_hash = o.tx_hash
                     WHERE o.case_id = $case AND o.direction = 'out' AND o.amount_sats = p.small_out)
        SELECT p.chain, p.tx_hash, p.block_time, p.ratio, i.address AS input_address,
               po.address AS peel_address, po.amount_sats AS peel_sats, child.tx_hash AS child
        FROM peel p
        JOIN ins i ON i.chain = p.chain AND i.tx_hash = p.tx_hash
        LEFT JOIN peel_out po ON po.chain = p.chain AND po.tx_hash = p.tx_hash
        LEFT JOIN utxo_io o ON o.case_id = $case AND o.chain = p.chain AND o.tx_hash = p.tx_hash
             AND o.direction = 'out' AND o.amount_sats = p.big_out
        LEFT JOIN peel child ON child.chain = o.chain AND child.tx_hash = o.spent_by_tx
             AND child.block_time <= p.block_time + to_hours($hop_hours::BIGINT)
        """,
        {"case": case_id, "ratio": p["max_peel_ratio"], "hop_hours": int(p["max_hop_hours"])},
    )
    by_tx = {(r["chain"], r["tx_hash"]): r for r in rows}
    children = {k: (k[0], r["child"]) for k, r in by_tx.items() if r["child"]}
    has_parent = set(children.values())
    lab = db.category_map(case_id)
    flags = []
    for key, r in sorted(by_tx.items()):
        if key in has_parent:
            continue
        chain_txs = [key]
        while chain_txs[-1] in children and children[chain_txs[-1]] in by_tx and len(chain_txs) < 10_000:
            chain_txs.append(children[chain_txs[-1]])
        if len(chain_txs) < p["min_length"]:
            continue
        peels = [by_tx[k] for k in chain_txs]
        to_exchange = sum(1 for x in peels if lab.get((x["chain"], x["peel_address"])) == "exchange")
        flags.append(
            {
                "chain": key[0],
                "address": r["input_address"],
                "tx_hash": key[1],
                "severity": "high" if to_exchange else "medium",
                "score": round(min(1.0, len(chain_txs) / 12), 3),
                "window_start": peels[0]["block_time"],
                "window_end": peels[-1]["block_time"],
                "evidence": {
                    "length": len(chain_txs),
                    "tx_hashes": [k[1] for k in chain_txs][:EVIDENCE_CAP],
                    "peels": [
                        {
                            "tx_hash": x["tx_hash"],
                            "to": x["peel_address"],
                            "sats": x["peel_sats"],
                            "ratio": round(x["ratio"], 4),
                        }
                        for x in peels[:EVIDENCE_CAP]
                    ],
                    "peels_to_exchange_labels": to_exchange,
                },
            }
        )
    return flags


# -- 2. mixers -------------------------------------------------------------------------------
def mixer_exposure(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    direct = _rows(
        db,
        f"""
        WITH {LAB},
        io AS (
          SELECT t.chain, t.to_address AS subject, 'out' AS direction, t.from_address AS mixer, t.usd_value, t.tx_hash,
                 t.block_time FROM transfers t JOIN lab m ON m.chain = t.chain AND m.address = t.from_address
          WHERE t.case_id = $case AND m.category = 'mixing_service'
          UNION ALL
          SELECT t.chain, t.from_address, 'in', t.to_address, t.usd_value, t.tx_hash, t.block_time FROM transfers t
          JOIN lab m ON m.chain = t.chain AND m.address = t.to_address
          WHERE t.case_id = $case AND m.category = 'mixing_service')
        SELECT io.chain, io.subject, list(DISTINCT direction) AS directions, count(*) AS n,
               coalesce(sum(usd_value), 0) AS usd, list(tx_hash ORDER BY block_time)[1:{EVIDENCE_CAP}] AS txs,
               list(DISTINCT mixer) AS mixers, min(block_time) AS t0, max(block_time) AS t1,
               bool_or(direction = 'out') AS received_from_mixer
        FROM io LEFT JOIN lab s ON s.chain = io.chain AND s.address = io.subject
        WHERE io.subject IS NOT NULL AND (s.category IS NULL OR NOT list_contains($services, s.category))
        GROUP BY io.chain, io.subject HAVING coalesce(sum(usd_value), 0) >= $min_usd
        """,
        {"case": case_id, "services": _services(p), "min_usd": p["min_usd"]},
    )
    flags = []
    exposed_in = []
    for r in direct:
        flags.append(
            {
                "chain": r["chain"], "address": r["subject"], "key": "direct",
                "severity": _usd_severity(r["usd"]), "score": _score(r["usd"]),
                "window_start": r["t0"], "window_end": r["t1"],
                "evidence": {"exposure": "direct", "directions": sorted(
                    "received_from_mixer" if d == "out" else "sent_to_mixer" for d in r["directions"]),
                    "mixers": sorted(r["mixers"]), "transfers": r["n"], "usd": round(r["usd"], 2),
                    "tx_hashes": r["txs"]},
            }
        )  # fmt: skip
        if r["received_from_mixer"]:
            exposed_in.append(r)
    if not exposed_in:
        return flags
    direct_keys = {(r["chain"], r["subject"]) for r in direct}
    indirect = _rows(
        db,
        f"""
        WITH {LAB},
        src AS (SELECT unnest($chains::VARCHAR[]) AS chain, unnest($addrs::VARCHAR[]) AS address),
        hop AS (SELECT t.chain, t.to_address AS subject, sum(coalesce(t.usd_value, 0)) AS usd,
                       list(t.tx_hash ORDER BY t.block_time)[1:{EVIDENCE_CAP}] AS txs, list(DISTINCT t.from_address)[1:{EVIDENCE_CAP}] AS via,
                       min(t.block_time) t0, max(t.block_time) t1
                FROM transfers t JOIN src ON src.chain = t.chain AND src.address = t.from_address
                WHERE t.case_id = $case GROUP BY ALL)
        SELECT hop.*, a.total_in_usd FROM hop
        JOIN addresses a ON a.case_id = $case AND a.chain = hop.chain AND a.address = hop.subject
        LEFT JOIN lab s ON s.chain = hop.chain AND s.address = hop.subject
        WHERE (s.category IS NULL OR NOT list_contains($services, s.category)) AND a.total_in_usd > 0
          AND hop.usd / a.total_in_usd >= $share
        """,
        {"case": case_id, "chains": [r["chain"] for r in exposed_in], "addrs": [r["subject"] for r in exposed_in],
         "services": _services(p), "share": p["indirect_min_share"]},
    )  # fmt: skip
    for r in indirect:
        if (r["chain"], r["subject"]) in direct_keys:
            continue
        share = r["usd"] / r["total_in_usd"]
        flags.append(
            {
                "chain": r["chain"], "address": r["subject"], "key": "indirect",
                "severity": "high" if share >= 0.5 and r["usd"] >= 100_000 else "medium",
                "score": round(min(1.0, share), 3), "window_start": r["t0"], "window_end": r["t1"],
                "evidence": {"exposure": "indirect", "hops": 2, "share_of_inflow": round(share, 4),
                             "usd": round(r["usd"], 2), "via_addresses": r["via"], "tx_hashes": r["txs"]},
            }
        )  # fmt: skip
    return flags


def mixer_bulk_deposit(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB},
        dep AS (
          SELECT t.chain, t.from_address, t.to_address, t.tx_hash, t.block_time, t.usd_value,
                 count(*) OVER (PARTITION BY t.chain, t.from_address, t.to_address ORDER BY t.block_time
                                RANGE BETWEEN CURRENT ROW AND to_minutes($window::BIGINT) FOLLOWING) AS in_window
          FROM transfers t JOIN lab m ON m.chain = t.chain AND m.address = t.to_address
          LEFT JOIN lab s ON s.chain = t.chain AND s.address = t.from_address
          WHERE t.case_id = $case AND m.category = 'mixing_service'
            AND (s.category IS NULL OR NOT list_contains($services, s.category)))
        SELECT chain, from_address, to_address, max(in_window) AS max_in_window, count(*) AS deposits,
               count(*) FILTER (WHERE in_window >= $min) AS burst_starts, coalesce(sum(usd_value), 0) AS usd,
               list(tx_hash ORDER BY block_time)[1:{EVIDENCE_CAP}] AS txs, min(block_time) t0, max(block_time) t1
        FROM dep GROUP BY ALL HAVING max(in_window) >= $min
        """,
        {
            "case": case_id,
            "window": int(p["window_minutes"]),
            "min": int(p["min_deposits"]),
            "services": _services(p),
        },
    )
    return [
        {
            "chain": r["chain"], "address": r["from_address"], "key": r["to_address"],
            "severity": "high" if r["usd"] >= 1_000_000 else "medium", "score": round(min(1.0, r["max_in_window"] / 20), 3),
            "window_start": r["t0"], "window_end": r["t1"],
            "evidence": {"mixer": r["to_address"], "deposits": r["deposits"], "max_deposits_in_window": r["max_in_window"],
                         "usd": round(r["usd"], 2), "tx_hashes": r["txs"]},
        }
        for r in rows
    ]  # fmt: skip


# -- 3. chain hopping -------------------------------------------------------------------------
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


# -- 4. structuring and repeated amounts ---------------------------------------------------------
def structuring(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    flags = []
    for threshold in p["thresholds_usd"]:
        rows = _rows(
            db,
            f"""
            WITH {LAB}
            SELECT t.chain, t.from_address, t.to_address, t.tx_hash, t.block_time, t.usd_value
            FROM transfers t LEFT JOIN lab s ON s.chain = t.chain AND s.address = t.from_address
            WHERE t.case_id = $case AND t.usd_value >= $lo AND t.usd_value < $hi AND t.status IS NOT FALSE
              AND (s.category IS NULL OR NOT list_contains($services, s.category))
            ORDER BY t.chain, t.from_address, t.block_time
            """,
            {"case": case_id, "lo": threshold * p["band_low"], "hi": threshold, "services": _services(p)},
        )
        by_src: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in rows:
            by_src.setdefault((r["chain"], r["from_address"]), []).append(r)
        window = timedelta(hours=p["window_hours"])
        for (chain, src), txs in by_src.items():
            best: list[dict[str, Any]] = []
            j = 0
            for i in range(len(txs)):
                while txs[i]["block_time"] - txs[j]["block_time"] > window:
                    j += 1
                if i - j + 1 > len(best):
                    best = txs[j : i + 1]
            if len(best) < p["min_count"]:
                continue
            usd = sum(x["usd_value"] for x in best)
            flags.append(
                {
                    "chain": chain, "address": src, "key": str(threshold),
                    "severity": "high" if len(best) >= 2 * p["min_count"] else "medium",
                    "score": round(min(1.0, len(best) / 12), 3),
                    "window_start": best[0]["block_time"], "window_end": best[-1]["block_time"],
                    "evidence": {"threshold_usd": threshold, "band_usd": [threshold * p["band_low"], threshold],
                                 "count_in_window": len(best), "usd": round(usd, 2),
                                 "recipients": sorted({x["to_address"] for x in best})[:EVIDENCE_CAP],
                                 "tx_hashes": [x["tx_hash"] for x in best][:EVIDENCE_CAP]},
                }
            )  # fmt: skip
    return flags


def repeated_amount(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB},
        -- only (source, counterparty, asset, amount) groups with enough rows at all get the window pass
        grp AS (
          SELECT chain, from_address, to_address, asset_key, amount_raw FROM transfers
          WHERE case_id = $case AND coalesce(usd_value, 0) >= $min_usd
          GROUP BY ALL HAVING count(*) >= $min),
        c AS (
          SELECT t.chain, t.from_address, t.to_address, t.asset_key, t.amount_raw, t.amount, t.tx_hash, t.block_time,
                 t.usd_value,
                 count(*) OVER (PARTITION BY t.chain, t.from_address, t.to_address, t.asset_key, t.amount_raw
                                ORDER BY t.block_time RANGE BETWEEN CURRENT ROW AND to_hours($hours::BIGINT) FOLLOWING) AS n
          FROM transfers t SEMI JOIN grp USING (chain, from_address, to_address, asset_key, amount_raw)
          LEFT JOIN lab s ON s.chain = t.chain AND s.address = t.from_address
          WHERE t.case_id = $case AND coalesce(t.usd_value, 0) >= $min_usd
            AND (s.category IS NULL OR NOT list_contains($services, s.category)))
        SELECT chain, from_address, to_address, asset_key, amount_raw, any_value(amount) AS amount, max(n) AS max_n,
               count(*) AS total, coalesce(sum(usd_value), 0) AS usd,
               list(tx_hash ORDER BY block_time)[1:{EVIDENCE_CAP}] AS txs, min(block_time) t0, max(block_time) t1
        FROM c GROUP BY ALL HAVING max(n) >= $min
        """,
        {"case": case_id, "hours": int(p["window_hours"]), "min": int(p["min_count"]), "min_usd": p["min_usd"],
         "services": _services(p)},
    )  # fmt: skip
    return [
        {
            "chain": r["chain"], "address": r["from_address"], "key": f"{r['to_address']}|{r['asset_key']}|{r['amount_raw']}",
            "severity": "medium" if r["max_n"] < 10 else "high", "score": round(min(1.0, r["max_n"] / 20), 3),
            "window_start": r["t0"], "window_end": r["t1"],
            "evidence": {"counterparty": r["to_address"], "asset_key": r["asset_key"], "amount": jsonable(r["amount"]),
                         "amount_raw": r["amount_raw"], "max_in_window": r["max_n"], "total": r["total"],
                         "usd": round(r["usd"], 2), "tx_hashes": r["txs"]},
        }
        for r in rows
    ]  # fmt: skip


# -- 5. dusting and 6. address poisoning -----------------------------------------------------------
def dusting(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        SELECT chain, tx_hash, from_address, count(DISTINCT to_address) AS recipients, min(block_time) AS t,
               list(DISTINCT to_address)[1:{EVIDENCE_CAP}] AS sample
        FROM transfers
        WHERE case_id = $case AND amount > 0 AND (
              (chain = 'bitcoin' AND TRY_CAST(amount_raw AS BIGINT) <= $sats)
           OR (chain <> 'bitcoin' AND coalesce(usd_value, 0) < $usd))
        GROUP BY ALL HAVING count(DISTINCT to_address) >= $min
        """,
        {
            "case": case_id,
            "sats": int(p["btc_dust_sats"]),
            "usd": p["evm_dust_usd"],
            "min": int(p["min_recipients"]),
        },
    )
    return [
        {
            "chain": r["chain"], "address": r["from_address"], "tx_hash": r["tx_hash"], "severity": "low",
            "score": round(min(1.0, r["recipients"] / 50), 3), "window_start": r["t"], "window_end": r["t"],
            "evidence": {"recipients": r["recipients"], "recipient_sample": sorted(r["sample"]), "tx_hashes": [r["tx_hash"]]},
        }
        for r in rows
    ]  # fmt: skip


def address_poisoning(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    pre, suf = int(p["prefix_len"]), int(p["suffix_len"])
    rows = _rows(
        db,
        """
        WITH dust AS (
          SELECT chain, to_address AS victim, from_address AS lookalike, tx_hash, block_time FROM transfers
          WHERE case_id = $case AND coalesce(usd_value, 0) < $dust AND chain <> 'bitcoin'
            AND from_address IS NOT NULL AND to_address IS NOT NULL),
        prior AS (
          SELECT chain, from_address AS victim, to_address AS counterparty, min(block_time) AS first_t FROM transfers
          WHERE case_id = $case AND coalesce(usd_value, 0) >= $dust GROUP BY ALL)
        SELECT d.chain, d.victim, d.lookalike, p.counterparty AS imitated, d.tx_hash, d.block_time
        FROM dust d JOIN prior p ON p.chain = d.chain AND p.victim = d.victim AND p.first_t < d.block_time
         AND p.first_t >= d.block_time - to_days($days::BIGINT)
        WHERE d.lookalike <> p.counterparty
          AND substr(d.lookalike, 3, $pre) = substr(p.counterparty, 3, $pre)
          AND right(d.lookalike, $suf) = right(p.counterparty, $suf)
        ORDER BY d.block_time
        """,
        {"case": case_id, "dust": p["dust_usd"], "pre": pre, "suf": suf, "days": int(p["days"])},
    )
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((r["chain"], r["victim"]), []).append(r)
    flags = []
    for (chain, victim), hits in grouped.items():
        lookalikes = sorted({h["lookalike"] for h in hits})
        first = min(h["block_time"] for h in hits)
        missends = db.rows(
            "SELECT tx_hash, to_address, usd_value, block_time FROM transfers WHERE case_id = ? AND chain = ? "
            "AND from_address = ? AND to_address IN (SELECT unnest(?::VARCHAR[])) AND coalesce(usd_value, 0) >= ? "
            "AND block_time > ? ORDER BY block_time",
            [case_id, chain, victim, lookalikes, p["dust_usd"], first],
        )
        lost = sum(m["usd_value"] or 0 for m in missends)
        flags.append(
            {
                "chain": chain, "address": victim, "severity": "critical" if missends else "medium",
                "score": 1.0 if missends else 0.5, "window_start": first,
                "window_end": max([h["block_time"] for h in hits] + [m["block_time"] for m in missends]),
                "evidence": {"lookalikes": lookalikes, "imitated": sorted({h["imitated"] for h in hits}),
                             "poisoning_tx_hashes": sorted({h["tx_hash"] for h in hits})[:EVIDENCE_CAP],
                             "missend_tx_hashes": [m["tx_hash"] for m in missends], "missend_usd": round(lost, 2),
                             "tx_hashes": sorted({h["tx_hash"] for h in hits})[:EVIDENCE_CAP] + [m["tx_hash"] for m in missends]},
            }
        )  # fmt: skip
    return flags


# -- 7. fresh-address funding ------------------------------------------------------------------
def fresh_address_funding(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB},
        firsts AS (SELECT chain, to_address AS address, min(block_time) AS t0 FROM transfers
                   WHERE case_id = $case AND to_address IS NOT NULL GROUP BY ALL),
        firstout AS (SELECT chain, from_address AS address, min(block_time) AS t FROM transfers
                     WHERE case_id = $case AND from_address IS NOT NULL GROUP BY ALL),
        fund AS (SELECT tr.chain, tr.to_address AS address, tr.from_address AS funder, tr.tx_hash, tr.block_time,
                        coalesce(tr.usd_value, 0) AS usd
                 FROM transfers tr JOIN firsts f ON f.chain = tr.chain AND f.address = tr.to_address AND f.t0 = tr.block_time
                 WHERE tr.case_id = $case)
        SELECT fund.*, m.category AS funder_category, m.label AS funder_label, a.first_out_nonce
        FROM fund JOIN lab m ON m.chain = fund.chain AND m.address = fund.funder
        LEFT JOIN lab s ON s.chain = fund.chain AND s.address = fund.address
        LEFT JOIN firstout o ON o.chain = fund.chain AND o.address = fund.address
        LEFT JOIN addresses a ON a.case_id = $case AND a.chain = fund.chain AND a.address = fund.address
        WHERE list_contains($cats, m.category) AND fund.usd >= $min_usd
          AND (o.t IS NULL OR o.t >= fund.block_time) AND coalesce(a.first_out_nonce, 0) = 0
          AND (s.category IS NULL OR NOT list_contains($services, s.category))
        """,
        {
            "case": case_id,
            "cats": list(p["funding_categories"]),
            "min_usd": p["min_usd"],
            "services": _services(p),
        },
    )
    flags = []
    seen: set[tuple[str, str]] = set()
    for r in rows:
        if (r["chain"], r["address"]) in seen:
            continue
        seen.add((r["chain"], r["address"]))
        mixer = r["funder_category"] == "mixing_service"
        sev = (
            "critical"
            if mixer and r["usd"] >= 100_000
            else "high"
            if mixer or r["usd"] >= 100_000
            else "medium"
        )
        flags.append(
            {
                "chain": r["chain"], "address": r["address"], "tx_hash": r["tx_hash"], "severity": sev, "score": _score(r["usd"]),
                "window_start": r["block_time"], "window_end": r["block_time"],
                "evidence": {"funder": r["funder"], "funder_category": r["funder_category"], "funder_label": r["funder_label"],
                             "usd": round(r["usd"], 2), "tx_hashes": [r["tx_hash"]], "prior_activity": False},
            }
        )  # fmt: skip
    return flags


# -- 8. pass-through ------------------------------------------------------------------------------
def pass_through(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB},
        cand AS (
          SELECT a.chain, a.address, a.total_in_usd, a.total_out_usd, a.first_seen, a.last_seen, a.n_tx_in, a.n_tx_out
          FROM addresses a LEFT JOIN lab s ON s.chain = a.chain AND s.address = a.address
          WHERE a.case_id = $case AND a.n_tx_in >= 1 AND a.n_tx_out >= 1 AND a.total_in_usd >= $min_in
            AND a.total_out_usd / a.total_in_usd BETWEEN $lo AND $hi
            AND a.last_seen - a.first_seen <= to_days($span::BIGINT)
            AND (s.category IS NULL OR NOT list_contains($services, s.category))),
        inb AS (SELECT t.chain, t.to_address AS address, t.block_time, t.tx_hash FROM transfers t
                JOIN cand c ON c.chain = t.chain AND c.address = t.to_address WHERE t.case_id = $case),
        outb AS (SELECT t.chain, t.from_address AS address, t.block_time, t.tx_hash FROM transfers t
                 JOIN cand c ON c.chain = t.chain AND c.address = t.from_address WHERE t.case_id = $case),
        holds AS (SELECT inb.chain, inb.address, date_diff('second', inb.block_time, outb.block_time) AS hold_s,
                         inb.tx_hash AS in_tx, outb.tx_hash AS out_tx
                  FROM inb ASOF JOIN outb ON inb.chain = outb.chain AND inb.address = outb.address
                   AND outb.block_time >= inb.block_time)
        SELECT c.*, median(h.hold_s) AS median_hold_s, list(h.in_tx)[1:10] AS in_txs, list(h.out_tx)[1:10] AS out_txs
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
            "evidence": {"usd_in": round(r["total_in_usd"], 2), "usd_out": round(r["total_out_usd"], 2),
                         "ratio": round(r["total_out_usd"] / r["total_in_usd"], 4),
                         "median_hold_minutes": round(r["median_hold_s"] / 60, 1),
                         "span_hours": round((r["last_seen"] - r["first_seen"]).total_seconds() / 3600, 1),
                         "tx_hashes": list(dict.fromkeys([*r["in_txs"], *r["out_txs"]]))[:EVIDENCE_CAP]},
        }
        for r in rows
    ]  # fmt: skip


# -- 9. sanctions exposure ----------------------------------------------------------------------
def sanctions_exposure(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    direct = _rows(
        db,
        f"""
        WITH {LAB},
        sanc AS (SELECT chain, address, label_id, label, valid_from, valid_to FROM labels
                 WHERE case_id = $case AND (abuse = 'sanction' OR category = 'sanction')),
        io AS (
          SELECT t.chain, t.from_address AS subject, 'sent_to_sanctioned' AS direction, t.tx_hash, t.block_time,
                 t.usd_value, s.label_id, s.address AS listed
          FROM transfers t JOIN sanc s ON s.chain = t.chain AND s.address = t.to_address
          WHERE t.case_id = $case AND (s.valid_from IS NULL OR t.block_time >= s.valid_from)
            AND (s.valid_to IS NULL OR t.block_time < s.valid_to)
          UNION ALL
          SELECT t.chain, t.to_address, 'received_from_sanctioned', t.tx_hash, t.block_time, t.usd_value, s.label_id,
                 s.address
          FROM transfers t JOIN sanc s ON s.chain = t.chain AND s.address = t.from_address
          WHERE t.case_id = $case AND (s.valid_from IS NULL OR t.block_time >= s.valid_from)
            AND (s.valid_to IS NULL OR t.block_time < s.valid_to))
        SELECT io.chain, io.subject, list(DISTINCT direction) AS directions, coalesce(sum(usd_value), 0) AS usd,
               list(tx_hash ORDER BY block_time)[1:{EVIDENCE_CAP}] AS txs, list(DISTINCT label_id) AS label_ids,
               list(DISTINCT listed) AS listed, min(block_time) t0, max(block_time) t1
        FROM io LEFT JOIN lab x ON x.chain = io.chain AND x.address = io.subject
        WHERE io.subject IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sanc WHERE sanc.chain = io.chain AND sanc.address = io.subject)
          AND (x.category IS NULL OR NOT list_contains($services, x.category))
        GROUP BY io.chain, io.subject
        """,
        {"case": case_id, "services": _services(p)},
    )
    flags = [
        {
            "chain": r["chain"], "address": r["subject"], "key": "direct", "severity": "critical", "score": 1.0,
            "window_start": r["t0"], "window_end": r["t1"],
            "evidence": {"exposure": "direct", "directions": sorted(r["directions"]), "listed_addresses": sorted(r["listed"]),
                         "label_ids": sorted(r["label_ids"]), "usd": round(r["usd"], 2), "tx_hashes": r["txs"],
                         "note": "only transfers inside the label's validity window count"},
        }
        for r in direct
    ]  # fmt: skip
    if not direct:
        return flags
    keys = {(r["chain"], r["subject"]) for r in direct}
    indirect = _rows(
        db,
        f"""
        WITH {LAB},
        ex AS (SELECT unnest($chains::VARCHAR[]) AS chain, unnest($addrs::VARCHAR[]) AS address, unnest($t0::TIMESTAMP[]) AS t0),
        hop AS (SELECT t.chain, t.from_address AS subject, sum(coalesce(t.usd_value, 0)) AS usd,
                       list(t.tx_hash)[1:{EVIDENCE_CAP}] AS txs, list(DISTINCT t.to_address) AS via
                FROM transfers t JOIN ex ON ex.chain = t.chain AND ex.address = t.to_address
                WHERE t.case_id = $case GROUP BY ALL)
        SELECT hop.*, a.total_out_usd FROM hop
        JOIN addresses a ON a.case_id = $case AND a.chain = hop.chain AND a.address = hop.subject
        LEFT JOIN lab x ON x.chain = hop.chain AND x.address = hop.subject
        WHERE a.total_out_usd > 0 AND hop.usd / a.total_out_usd >= $share
          AND (x.category IS NULL OR NOT list_contains($services, x.category))
        """,
        {"case": case_id, "chains": [r["chain"] for r in direct], "addrs": [r["subject"] for r in direct],
         "t0": [r["t0"] for r in direct], "share": p["indirect_min_share"], "services": _services(p)},
    )  # fmt: skip
    for r in indirect:
        if (r["chain"], r["subject"]) in keys:
            continue
        share = r["usd"] / r["total_out_usd"]
        flags.append(
            {
                "chain": r["chain"], "address": r["subject"], "key": "indirect", "severity": "high", "score": round(share, 3),
                "evidence": {"exposure": "indirect", "hops": 2, "share_of_outflow": round(share, 4), "via_addresses": sorted(r["via"]),
                             "usd": round(r["usd"], 2), "tx_hashes": r["txs"]},
            }
        )  # fmt: skip
    return flags


DETECTORS: dict[str, Detector] = {
    "peel_chain": peel_chain,
    "mixer_exposure": mixer_exposure,
    "mixer_bulk_deposit": mixer_bulk_deposit,
    "chain_hopping": chain_hopping,
    "structuring": structuring,
    "repeated_amount": repeated_amount,
    "dusting": dusting,
    "address_poisoning": address_poisoning,
    "fresh_address_funding": fresh_address_funding,
    "pass_through": pass_through,
    "sanctions_exposure": sanctions_exposure,
}


def run_detectors(
    db: CaseDB,
    case_id: str,
    detectors: list[str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run detectors over a case, store their flags; return ids and a summary with the params used."""
    names = detectors or list(DETECTORS)
    unknown = [n for n in names if n not in DETECTORS]
    if unknown:
        raise ValueError(f"Unknown detector(s) {unknown}; known: {sorted(DETECTORS)}")
    summary: dict[str, Any] = {}
    all_ids: list[str] = []
    for name in names:
        params = {**DEFAULTS[name], **((overrides or {}).get(name) or {})}
        started = datetime.now()  # noqa: DTZ005 - a duration only
        flags = DETECTORS[name](db, case_id, params)
        for f in flags:
            f["evidence"] = jsonable(f.get("evidence", {}))
        ids = db.upsert_flags(case_id, name, flags, json.loads(json.dumps(jsonable(params))), VERSION)
        all_ids += ids
        summary[name] = {
            "flags": len(ids),
            "params": jsonable(params),
            "seconds": round((datetime.now() - started).total_seconds(), 3),  # noqa: DTZ005
        }
    return {"case_id": case_id, "flag_ids": all_ids, "by_detector": summary}
