"""Exposure family: mixers, bulk mixer deposits, sanctions, fresh-address funding (DOMAIN.md §3.2, 3.7, 3.9)."""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors.common import CAT_KEY, EVIDENCE_CAP, LAB, MOVED, ZERO_ADDRESSES, register, rnd
from tahrix_lab.case.detectors.common import rows as _rows
from tahrix_lab.case.detectors.common import score as _score
from tahrix_lab.case.detectors.common import services as _services
from tahrix_lab.case.detectors.common import usd_severity as _usd_severity
from tahrix_lab.case.labels.library import cite
from tahrix_lab.case.taxonomy import FUNDING_CATEGORIES


# -- 2. mixers -------------------------------------------------------------------------------
@register("mixer_exposure", indirect_min_share=0.10, min_usd=0.0)
def mixer_exposure(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    direct = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        io AS (
          SELECT t.chain, t.to_address AS subject, 'out' AS direction, t.from_address AS mixer, t.usd_value, t.tx_hash,
                 t.block_time FROM moved t JOIN lab m ON m.chain = t.chain AND m.address = t.from_address
          WHERE t.case_id = $case AND m.category = 'mixing_service'
          UNION ALL
          SELECT t.chain, t.from_address, 'in', t.to_address, t.usd_value, t.tx_hash, t.block_time FROM moved t
          JOIN lab m ON m.chain = t.chain AND m.address = t.to_address
          WHERE t.case_id = $case AND m.category = 'mixing_service')
        SELECT io.chain, io.subject, list(DISTINCT direction ORDER BY direction) AS directions, count(*) AS n,
               sum(usd_value) AS usd, count(*) FILTER (WHERE usd_value IS NULL) AS unpriced,
               list(tx_hash ORDER BY block_time, tx_hash)[1:{EVIDENCE_CAP}] AS txs, list(DISTINCT mixer ORDER BY mixer) AS mixers, min(block_time) AS t0, max(block_time) AS t1,
               bool_or(direction = 'out') AS received_from_mixer
        FROM io LEFT JOIN lab s ON s.chain = io.chain AND s.address = io.subject
        WHERE io.subject IS NOT NULL AND (s.category IS NULL OR NOT list_contains($services, s.category))
        GROUP BY io.chain, io.subject HAVING sum(usd_value) IS NULL OR sum(usd_value) >= $min_usd
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
                    "mixers": sorted(r["mixers"]), "transfers": r["n"], "usd": rnd(r["usd"]),
                    "unpriced_transfers": r["unpriced"], "tx_hashes": r["txs"]},
            }
        )  # fmt: skip
        if r["received_from_mixer"]:
            exposed_in.append(r)
    for r in _second_hop(db, case_id, exposed_in, direct, p, seed_sends=True):
        share = r["share"]
        flags.append(
            {
                "chain": r["chain"], "address": r["subject"], "key": "indirect",
                "severity": "high" if share >= 0.5 and (r["usd"] or 0) >= 100_000 else "medium",
                "score": round(min(1.0, share), 3), "window_start": r["t0"], "window_end": r["t1"],
                "evidence": {"exposure": "indirect", "hops": 2, "share_of_inflow": round(share, 4),
                             "usd": rnd(r["usd"]), "via_addresses": r["via"], "tx_hashes": r["txs"]},
            }
        )  # fmt: skip
    return flags


@register("mixer_bulk_deposit", window_minutes=60, min_deposits=3)
def mixer_bulk_deposit(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        dep AS (
          SELECT t.chain, t.from_address, t.to_address, t.tx_hash, t.block_time, t.usd_value,
                 count(*) OVER (PARTITION BY t.chain, t.from_address, t.to_address ORDER BY t.block_time
                                RANGE BETWEEN CURRENT ROW AND to_minutes($window::BIGINT) FOLLOWING) AS in_window
          FROM moved t JOIN lab m ON m.chain = t.chain AND m.address = t.to_address
          LEFT JOIN lab s ON s.chain = t.chain AND s.address = t.from_address
          WHERE t.case_id = $case AND m.category = 'mixing_service'
            AND (s.category IS NULL OR NOT list_contains($services, s.category)))
        SELECT chain, from_address, to_address, max(in_window) AS max_in_window, count(*) AS deposits,
               count(*) FILTER (WHERE in_window >= $min) AS burst_starts, sum(usd_value) AS usd,
               list(tx_hash ORDER BY block_time, tx_hash)[1:{EVIDENCE_CAP}] AS txs, min(block_time) t0, max(block_time) t1
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
            "severity": "high" if (r["usd"] or 0) >= 1_000_000 else "medium", "score": round(min(1.0, r["max_in_window"] / 20), 3),
            "window_start": r["t0"], "window_end": r["t1"],
            "evidence": {"mixer": r["to_address"], "deposits": r["deposits"], "max_deposits_in_window": r["max_in_window"],
                         "usd": rnd(r["usd"]), "tx_hashes": r["txs"]},
        }
        for r in rows
    ]  # fmt: skip


