"""UTXO family: peel chains (DOMAIN.md §3.1)."""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors.common import EVIDENCE_CAP, register
from tahrix_lab.case.detectors.common import rows as _rows
from tahrix_lab.case.taxonomy import normalise_category

# Peels landing here are cash-outs (severity high).
CASH_OUT = {"exchange", "otc_desk", "instant_exchanger"}


# -- 1. peel chains --------------------------------------------------------------------------
@register("peel_chain", max_peel_ratio=0.20, min_length=3, max_hop_hours=72)
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
    lab = {k: normalise_category(v)[0] for k, v in db.category_map(case_id).items()}
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
        to_exchange = sum(1 for x in peels if lab.get((x["chain"], x["peel_address"])) in CASH_OUT)
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
                    "addresses": list(dict.fromkeys(x["input_address"] for x in peels))[:EVIDENCE_CAP],
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
