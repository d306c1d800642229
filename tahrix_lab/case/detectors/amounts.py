"""Structuring and amounts family: structuring, repeated amounts, dusting, address poisoning (DOMAIN.md §3.4–3.6)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tahrix_lab.case.db import CaseDB, jsonable
from tahrix_lab.case.detectors.common import (
    DISTRIBUTOR_CATEGORIES,
    EVIDENCE_CAP,
    LAB,
    MOVED,
    ZERO_ADDRESSES,
    register,
    rnd,
)
from tahrix_lab.case.detectors.common import rows as _rows
from tahrix_lab.case.detectors.common import services as _services


# -- 4. structuring and repeated amounts ---------------------------------------------------------
@register("structuring", thresholds_usd=[10_000], band_low=0.90, window_hours=24, min_count=3)
def structuring(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    flags = []
    for threshold in p["thresholds_usd"]:
        rows = _rows(
            db,
            f"""
            WITH {LAB}, {MOVED}
            SELECT t.chain, t.from_address, t.to_address, t.tx_hash, t.block_time, t.usd_value
            FROM moved t LEFT JOIN lab s ON s.chain = t.chain AND s.address = t.from_address
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


@register("repeated_amount", window_hours=6, min_count=5, min_usd=1.0)
def repeated_amount(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        -- only (source, counterparty, asset, amount) groups with enough rows at all get the window pass
        -- (grouped on one 64-bit hash of the key first: far cheaper than five strings; the window pass
        -- below partitions on the real columns, so a collision only costs time)
        grp AS (
          SELECT hash(chain, from_address, to_address, asset_key, amount_raw) AS h FROM moved
          WHERE (usd_value >= $min_usd OR (usd_value IS NULL AND amount_raw <> '0'))
          GROUP BY ALL HAVING count(*) >= $min),
        c AS (
          SELECT t.chain, t.from_address, t.to_address, t.asset_key, t.amount_raw, t.amount, t.tx_hash, t.block_time,
                 t.usd_value,
                 count(*) OVER (PARTITION BY t.chain, t.from_address, t.to_address, t.asset_key, t.amount_raw
                                ORDER BY t.block_time RANGE BETWEEN CURRENT ROW AND to_hours($hours::BIGINT) FOLLOWING) AS n
          FROM moved t SEMI JOIN grp ON grp.h = hash(t.chain, t.from_address, t.to_address, t.asset_key, t.amount_raw)
          LEFT JOIN lab s ON s.chain = t.chain AND s.address = t.from_address
          WHERE (t.usd_value >= $min_usd OR (t.usd_value IS NULL AND t.amount_raw <> '0'))
            AND (s.category IS NULL OR NOT list_contains($services, s.category)))
        SELECT chain, from_address, to_address, asset_key, amount_raw, any_value(amount) AS amount, max(n) AS max_n,
               count(*) AS total, sum(usd_value) AS usd,
               list(tx_hash ORDER BY block_time, tx_hash)[1:{EVIDENCE_CAP}] AS txs, min(block_time) t0, max(block_time) t1
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
                         "usd": rnd(r["usd"]), "tx_hashes": r["txs"]},
        }
        for r in rows
    ]  # fmt: skip


# -- 5. dusting and 6. address poisoning -----------------------------------------------------------
# What a distributor's label name or a distribution method says (Etherscan name tags such as
# "CoinTool: MultiSender", "Uniswap: Merkle Distributor"; methods multisendToken, airdrop, disperseEther).
DISTRIBUTION_WORDS = (
    r"airdrop|distribut|multi[ _-]?sen[dt]|batch[ _-]?(send|transfer)|bulk[ _-]?sen[dt]|disperse|merkle"
)


