"""Triage: flags rolled up into the rows an analyst reads, ordered by what matters.

One row per entity (addresses whose best label names the same entity), per
address, or per *cohort*: addresses that carry nothing but the same
service-exposure pattern against the same counterparty (e.g. 300 fresh
withdrawal addresses of one mixer pool) are one row, with every member
listed. Each row has one severity and score and its underlying flags as
evidence; a weaker row whose evidence names a stronger row's addresses (dust
sent to a peel chain's hops) is attached to it as ``related`` rather than
listed on its own. Raw flags stay in ``anomaly_flags`` (``CaseDB.list_flags``).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from tahrix_lab.case.db import CaseDB, jdict
from tahrix_lab.case.schema import SEVERITIES

RANK = {s: i for i, s in enumerate(SEVERITIES)}
# Patterns shared by many bystanders of one service: a cohort, not a suspect each.
COHORT_TYPES = frozenset({"fresh_address_funding", "mixer_exposure"})
COHORT_MIN = 3
# Roles that make an address matter whatever its flags say.
KEY_ROLES = ("perpetrator", "suspect", "seed")
# Evidence fields that name addresses (used to attach a weak row to the row it concerns).
ADDRESS_FIELDS = ("recipient_sample", "recipients", "addresses", "lookalikes", "imitated", "via_addresses")


def _counterparty(f: dict[str, Any]) -> str | None:
    ev = f.get("evidence") or {}
    if f["flag_type"] == "fresh_address_funding":
        return str(ev.get("funder"))
    if f["flag_type"] == "mixer_exposure" and ev.get("exposure") == "direct":
        return "|".join(sorted(ev.get("mixers") or [])) + ":" + ",".join(ev.get("directions") or [])
    return None


def _evidence_addresses(f: dict[str, Any]) -> set[str]:
    ev = f.get("evidence") or {}
    out: set[str] = set()
    for k in ADDRESS_FIELDS:
        v = ev.get(k)
        if isinstance(v, list):
            out |= {f"{f['chain']}:{x}" for x in v if isinstance(x, str)}
    for peel in ev.get("peels") or []:
        if isinstance(peel, dict) and peel.get("to"):
            out.add(f"{f['chain']}:{peel['to']}")
    return out


def _combine(scores: list[float]) -> float:
    """Independent signals: 1 - prod(1 - s)."""
    return round(1 - math.prod(1 - max(0.0, min(1.0, s)) for s in scores), 3)


def triage(
    db: CaseDB,
    case_id: str,
    *,
    min_severity: str | None = None,
    include_dismissed: bool = False,
) -> dict[str, Any]:
    """Roll the case's flags up; ``rows`` ordered by severity, then role, score and flag count."""
    raw = db.rows(
        "SELECT flag_id, flag_type, severity, score, chain, address, tx_hash, evidence, status FROM anomaly_flags "
        "WHERE case_id = ? AND (? OR status <> 'dismissed') ORDER BY flag_id",
        [case_id, include_dismissed],
    )
    for f in raw:
        f["evidence"] = json.loads(f["evidence"]) if f["evidence"] else {}
    roles = {
        (r["chain"], r["address"]): r["role"]
        for r in db.rows("SELECT chain, address, role FROM case_addresses WHERE case_id = ?", [case_id])
    }
    by_addr: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in raw:
        by_addr.setdefault((f["chain"], f["address"]), []).append(f)
    labels = db.labels_for(case_id, list(by_addr))
    groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for key, flags in by_addr.items():
        best = (labels.get(key) or {}).get("best") or {}
        types = {f["flag_type"] for f in flags}
        cps = sorted({c for f in flags if (c := _counterparty(f))})
        if best.get("entity"):
            gkey: tuple[str, ...] = ("entity", str(best["entity"]))
        elif key not in roles and types <= COHORT_TYPES and len(cps) == len(flags) and flags:
            gkey = ("cohort", ",".join(sorted(types)), *cps)
        else:
            gkey = ("address", *key)
        groups.setdefault(gkey, []).append(key)
    for gkey in [g for g in groups if g[0] == "cohort" and len(groups[g]) < COHORT_MIN]:
        for key in groups.pop(gkey):
            groups[("address", *key)] = [key]
    rows = [_row(gkey, members, by_addr, roles, labels) for gkey, members in groups.items()]
    _attach_related(rows)
    rows = [r for r in rows if not r.get("attached_to")]
    rows.sort(
        key=lambda r: (-RANK[r["severity"]], r["role"] is None, -r["score"], -r["flag_count"], r["row_id"])
    )
    total = len(rows)
    if min_severity:
        rows = [r for r in rows if RANK[r["severity"]] >= RANK[min_severity]]
    return jdict({
        "case_id": case_id, "rows": rows, "count": len(rows), "rows_total": total, "flags_total": len(raw),
        "by_severity": {s: sum(1 for r in rows if r["severity"] == s) for s in reversed(SEVERITIES)},
        "how": "one row per entity, address or cohort (addresses sharing only one service-exposure pattern); "
               "severity = the strongest flag, raised to at least high for a case role and one level for "
               "three or more flag types; weaker rows naming a row's addresses are attached as related",
    })  # fmt: skip


