from __future__ import annotations

from typing import Any

from tahrix_lab.case.detectors import DETECTORS
from tahrix_lab.case.schema import FLAG_TYPES
from tahrix_lab.case.workspace import Workspace


def _flags(ws: Workspace) -> list[dict[str, Any]]:
    return ws.flags("CASE-001", limit=100_000)


def test_every_planted_pattern_is_flagged(loaded: Workspace, ground_truth: dict[str, Any]) -> None:
    have = {(f["flag_type"], f["chain"], f["address"]) for f in _flags(loaded)}
    missing = [
        (p["flag_type"], s["address"], p["note"])
        for p in ground_truth["planted"]
        for s in p["subjects"]
        if (p["flag_type"], s["chain"], s["address"]) not in have
    ]
    assert missing == []


def test_no_distractor_is_flagged(loaded: Workspace, ground_truth: dict[str, Any]) -> None:
    flags = _flags(loaded)
    wrong = []
    for d in ground_truth["distractors"]:
        for f in flags:
            if (f["chain"], f["address"]) == (d["chain"], d["address"]) and (
                d["must_not_flag"] == "all" or f["flag_type"] in d["must_not_flag"]
            ):
                wrong.append((d["kind"], f["flag_type"]))
    assert wrong == []


def test_planted_evidence_is_cited(loaded: Workspace, ground_truth: dict[str, Any]) -> None:
    flags = _flags(loaded)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for f in flags:
        by_type.setdefault(f["flag_type"], []).append(f)
    peel = next(p for p in ground_truth["planted"] if p["flag_type"] == "peel_chain")
    got = by_type["peel_chain"][0]
    assert got["evidence"]["tx_hashes"] == peel["tx_hashes"] and got["evidence"]["length"] == 12
    hop = next(p for p in ground_truth["planted"] if p["flag_type"] == "chain_hopping")
    cited = {tuple(h["bridge_event_ids"]) for f in by_type["chain_hopping"] for h in f["evidence"]["hops"]}
    assert {tuple(pair) for pair in hop["bridge_event_pairs"]} <= cited
    poison = next(f for f in by_type["address_poisoning"])
    assert poison["severity"] == "critical"
    planted = next(p for p in ground_truth["planted"] if p["flag_type"] == "address_poisoning")
    assert poison["evidence"]["lookalikes"] == [planted["lookalike"]] and poison["evidence"]["imitated"] == [
        planted["imitated"]
    ]
    structuring = by_type["structuring"][0]
    assert structuring["evidence"]["count_in_window"] >= 3 and structuring["params"]["thresholds_usd"] == [
        10000
    ]
    for f in flags:
        assert f["params"] and f["evidence"].get("tx_hashes") is not None, f["flag_type"]


def test_all_flag_types_have_a_detector() -> None:
    assert set(DETECTORS) == set(FLAG_TYPES)


def test_rerun_with_other_params_keeps_decisions(ws: Workspace) -> None:
    peel = ws.flags("CASE-001", flag_type="peel_chain")[0]
    ws.cases.connection.execute(
        "UPDATE anomaly_flags SET status = 'confirmed', updated_by = 'ana' WHERE flag_id = ?",
        [peel["flag_id"]],
    )
    before = {f["flag_id"] for f in ws.flags("CASE-001", flag_type="structuring")}
    assert before
    result = ws.run_detectors("CASE-001", ["structuring", "peel_chain"],
                              {"structuring": {"min_count": 13}, "peel_chain": {"min_length": 20}})  # fmt: skip
    assert result["by_detector"]["structuring"]["params"]["min_count"] == 13
    assert ws.flags("CASE-001", flag_type="structuring") == []
    kept = ws.flags("CASE-001", flag_type="peel_chain")
    assert [f["flag_id"] for f in kept] == [peel["flag_id"]] and kept[0]["status"] == "confirmed"
    ws.run_detectors("CASE-001", ["structuring"])
    assert {f["flag_id"] for f in ws.flags("CASE-001", flag_type="structuring")} == before


def test_sanctions_respect_label_validity(ws: Workspace, ground_truth: dict[str, Any]) -> None:
    xu = ground_truth["actors"]["XU"]
    assert not ws.flags("CASE-001", flag_type="sanctions_exposure", address=xu)
    assert ws.flags("CASE-001", flag_type="mixer_exposure", address=xu)  # it did use the mixer
    ws.cases.connection.execute(
        "UPDATE labels SET valid_from = NULL WHERE case_id = 'CASE-001' AND address = ?",
        [ground_truth["actors"]["MIXB"]],
    )
    ws.run_detectors("CASE-001", ["sanctions_exposure"])
    assert ws.flags("CASE-001", flag_type="sanctions_exposure", address=xu)
