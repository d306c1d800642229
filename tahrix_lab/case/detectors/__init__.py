"""Anomaly detectors (DOMAIN.md §3): a registry, one module per family.

* ``exposure`` — mixers, bulk mixer deposits, sanctions, fresh-address funding;
* ``amounts`` — structuring, repeated amounts, dusting, address poisoning;
* ``hops`` — chain hopping across bridges, high-velocity pass-through;
* ``utxo`` — peel chains.

``run_detectors`` stores the flags with the parameters used, so a re-run with
other parameters updates the same flags in place; ``triage`` rolls them up
per address or entity for the list an analyst reads. Services (exchanges,
DEXes, bridges, mixers, market makers…) are never the subject of behavioural
flags: their flow is not one person's flow.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tahrix_lab.case.db import CaseDB, jsonable
from tahrix_lab.case.detectors import amounts, exposure, hops, utxo
from tahrix_lab.case.detectors.common import DEFAULTS, DETECTORS, VERSION, Detector
from tahrix_lab.case.detectors.triage import triage
from tahrix_lab.case.loaders.manifest import guarded, record_detect
from tahrix_lab.case.record_sync import detector_inputs, lay_inputs, sync_annotations, take_record
from tahrix_lab.case.schema import FLAG_TYPES

del amounts, exposure, hops, utxo  # imported to register their detectors
# Registry order = the schema's flag order (the tool lists them in it).
_ORDER = {name: i for i, name in enumerate(FLAG_TYPES)}
for _name in sorted(DETECTORS, key=lambda n: _ORDER.get(n, len(_ORDER))):
    DETECTORS[_name] = DETECTORS.pop(_name)


def data_quality(db: CaseDB, case_id: str) -> dict[str, Any]:
    """How much of the case the USD figures cannot see: unpriced, unknown decimals, unknown or failed status."""
    row = (
        db.one(
            "SELECT count(*) AS transfers, count(*) FILTER (WHERE usd_value IS NULL AND status IS NOT FALSE) AS unpriced, "
            "count(*) FILTER (WHERE amount IS NULL) AS unknown_decimals, "
            "count(*) FILTER (WHERE status IS NULL) AS unknown_status, count(*) FILTER (WHERE status = FALSE) AS failed "
            "FROM transfers WHERE case_id = ?",
            [case_id],
        )
        or {}
    )
    n = row.get("transfers") or 0
    row["unpriced_share"] = round(row["unpriced"] / n, 4) if n else None
    row["note"] = (
        "failed transfers move nothing in any total; unpriced ones count in no USD figure (never as $0); "
        "unknown status counts as moved and is reported here"
    )
    return row


def run_detectors(
    db: CaseDB,
    case_id: str,
    detectors: list[str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    *,
    manifest: bool = True,
    replay: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run detectors over a case, store their flags; return ids and a summary with the params used.
    The run is a step of the case's manifest in the record unless ``manifest=False`` (a rebuild).
    The step records what the run read that analysts change (the case's roles and analysts'
    labels: ``record_sync.detector_inputs``) and the flags it kept because analysts had decided
    on them (``upsert_flags``). ``replay``: a recorded step's entry, whose inputs and kept flags
    this run uses instead (a rebuild); the record's current roles and labels return after it."""
    names = detectors or list(DETECTORS)
    unknown = [n for n in names if n not in DETECTORS]
    if unknown:
        raise ValueError(f"Unknown detector(s) {unknown}; known: {sorted(DETECTORS)}")
    planned = {n: jsonable({**DEFAULTS[n], **((overrides or {}).get(n) or {})}) for n in names}
    summary: dict[str, Any] = {}
    all_ids: list[str] = []
    work = lambda: {"detectors": names, "params": planned}  # noqa: E731
    held: list[str] = []
    with guarded(db, case_id, "detect", work, manifest=manifest) as turn:
        if turn is not None:  # read what the team decided, not what this copy last heard of
            sync_annotations(db, case_id)
            if turn.replayed is not None:  # the same run as that step: the same inputs and flags
                replay = turn.replayed["entry"]
        inputs, kept = (replay or {}).get("inputs"), (replay or {}).get("kept")
        if inputs is not None:
            lay_inputs(db, case_id, inputs)
        try:
            # The flags and the run's manifest step commit together: a step the record refuses
            # or never gets leaves no flag of the run here, and the same run may be asked again.
            with db.write():
                for name in names:
                    params = {**DEFAULTS[name], **((overrides or {}).get(name) or {})}
                    started = datetime.now()  # noqa: DTZ005 - a duration only
                    flags = DETECTORS[name](db, case_id, params)  # upsert_flags makes the evidence JSON-safe
                    ids, also = db.upsert_flags(case_id, name, flags, json.loads(json.dumps(jsonable(params))),
                                                VERSION, keep=kept)  # fmt: skip
                    all_ids += ids
                    held += also
                    summary[name] = {
                        "flags": len(ids),
                        "params": jsonable(params),
                        "seconds": round((datetime.now() - started).total_seconds(), 3),  # noqa: DTZ005
                    }
                if turn is not None:
                    params_used = {name: info["params"] for name, info in summary.items()}
                    record_detect(
                        db, case_id, params_used, held, inputs or detector_inputs(db, case_id), turn
                    )
        finally:
            if inputs is not None:  # the record's roles and labels, as they are now, whatever happened
                take_record(db, case_id)
    return {
        "case_id": case_id,
        "flag_ids": all_ids,
        "by_detector": summary,
        "data_quality": data_quality(db, case_id),
    }


__all__ = ["DEFAULTS", "DETECTORS", "VERSION", "Detector", "data_quality", "run_detectors", "triage"]
