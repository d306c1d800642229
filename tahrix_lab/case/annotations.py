"""Writes to a case (labels, roles, flag decisions, notes), each audited with before/after.

``apply_annotation`` is the ``annotate`` tool's body; ``revert`` undoes one
audited write. The ``_effects`` returned name what changed; they are built
from the action taken, never from case data.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tahrix_lab.agent.errors import NeedsApproval, ToolRetry, UserFacingError
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.db import CaseDB, jsonable, norm_address, utcnow_naive
from tahrix_lab.case.record_sync import push as _push
from tahrix_lab.case.record_sync import sync_annotations

FLAG_COLUMNS = "flag_id, status, analyst_note, updated_by"


def _address_target(ctx: ToolContext, args: dict[str, Any]) -> tuple[str, str]:
    chain = args.get("chain")
    target = args["target"].strip()
    if ":" in target and chain is None and not target.startswith(("0x", "bc1", "T")):
        chain, target = target.split(":", 1)
    if chain is None:
        rows = ctx.db.rows(
            "SELECT DISTINCT chain FROM addresses WHERE case_id = ? AND (address = ? OR address = lower(?))",
            [ctx.case_id, target, target],
        )
        if len(rows) != 1:
            raise ToolRetry(
                f"Say which chain the address {target!r} is on (found on {len(rows)} chains in this case)."
            )
        chain = rows[0]["chain"]
    return chain, norm_address(chain, target) or target


def apply_annotation(ctx: ToolContext, args: dict[str, Any], *, analyst: str | None = None) -> dict[str, Any]:
    """Apply one write. ``analyst`` names the human making it (``Workspace.annotate``, or the
    analyst who approved the assistant's call); without one it is the assistant's write (actor
    ``agent:<session>``), which may never overturn an analyst's decision: such a call raises
    ``NeedsApproval`` and waits for the analyst (``agent.approvals``). Nothing in ``args`` can
    stand for the analyst's consent."""
    action, kind = args["action"], args["target_kind"]
    payload = args.get("payload") or {}
    db, cid, actor = ctx.db, ctx.case_id, analyst or ctx.actor
    if action in ("confirm_flag", "dismiss_flag") and kind != "flag":
        raise ToolRetry(f"{action} needs target_kind 'flag' and a flag id as target.")
    if action in ("add_label", "set_role") and kind != "address":
        raise ToolRetry(f"{action} needs target_kind 'address'.")
    sync_annotations(db, cid)  # decide on the record's state, not a stale copy
    with db.write() as cur:
        if action in ("confirm_flag", "dismiss_flag"):
            row = cur.execute(
                f"SELECT {FLAG_COLUMNS} FROM anomaly_flags WHERE case_id = ? AND flag_id = ?",
                [cid, args["target"]],
            ).fetchone()
            if row is None:
                raise ToolRetry(f"No flag {args['target']!r} in case {cid}; list_flags shows the ids.")
            before = dict(zip(["flag_id", "status", "analyst_note", "updated_by"], row, strict=True))
            other = before["updated_by"] and not str(before["updated_by"]).startswith("agent")
            if other and before["status"] != "new" and analyst is None:
                # Raised inside the write: it rolls back, so the wait holds no transaction.
                raise NeedsApproval(overturn_summary(args, before), "It overturns an analyst's decision.")
            status = "confirmed" if action == "confirm_flag" else "dismissed"
            note = payload.get("note", before["analyst_note"])
            cur.execute(
                "UPDATE anomaly_flags SET status = ?, analyst_note = ?, updated_by = ? WHERE case_id = ? AND flag_id = ?",
                [status, note, actor, cid, args["target"]],
            )
            after = {**before, "status": status, "analyst_note": note, "updated_by": actor}
            audit_id = db.audit(cur, actor=actor, session_id=ctx.session_id, case_id=cid, action=action,
                                target_kind="flag", target_id=args["target"], before=before, after=after)  # fmt: skip
            _push(db, cur, audit_id, "flag", args["target"], after)
            effect = {
                "type": "flags_changed",
                "case_id": cid,
                "flag_ids": [args["target"]],
                "audit_id": audit_id,
            }
        elif action == "add_label":
            if not payload.get("label") or not payload.get("category"):
                raise ToolRetry("add_label needs payload.label and payload.category.")
            chain, address = _address_target(ctx, args)
            label_id = "LBL-A-" + uuid.uuid4().hex[:10]
            after = {"label_id": label_id, "chain": chain, "address": address, "label": payload["label"],
                     "entity": payload.get("entity"), "category": payload["category"], "abuse": payload.get("abuse"),
                     "source": f"annotation by {actor}", "confidence": "forensic", "confidence_level": 50,
                     "created_by": actor}  # fmt: skip
            cols = list(after)
            cur.execute(
                f"INSERT INTO labels (case_id, {', '.join(cols)}, lastmod) VALUES (?, {', '.join('?' for _ in cols)}, ?)",
                [cid, *after.values(), utcnow_naive()],
            )
            audit_id = db.audit(cur, actor=actor, session_id=ctx.session_id, case_id=cid, action=action,
                                target_kind="label", target_id=label_id, before=None, after=after)  # fmt: skip
            _push(db, cur, audit_id, "label", label_id, after)
            effect = {"type": "labels_changed", "case_id": cid, "label_ids": [label_id], "audit_id": audit_id}
        elif action == "set_role":
            if not payload.get("role"):
                raise ToolRetry("set_role needs payload.role.")
            chain, address = _address_target(ctx, args)
            row = cur.execute(
                "SELECT role, note, added_by FROM case_addresses WHERE case_id = ? AND chain = ? AND address = ?",
                [cid, chain, address],
            ).fetchone()
            before_role = dict(zip(["role", "note", "added_by"], row, strict=True)) if row else None
            cur.execute(
                "DELETE FROM case_addresses WHERE case_id = ? AND chain = ? AND address = ?",
                [cid, chain, address],
            )
            cur.execute(
                "INSERT INTO case_addresses (case_id, chain, address, role, added_by, added_at, note) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [cid, chain, address, payload["role"], actor, utcnow_naive(), payload.get("note")],
            )
            after = {
                "chain": chain,
                "address": address,
                "role": payload["role"],
                "note": payload.get("note"),
                "added_by": actor,
            }
            audit_id = db.audit(cur, actor=actor, session_id=ctx.session_id, case_id=cid, action=action,
                                target_kind="case_address", target_id=f"{chain}:{address}",
                                before={"chain": chain, "address": address, **before_role} if before_role else None, after=after)  # fmt: skip
            _push(db, cur, audit_id, "role", f"{chain}:{address}", after)
            effect = {
                "type": "roles_changed",
                "case_id": cid,
                "addresses": [f"{chain}:{address}"],
                "audit_id": audit_id,
            }
        else:  # note
            text = payload.get("text") or payload.get("note")
            if not text:
                raise ToolRetry("note needs payload.text.")
            note_id = "NOTE-" + uuid.uuid4().hex[:10]
            after = {
                "note_id": note_id,
                "target_kind": kind,
                "target_id": args["target"],
                "text": text,
                "created_by": actor,
            }
            cur.execute(
                "INSERT INTO notes (note_id, case_id, target_kind, target_id, text, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [note_id, cid, kind, args["target"], text, actor, utcnow_naive()],
            )
            audit_id = db.audit(cur, actor=actor, session_id=ctx.session_id, case_id=cid, action=action,
                                target_kind="note", target_id=note_id, before=None, after=after)  # fmt: skip
            _push(db, cur, audit_id, "note", note_id, after)
            effect = {"type": "notes_changed", "case_id": cid, "note_ids": [note_id], "audit_id": audit_id}
    return {
        "ok": True,
        "action": action,
        "audit_id": audit_id,
        "after": jsonable(after),
        "_effects": [effect],
    }


def overturn_summary(args: dict[str, Any], before: dict[str, Any]) -> str:
    """What the analyst reads beside Approve / Deny (built from the call and the flag, not from case text)."""
    verb = "Confirm" if args["action"] == "confirm_flag" else "Dismiss"
    note = (args.get("payload") or {}).get("note")
    with_note = f", with the note {note!r}" if note else ""
    return f"{verb} flag {args['target']}, now {before['status']} by {before['updated_by']}{with_note}."


def revert(db: CaseDB, audit_id: str, *, actor: str, case_id: str | None = None) -> dict[str, Any]:
    """Undo one audited write (itself audited); returns the effect to refresh views. With
    ``case_id``, only an entry of that case. A flag decided again since, or an address whose
    role was set again since, is not reverted: that would silently overturn the later write."""
    if db.record_elsewhere:  # the entry may have been written on another host
        for case in [{"case_id": case_id}] if case_id else db.list_cases():
            sync_annotations(db, case["case_id"])
    entry = db.one("SELECT * FROM audit_log WHERE audit_id = ?", [audit_id])
    if entry is None or (case_id is not None and entry["case_id"] != case_id):
        raise UserFacingError(f"No audit entry {audit_id!r}" + (f" in case {case_id!r}." if case_id else "."))
    before = json.loads(entry["before"]) if entry["before"] else None
    after = json.loads(entry["after"]) if entry["after"] else None
    cid, kind, target = entry["case_id"], entry["target_kind"], entry["target_id"]
    with db.write() as cur:
        # checked under the write lock: two Undo clicks at once revert once
        now = cur.execute("SELECT reverted_by FROM audit_log WHERE audit_id = ?", [audit_id]).fetchone()
        if now and now[0]:
            raise UserFacingError(f"{audit_id} was already reverted by {now[0]}.")
        if kind == "flag" and before:
            now = cur.execute(
                "SELECT status, updated_by FROM anomaly_flags WHERE case_id = ? AND flag_id = ?",
                [cid, target],
            ).fetchone()
            if after and now is not None and tuple(now) != (after["status"], after["updated_by"]):
                raise UserFacingError(
                    f"{target} was decided again since ({now[0]} by {now[1]}), so {audit_id} was not "
                    "reverted: confirm or dismiss the flag instead."
                )
            cur.execute(
                "UPDATE anomaly_flags SET status = ?, analyst_note = ?, updated_by = ? WHERE case_id = ? AND flag_id = ?",
                [before["status"], before["analyst_note"], before["updated_by"], cid, target],
            )
            effect = {"type": "flags_changed", "case_id": cid, "flag_ids": [target]}
        elif kind == "label":
            cur.execute("DELETE FROM labels WHERE case_id = ? AND label_id = ?", [cid, target])
            effect = {"type": "labels_changed", "case_id": cid, "label_ids": [target]}
        elif kind == "case_address" and after:
            now = cur.execute(
                "SELECT role, note, added_by FROM case_addresses WHERE case_id = ? AND chain = ? AND address = ?",
                [cid, after["chain"], after["address"]],
            ).fetchone()
            if now is None or tuple(now) != (after["role"], after.get("note"), after["added_by"]):
                since = f"{now[0]} by {now[2]}" if now is not None else "no role now"
                raise UserFacingError(
                    f"{target}'s role was set again since ({since}), so {audit_id} was not reverted: "
                    "set its role instead."
                )
            cur.execute(
                "DELETE FROM case_addresses WHERE case_id = ? AND chain = ? AND address = ?",
                [cid, after["chain"], after["address"]],
            )
            if before:
                cur.execute(
                    "INSERT INTO case_addresses (case_id, chain, address, role, added_by, note) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        cid,
                        before["chain"],
                        before["address"],
                        before["role"],
                        before.get("added_by"),
                        before.get("note"),
                    ],
                )
            effect = {"type": "roles_changed", "case_id": cid, "addresses": [target]}
        elif kind == "note":
            cur.execute("DELETE FROM notes WHERE case_id = ? AND note_id = ?", [cid, target])
            effect = {"type": "notes_changed", "case_id": cid, "note_ids": [target]}
        else:
            raise UserFacingError(f"{audit_id} cannot be reverted automatically ({kind}).")
        new_id = db.audit(cur, actor=actor, session_id=None, case_id=cid, action=f"revert:{entry['action']}",
                          target_kind=kind, target_id=target, before=after, after=before)  # fmt: skip
        cur.execute("UPDATE audit_log SET reverted_by = ? WHERE audit_id = ?", [new_id, audit_id])
        state = {"flag": before, "case_address": before}.get(kind)  # labels and notes: gone
        _push(db, cur, new_id, "role" if kind == "case_address" else kind, target, state, reverts=audit_id)
    return {"reverted": audit_id, "audit_id": new_id, "effect": effect}