@register("dusting", btc_dust_sats=546, evm_dust_usd=1.0, min_recipients=10)
def dusting(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        -- a labelled contract whose name says it distributes, whatever its category (``defi``, a protocol slug)
        named AS (SELECT DISTINCT chain, address FROM case_labels
                  WHERE case_id = $case AND regexp_matches(concat_ws(' ', label, entity), $words, 'i'))
        -- unknown USD is not dust; the zero address (mints) and distributors (airdrops) are not dusters: a
        -- labelled distributor, a labelled contract named as one, or a labelled contract called by a
        -- distribution method (multisend, airdrop, disperse…) — for the sender or the contract the tx called
        SELECT d.chain, d.tx_hash, d.from_address, count(DISTINCT d.to_address) AS recipients, min(d.block_time) AS t,
               list(DISTINCT d.to_address ORDER BY d.to_address)[1:{EVIDENCE_CAP}] AS sample
        FROM moved d
        LEFT JOIN lab s ON s.chain = d.chain AND s.address = d.from_address
        LEFT JOIN transactions x ON x.case_id = $case AND x.chain = d.chain AND x.tx_hash = d.tx_hash
        LEFT JOIN lab c ON c.chain = d.chain AND c.address = x.to_address
        LEFT JOIN named ns ON ns.chain = d.chain AND ns.address = d.from_address
        LEFT JOIN named nc ON nc.chain = d.chain AND nc.address = x.to_address
        WHERE d.amount_raw <> '0' AND (
              (d.chain = 'bitcoin' AND TRY_CAST(d.amount_raw AS BIGINT) <= $sats)
           OR (d.chain <> 'bitcoin' AND d.usd_value < $usd))
          AND d.from_address IS NOT NULL AND NOT list_contains($zero, lower(d.from_address))
          AND (s.category IS NULL OR NOT list_contains($distributors, s.category))
          AND (c.category IS NULL OR NOT list_contains($distributors, c.category))
          AND ns.address IS NULL AND nc.address IS NULL
          AND NOT ((s.category IS NOT NULL OR c.category IS NOT NULL)
                   AND regexp_matches(coalesce(x.method_name, ''), $words, 'i'))
        GROUP BY ALL HAVING count(DISTINCT d.to_address) >= $min
        """,
        {
            "zero": [z.lower() for z in ZERO_ADDRESSES],
            "distributors": list(DISTRIBUTOR_CATEGORIES),
            "words": DISTRIBUTION_WORDS,
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


@register("address_poisoning", prefix_len=4, suffix_len=4, dust_usd=1.0, days=90)
def address_poisoning(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    pre, suf = int(p["prefix_len"]), int(p["suffix_len"])
    rows = _rows(
        db,
        f"""
        WITH {MOVED},
        dust AS (
          SELECT chain, to_address AS victim, from_address AS lookalike, tx_hash, block_time FROM moved
          WHERE (usd_value < $dust OR amount_raw = '0') AND chain <> 'bitcoin'
            AND from_address IS NOT NULL AND to_address IS NOT NULL),
        prior AS (
          SELECT chain, from_address AS victim, to_address AS counterparty, min(block_time) AS first_t FROM moved
          WHERE (usd_value >= $dust OR (usd_value IS NULL AND amount_raw <> '0')) GROUP BY ALL)
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
            "AND from_address = ? AND to_address IN (SELECT unnest(?::VARCHAR[])) AND status IS NOT FALSE "
            "AND (usd_value >= ? OR (usd_value IS NULL AND amount_raw <> '0')) AND block_time > ? ORDER BY block_time",
            [case_id, chain, victim, lookalikes, p["dust_usd"], first],
        )
        known = [m["usd_value"] for m in missends if m["usd_value"] is not None]
        lost = sum(known) if known else None
        flags.append(
            {
                "chain": chain, "address": victim, "severity": "critical" if missends else "medium",
                "score": 1.0 if missends else 0.5, "window_start": first,
                "window_end": max([h["block_time"] for h in hits] + [m["block_time"] for m in missends]),
                "evidence": {"lookalikes": lookalikes, "imitated": sorted({h["imitated"] for h in hits}),
                             "poisoning_tx_hashes": sorted({h["tx_hash"] for h in hits})[:EVIDENCE_CAP],
                             "missend_tx_hashes": [m["tx_hash"] for m in missends], "missend_usd": rnd(lost), "missend_unpriced": len(missends) - len(known),
                             "tx_hashes": sorted({h["tx_hash"] for h in hits})[:EVIDENCE_CAP] + [m["tx_hash"] for m in missends]},
            }
        )  # fmt: skip
    return flags