def _row(
    gkey: tuple[str, ...],
    members: list[tuple[str, str]],
    by_addr: dict[tuple[str, str], list[dict[str, Any]]],
    roles: dict[tuple[str, str], str],
    labels: dict[tuple[str, str], dict[str, Any]],
) -> dict[str, Any]:
    flags = [f for m in members for f in by_addr[m]]
    types = sorted({f["flag_type"] for f in flags})
    sev = max(RANK[f["severity"]] for f in flags)
    role = next((roles[m] for m in members if m in roles and roles[m] in KEY_ROLES), None)
    role = role or next((roles[m] for m in members if m in roles), None)
    if role in KEY_ROLES:
        sev = max(sev, RANK["high"])
    if len(types) >= 3:
        sev = min(sev + 1, RANK["critical"])
    best_per_type: dict[str, float] = {}
    for f in flags:
        best_per_type[f["flag_type"]] = max(best_per_type.get(f["flag_type"], 0.0), f["score"] or 0.0)
    score = _combine(list(best_per_type.values()))
    if gkey[0] == "cohort":
        subject: dict[str, Any] = {"kind": "cohort", "pattern": gkey[1], "counterparty": list(gkey[2:]),
                                   "members": len(members)}  # fmt: skip
    elif gkey[0] == "entity":
        subject = {"kind": "entity", "entity": gkey[1], "members": len(members)}
    else:
        best = (labels.get(members[0]) or {}).get("best") or {}
        subject = {"kind": "address", "chain": members[0][0], "address": members[0][1], "label": best.get("label"),
                   "category": best.get("category")}  # fmt: skip
    flags.sort(key=lambda f: (-RANK[f["severity"]], -(f["score"] or 0), f["flag_id"]))
    return {
        "row_id": "TRI-" + hashlib.sha1("|".join(gkey).encode()).hexdigest()[:10],
        "severity": SEVERITIES[sev], "score": score, "role": role, "subject": subject, "flag_types": types,
        "flag_count": len(flags), "addresses": [f"{c}:{a}" for c, a in members],
        "flags": [{"flag_id": f["flag_id"], "flag_type": f["flag_type"], "severity": f["severity"],
                   "chain": f["chain"], "address": f["address"], "status": f["status"],
                   "tx_hashes": (f["evidence"].get("tx_hashes") or [])[:3]} for f in flags],
        "related": [],
        "_evidence_addresses": set().union(*(_evidence_addresses(f) for f in flags)),
    }  # fmt: skip


def _attach_related(rows: list[dict[str, Any]]) -> None:
    strong = [r for r in rows if RANK[r["severity"]] >= RANK["high"]]
    index: dict[str, dict[str, Any]] = {}
    for r in strong:
        for a in [*r["addresses"], *r["_evidence_addresses"]]:
            index.setdefault(a, r)
    for r in rows:
        if RANK[r["severity"]] >= RANK["high"] or r["role"]:
            continue
        target = next((index[a] for a in sorted(r["_evidence_addresses"]) if a in index), None)
        if target is not None:
            r["attached_to"] = target["row_id"]
            target["related"].append({"row_id": r["row_id"], "why": "its evidence names this row's addresses",
                                      "flags": r["flags"]})  # fmt: skip
    for r in rows:
        r.pop("_evidence_addresses", None)