def _second_hop(
    db: CaseDB, case_id: str, seeds: list[dict[str, Any]], direct: list[dict[str, Any]], p: dict[str, Any], *,
    seed_sends: bool,
) -> list[dict[str, Any]]:  # fmt: skip
    """Addresses one hop from exposed ``seeds`` (which they received from when ``seed_sends``, else sent to),
    not directly exposed themselves, with the USD of those transfers and its ``share`` of all the address
    received (sent) that moved."""
    if not seeds:
        return []
    seed, subj = ("from_address", "to_address") if seed_sends else ("to_address", "from_address")
    skip = {(r["chain"], r["subject"]) for r in direct}
    found = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        seeds AS (SELECT unnest($chains::VARCHAR[]) AS chain, unnest($addrs::VARCHAR[]) AS address),
        hop AS (SELECT t.chain, t.{subj} AS subject, sum(t.usd_value) AS usd,
                       list(t.tx_hash ORDER BY t.block_time, t.tx_hash)[1:{EVIDENCE_CAP}] AS txs,
                       list(DISTINCT t.{seed} ORDER BY t.{seed})[1:{EVIDENCE_CAP}] AS via,
                       min(t.block_time) t0, max(t.block_time) t1
                FROM moved t JOIN seeds ON seeds.chain = t.chain AND seeds.address = t.{seed} GROUP BY ALL),
        total AS (SELECT t.chain, t.{subj} AS address, sum(t.usd_value) AS total_usd FROM moved t
                  SEMI JOIN hop ON hop.chain = t.chain AND hop.subject = t.{subj}
                  WHERE t.from_address IS DISTINCT FROM t.to_address GROUP BY ALL)
        SELECT hop.*, a.total_usd FROM hop
        JOIN total a ON a.chain = hop.chain AND a.address = hop.subject
        LEFT JOIN lab s ON s.chain = hop.chain AND s.address = hop.subject
        WHERE (s.category IS NULL OR NOT list_contains($services, s.category)) AND a.total_usd > 0
          AND hop.usd / a.total_usd >= $share
        """,
        {"case": case_id, "chains": [r["chain"] for r in seeds], "addrs": [r["subject"] for r in seeds],
         "services": _services(p), "share": p["indirect_min_share"]},
    )  # fmt: skip
    return [
        {**r, "share": r["usd"] / r["total_usd"]} for r in found if (r["chain"], r["subject"]) not in skip
    ]


# -- 9. sanctions exposure ----------------------------------------------------------------------
@register("sanctions_exposure", indirect_min_share=0.10)
def sanctions_exposure(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    direct = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        sanc AS (SELECT l.chain, l.address, l.label_id, l.label, l.valid_from, l.valid_to FROM case_labels l
                 LEFT JOIN cat_alias al ON al.k = {CAT_KEY}
                 WHERE l.case_id = $case AND (l.abuse = 'sanction' OR coalesce(al.canonical, l.category) = 'sanction')),
        io AS (
          SELECT t.chain, t.from_address AS subject, 'sent_to_sanctioned' AS direction, t.tx_hash, t.block_time,
                 t.usd_value, s.label_id, s.address AS listed
          FROM moved t JOIN sanc s ON s.chain = t.chain AND s.address = t.to_address
          WHERE t.case_id = $case AND (s.valid_from IS NULL OR t.block_time >= s.valid_from)
            AND (s.valid_to IS NULL OR t.block_time < s.valid_to)
          UNION ALL
          SELECT t.chain, t.to_address, 'received_from_sanctioned', t.tx_hash, t.block_time, t.usd_value, s.label_id,
                 s.address
          FROM moved t JOIN sanc s ON s.chain = t.chain AND s.address = t.from_address
          WHERE t.case_id = $case AND (s.valid_from IS NULL OR t.block_time >= s.valid_from)
            AND (s.valid_to IS NULL OR t.block_time < s.valid_to))
        SELECT io.chain, io.subject, list(DISTINCT direction ORDER BY direction) AS directions, sum(usd_value) AS usd,
               list(tx_hash ORDER BY block_time, tx_hash)[1:{EVIDENCE_CAP}] AS txs, list(DISTINCT label_id ORDER BY label_id) AS label_ids,
               list(DISTINCT listed ORDER BY listed) AS listed, min(block_time) t0, max(block_time) t1
        FROM io LEFT JOIN lab x ON x.chain = io.chain AND x.address = io.subject
        WHERE io.subject IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sanc WHERE sanc.chain = io.chain AND sanc.address = io.subject)
          AND (x.category IS NULL OR NOT list_contains($services, x.category))
        GROUP BY io.chain, io.subject
        """,
        {"case": case_id, "services": _services(p)},
    )
    cited = _cite_labels(db, case_id, [i for r in direct for i in r["label_ids"]])
    flags = [
        {
            "chain": r["chain"], "address": r["subject"], "key": "direct", "severity": "critical", "score": 1.0,
            "window_start": r["t0"], "window_end": r["t1"],
            "evidence": {"exposure": "direct", "directions": sorted(r["directions"]), "listed_addresses": sorted(r["listed"]),
                         "label_ids": sorted(r["label_ids"]), "listed_by": [cited[i] for i in sorted(r["label_ids"])],
                         "lists": sorted({_list_name(cited[i]) for i in r["label_ids"]}),
                         "usd": rnd(r["usd"]), "tx_hashes": r["txs"],
                         "note": "only transfers inside each listing's validity window [valid_from, valid_to) count; "
                                 "a window end left null is open"},
        }
        for r in direct
    ]  # fmt: skip
    for r in _second_hop(db, case_id, direct, direct, p, seed_sends=False):
        share = r["share"]
        flags.append(
            {
                "chain": r["chain"], "address": r["subject"], "key": "indirect", "severity": "high", "score": round(share, 3),
                "evidence": {"exposure": "indirect", "hops": 2, "share_of_outflow": round(share, 4), "via_addresses": r["via"],
                             "usd": rnd(r["usd"]), "tx_hashes": r["txs"]},
            }
        )  # fmt: skip
    return flags


