"""What analysts write: the record is the truth, this DuckDB file's flag status, roles,
analysts' labels, notes and audit rows its cache.

Each write goes to the record inside the local write (``push``): with the record in this
same file (one analyst) it joins the local transaction, so a workspace moved to another
engine (``tahrix export``/``import``) carries what analysts wrote. Before a tool call or a
panel reads a case, ``sync_annotations`` brings what changed in a record elsewhere (a
team's PostgreSQL, by any host) into the file, so every existing query over the evidence
sees it unchanged; with the record in the same file that is a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC
from typing import Any

from tahrix_lab.case.db import CaseDB, jsonable, utcnow_naive

LABEL_COLUMNS = ("label_id", "chain", "address", "label", "entity", "category", "abuse", "source", "confidence",
                 "confidence_level", "created_by")  # fmt: skip

AUDIT_IN = ("audit_id", "at_time", "actor", "session_id", "case_id", "action", "target_kind", "target_id",
            "before", "after")  # fmt: skip
_MISSING = object()
# Kinds whose local table another module creates when first used (report reviews: the report
# package, which imports this module, registers its ``ensure_tables`` here). Until then those
# annotations wait in the record.
TABLES: dict[str, Callable[[CaseDB], None]] = {}


def push(db: CaseDB, cur: Any, audit_id: str, kind: str | None, key: str | None, value: Any,
          reverts: str | None = None) -> None:  # fmt: skip
    """Write the audit entry (and the annotation's new state) to the record, inside the local
    write: if the record refuses, the local write rolls back too."""
    row = cur.execute(
        f"SELECT {', '.join(AUDIT_IN)} FROM audit_log WHERE audit_id = ?", [audit_id]
    ).fetchone()
    entry = dict(zip(AUDIT_IN, row, strict=True))
    entry["at_time"] = entry["at_time"].replace(tzinfo=UTC)
    entry["before"] = json.loads(entry["before"]) if entry["before"] else None
    entry["after"] = json.loads(entry["after"]) if entry["after"] else None
    value = jsonable(value)
    db.record.record_annotation(entry, kind, key, value, reverts=reverts)
    seen = db.synced.setdefault(entry["case_id"], {})
    if kind is not None:
        seen[(kind, key)] = value
    seen[("audit", audit_id)] = None
    if reverts is not None:
        seen[("audit", reverts)] = audit_id


def sync_annotations(db: CaseDB, case_id: str) -> None:
    """Bring the record's annotations and audit entries of a case into this file (once per
    change: what was taken is remembered), so every read of the evidence sees them."""
    if db.record_elsewhere:
        _take(db, case_id)


def take_record(db: CaseDB, case_id: str) -> None:
    """Lay everything the record holds of a case over this file, whatever was taken before:
    rows just imported into the record (``tahrix import``), even when it is this same file."""
    db.synced.pop(case_id, None)
    _take(db, case_id)


def _take(db: CaseDB, case_id: str) -> None:
    seen = db.synced.setdefault(case_id, {})
    changed = [
        a
        for a in db.record.annotations(case_id)
        if seen.get((a["kind"], a["key"]), _MISSING) != a["value"]
        and (a["kind"] != "review" or "review" in TABLES)
    ]
    audits = [e for e in db.record.audit_entries(case_id)
              if seen.get(("audit", e["audit_id"]), _MISSING) != e["reverted_by"]]  # fmt: skip
    if not changed and not audits:
        return
    for kind in {a["kind"] for a in changed} & set(TABLES):
        TABLES[kind](db)
    with db.write() as cur:
        for a in changed:
            _apply(cur, case_id, a["kind"], a["key"], a["value"])
        for e in audits:
            at = e["at_time"].astimezone(UTC).replace(tzinfo=None)
            cur.execute(
                f"INSERT OR REPLACE INTO audit_log ({', '.join(AUDIT_IN)}, reverted_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [e["audit_id"], at, e["actor"], e["session_id"], e["case_id"], e["action"], e["target_kind"],
                 e["target_id"], json.dumps(e["before"]), json.dumps(e["after"]), e["reverted_by"]],
            )  # fmt: skip
    for a in changed:
        seen[(a["kind"], a["key"])] = a["value"]
    for e in audits:
        seen[("audit", e["audit_id"])] = e["reverted_by"]


def _apply(cur: Any, cid: str, kind: str, key: str, value: dict[str, Any] | None) -> None:
    """One annotation's state from the record written over this file's copy."""
    if kind == "flag":
        v = value or {"status": "new", "analyst_note": None, "updated_by": None}
        cur.execute(
            "UPDATE anomaly_flags SET status = ?, analyst_note = ?, updated_by = ? WHERE case_id = ? AND flag_id = ?",
            [v["status"], v["analyst_note"], v["updated_by"], cid, key],
        )
    elif kind == "role":
        chain, address = key.split(":", 1)
        cur.execute(
            "DELETE FROM case_addresses WHERE case_id = ? AND chain = ? AND address = ?",
            [cid, chain, address],
        )
        if value:
            cur.execute(
                "INSERT INTO case_addresses (case_id, chain, address, role, added_by, note) VALUES (?, ?, ?, ?, ?, ?)",
                [cid, chain, address, value["role"], value.get("added_by"), value.get("note")],
            )
    elif kind == "label":
        cur.execute("DELETE FROM labels WHERE case_id = ? AND label_id = ?", [cid, key])
        if value:
            cols = [c for c in LABEL_COLUMNS if c in value]
            cur.execute(
                f"INSERT INTO labels (case_id, {', '.join(cols)}, lastmod) VALUES (?, {', '.join('?' for _ in cols)}, ?)",
                [cid, *(value[c] for c in cols), utcnow_naive()],
            )
    elif kind == "review" and value:  # reviews are history: the latest decision wins
        row = [cid, key, value["action"], value["text"], value["decided_by"], value["decided_at"]]
        cur.execute(
            "DELETE FROM report_reviews WHERE case_id = ? AND finding_id = ? AND action = ? "
            "AND text IS NOT DISTINCT FROM ? AND decided_by = ? AND decided_at = ?",
            row,
        )
        cur.execute("INSERT INTO report_reviews VALUES (?, ?, ?, ?, ?, ?)", row)
    elif kind == "note":
        cur.execute("DELETE FROM notes WHERE case_id = ? AND note_id = ?", [cid, key])
        if value:
            cur.execute(
                "INSERT INTO notes (note_id, case_id, target_kind, target_id, text, created_by, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [key, cid, value["target_kind"], value["target_id"], value["text"], value["created_by"], utcnow_naive()],
            )  # fmt: skip


# -- what a detector run reads that analysts change (a manifest step's ``inputs``) -----------
ROLE_COLUMNS = ("chain", "address", "role", "added_by", "note")
ANALYSTS = "label_id LIKE 'LBL-A-%'"  # analysts' labels: annotations, not evidence


def detector_inputs(db: CaseDB, case_id: str) -> dict[str, list[dict[str, Any]]]:
    """The case's roles and its analysts' labels as they are now: detectors read both (a
    funded address that is one of the case's, a category an analyst gave), and neither is in
    the evidence's fingerprint, so a detector run's step records them for its replay."""
    roles = db.rows(
        f"SELECT {', '.join(ROLE_COLUMNS)} FROM case_addresses WHERE case_id = ? ORDER BY chain, address",
        [case_id],
    )
    labels = db.rows(
        f"SELECT {', '.join(LABEL_COLUMNS)} FROM labels WHERE case_id = ? AND {ANALYSTS} ORDER BY label_id",
        [case_id],
    )
    return {"roles": jsonable(roles), "labels": jsonable(labels)}


def lay_inputs(db: CaseDB, case_id: str, inputs: dict[str, list[dict[str, Any]]]) -> None:
    """Set the case's roles and analysts' labels to a recorded run's ``inputs``, to replay it;
    ``take_record`` lays the record's current ones over again afterwards."""
    db.synced.pop(case_id, None)
    with db.write() as cur:
        cur.execute("DELETE FROM case_addresses WHERE case_id = ?", [case_id])
        cur.execute(f"DELETE FROM labels WHERE case_id = ? AND {ANALYSTS}", [case_id])
        for r in inputs["roles"]:
            _apply(cur, case_id, "role", f"{r['chain']}:{r['address']}", r)
        for v in inputs["labels"]:
            _apply(cur, case_id, "label", v["label_id"], v)
