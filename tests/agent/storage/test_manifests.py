"""Conformance: case manifests, how each case's evidence was made (issue 26 item 2), on both
engines: steps numbered per case in order, idempotent by step id, JSON kept as written."""

from __future__ import annotations

import threading
import uuid

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage.interface import MANIFEST_COLUMNS

LOAD = {"source": "files", "chain": None, "token": None, "force": False,
        "files": [{"path": "exports/usdt.csv", "size": 1234, "sha256": "ab" * 32, "format": "etherscan",
                   "rows_read": 3, "inserted": 3}]}  # fmt: skip
FP = {"transfers": {"rows": 3, "hash": "0f" * 16}, "anomaly_flags": {"rows": 0, "hash": "11" * 16}}


def test_steps_are_numbered_per_case_and_read_back_in_order(store: TranscriptStore) -> None:
    assert store.case_manifest("CASE-1") == [] and store.manifest_cases() == []
    detect = {"detectors": ["dusting"], "params": {"dusting": {"max_usd": 1.0, "min_targets": 3}}}
    assert store.add_manifest_step("CASE-1", "load", LOAD, FP, step_id="s1", recorded_by="ana") == 0
    assert store.add_manifest_step("CASE-2", "load", LOAD, FP, step_id="s2") == 0
    assert store.add_manifest_step("CASE-1", "detect", detect, FP, step_id="s3", recorded_by="ana") == 1

    steps = store.case_manifest("CASE-1")
    assert [(s["step"], s["kind"], s["step_id"]) for s in steps] == [(0, "load", "s1"), (1, "detect", "s3")]
    assert set(steps[0]) == set(MANIFEST_COLUMNS)
    assert steps[0]["entry"] == LOAD and steps[1]["entry"] == detect and steps[1]["fingerprint"] == FP
    assert steps[0]["recorded_by"] == "ana" and steps[0]["recorded_at"].tzinfo is not None
    assert store.manifest_cases() == ["CASE-1", "CASE-2"]


def test_a_retried_step_is_stored_once(store: TranscriptStore) -> None:
    assert store.add_manifest_step("CASE-1", "load", LOAD, FP, step_id="same") == 0
    assert store.add_manifest_step("CASE-1", "load", LOAD, FP, step_id="same") == 0
    assert len(store.case_manifest("CASE-1")) == 1


def test_an_unknown_step_kind_is_refused(store: TranscriptStore) -> None:
    with pytest.raises(ConfigurationError, match="Unknown manifest step 'export'"):
        store.add_manifest_step("CASE-1", "export", LOAD, FP, step_id="x")
    assert store.case_manifest("CASE-1") == []


def test_writers_at_once_get_distinct_steps(store_target: str) -> None:
    # two hosts loading into one case at the same moment: every step kept, numbers 0…n-1
    stores = [TranscriptStore(store_target) for _ in range(3)]
    errors: list[BaseException] = []

    def add(s: TranscriptStore) -> None:
        try:
            for _ in range(4):
                s.add_manifest_step("CASE-1", "load", LOAD, FP, step_id=str(uuid.uuid4()))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [s["step"] for s in stores[0].case_manifest("CASE-1")] == list(range(12))
    for s in stores:
        s.close()