def _cite_labels(db: CaseDB, case_id: str, label_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each listing label as a hit must cite it: the list (source), its version or date, the
    validity window used, the entity and program where the list gives them."""
    if not label_ids:
        return {}
    found = _rows(
        db,
        "SELECT * FROM case_labels WHERE case_id = $case AND label_id IN (SELECT unnest($ids::VARCHAR[]))",
        {"case": case_id, "ids": sorted(set(label_ids))},
    )
    return {r["label_id"]: cite(r) for r in found}


def _list_name(c: dict[str, Any]) -> str:
    return f"{c.get('source')} ({c['source_version']})" if c.get("source_version") else str(c.get("source"))


# -- 7. fresh-address funding ------------------------------------------------------------------
@register(
    "fresh_address_funding",
    funding_categories=list(FUNDING_CATEGORIES),
    min_usd=20.0,
    custodial_categories=["exchange", "otc_desk", "instant_exchanger"],
    onward_risk_categories=["mixing_service", "coinjoin", "defi_bridge", "sanction"],
)
def fresh_address_funding(db: CaseDB, case_id: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _rows(
        db,
        f"""
        WITH {LAB}, {MOVED},
        -- what a funding-type service sent; a mint or burn through the zero address funds nobody (CCTP, burns)
        cand AS (SELECT tr.chain, tr.to_address AS address, tr.from_address AS funder, tr.tx_hash, tr.block_time,
                        tr.usd_value AS usd
                 FROM moved tr JOIN lab f ON f.chain = tr.chain AND f.address = tr.from_address
                 WHERE list_contains($cats, f.category) AND tr.to_address IS NOT NULL
                   AND NOT list_contains($zero, lower(tr.from_address)) AND NOT list_contains($zero, lower(tr.to_address))),
        firsts AS (SELECT t.chain, t.to_address AS address, min(t.block_time) AS t0 FROM moved t
                   SEMI JOIN cand c ON c.chain = t.chain AND c.address = t.to_address GROUP BY ALL),
        firstout AS (SELECT t.chain, t.from_address AS address, min(t.block_time) AS t FROM moved t
                     SEMI JOIN cand c ON c.chain = t.chain AND c.address = t.from_address GROUP BY ALL),
        -- the recipient's first inflow
        fund AS (SELECT c.* FROM cand c JOIN firsts f ON f.chain = c.chain AND f.address = c.address AND f.t0 = c.block_time),
        -- where each funded address later sent value: a laundering service, or not
        risky AS (SELECT DISTINCT t.chain, t.from_address AS address FROM moved t
                  JOIN lab r ON r.chain = t.chain AND r.address = t.to_address
                  SEMI JOIN fund ON fund.chain = t.chain AND fund.address = t.from_address
                  WHERE list_contains($risky, r.category)),
        roles AS (SELECT DISTINCT chain, address FROM case_addresses WHERE case_id = $case)
        SELECT fund.*, m.category AS funder_category, m.label AS funder_label, a.first_out_nonce,
               rk.address IS NOT NULL AS sent_to_risky, ro.address IS NOT NULL AS has_role
        FROM fund JOIN lab m ON m.chain = fund.chain AND m.address = fund.funder
        LEFT JOIN risky rk ON rk.chain = fund.chain AND rk.address = fund.address
        LEFT JOIN roles ro ON ro.chain = fund.chain AND ro.address = fund.address
        LEFT JOIN lab s ON s.chain = fund.chain AND s.address = fund.address
        LEFT JOIN firstout o ON o.chain = fund.chain AND o.address = fund.address
        LEFT JOIN addresses a ON a.case_id = $case AND a.chain = fund.chain AND a.address = fund.address
        WHERE list_contains($cats, m.category) AND (fund.usd IS NULL OR fund.usd >= $min_usd)
          -- an exchange-type funder (CEX, OTC, instant exchanger) funds countless honest wallets: it counts
          -- when the address is one of the case's or goes on to a mixer, bridge or sanctioned address
          AND (NOT list_contains($custodial, m.category) OR ro.address IS NOT NULL OR rk.address IS NOT NULL)
          AND (o.t IS NULL OR o.t >= fund.block_time) AND coalesce(a.first_out_nonce, 0) = 0
          AND (s.category IS NULL OR NOT list_contains($services, s.category))
        """,
        {
            "case": case_id,
            "cats": list(p["funding_categories"]),
            "min_usd": p["min_usd"],
            "services": _services(p),
            "zero": [z.lower() for z in ZERO_ADDRESSES],
            "custodial": list(p["custodial_categories"]),
            "risky": list(p["onward_risk_categories"]),
        },
    )
    flags = []
    seen: set[tuple[str, str]] = set()
    for r in rows:
        if (r["chain"], r["address"]) in seen:
            continue
        seen.add((r["chain"], r["address"]))
        mixer = r["funder_category"] == "mixing_service"
        big = (r["usd"] or 0) >= 100_000
        sev = "critical" if mixer and big else "high" if mixer or big else "medium"
        flags.append(
            {
                "chain": r["chain"], "address": r["address"], "tx_hash": r["tx_hash"], "severity": sev, "score": _score(r["usd"]),
                "window_start": r["block_time"], "window_end": r["block_time"],
                "evidence": {"funder": r["funder"], "funder_category": r["funder_category"], "funder_label": r["funder_label"],
                             "usd": rnd(r["usd"]), "tx_hashes": [r["tx_hash"]], "prior_activity": False,
                             "case_address": r["has_role"], "later_sent_to_risky_service": r["sent_to_risky"]},
            }
        )  # fmt: skip
    return flags
