"""Conformance: what analysts write on a case (issue 26 items 1/2), on both engines."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError


def _entry(action: str, target: str, before: Any, after: Any, actor: str = "ana") -> dict[str, Any]:
    return {"audit_id": "AUD-" + uuid.uuid4().hex[:12], "at_time": datetime.now(UTC), "actor": actor,
            "session_id": None, "case_id": "CASE-1", "action": action, "target_kind": "flag",
            "target_id": target, "before": before, "after": after}  # fmt: skip


def test_annotations_and_audit_round_trip(store: TranscriptStore) -> None:
    assert store.annotations("CASE-1") == [] and store.audit_entries("CASE-1") == []
    before = {"flag_id": "FLG-1", "status": "new", "analyst_note": None, "updated_by": None}
    after = {**before, "status": "confirmed", "analyst_note": "seen on the exchange", "updated_by": "ana"}
    first = _entry("confirm_flag", "FLG-1", before, after)
    store.record_annotation(first, "flag", "FLG-1", after)
    store.record_annotation(first, "flag", "FLG-1", after)  # a retry: stored once
    role = {"chain": "ethereum", "address": "0xab", "role": "suspect", "note": None, "added_by": "ana"}
    store.record_annotation(_entry("set_role", "ethereum:0xab", None, role), "role", "ethereum:0xab", role)
    store.record_annotation(_entry("run_detectors", "CASE-1", {"n": 1}, {"n": 2}))  # audit only

    found = {(a["kind"], a["key"]): a for a in store.annotations("CASE-1")}
    assert set(found) == {("flag", "FLG-1"), ("role", "ethereum:0xab")}
    assert found[("flag", "FLG-1")]["value"] == after and found[("flag", "FLG-1")]["updated_by"] == "ana"
    assert store.annotations("CASE-2") == []
    log = store.audit_entries("CASE-1")
    assert [e["action"] for e in log] == ["confirm_flag", "set_role", "run_detectors"]
    assert log[0]["before"] == before and log[0]["after"] == after and log[0]["reverted_by"] is None

    # a revert: the annotation's state back, the reverted entry marked, both at once
    undo = _entry("revert:confirm_flag", "FLG-1", after, before, actor="bob")
    store.record_annotation(undo, "flag", "FLG-1", before, reverts=first["audit_id"])
    back = {(a["kind"], a["key"]): a for a in store.annotations("CASE-1")}
    assert back[("flag", "FLG-1")]["value"] == before and back[("flag", "FLG-1")]["updated_by"] == "bob"
    marked = {e["audit_id"]: e for e in store.audit_entries("CASE-1")}
    assert marked[first["audit_id"]]["reverted_by"] == undo["audit_id"]

    # a label removed: its row stays with no value, so every host removes it too
    store.record_annotation(_entry("revert:add_label", "LBL-A-1", role, None), "label", "LBL-A-1", None)
    gone = [a for a in store.annotations("CASE-1") if a["kind"] == "label"]
    assert [(a["key"], a["value"]) for a in gone] == [("LBL-A-1", None)]


def test_an_unknown_annotation_kind_is_refused(store: TranscriptStore) -> None:
    with pytest.raises(ConfigurationError, match="colour"):
        store.record_annotation(_entry("x", "y", None, None), "colour", "k", {})
