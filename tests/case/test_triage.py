"""Triage: flags rolled up into rows an analyst (or the model) can read, without losing a planted pattern."""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.detectors import triage
from tahrix_lab.case.workspace import Workspace

SCREEN = 30  # rows that fit one screen


def _covered(rows: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    out = set()
    for r in rows:
        for f in r["flags"] + [g for rel in r["related"] for g in rel["flags"]]:
            out.add((f["flag_type"], f["chain"], f["address"]))
    return out


def test_high_and_above_fits_one_screen_and_holds_every_planted_pattern(
    loaded: Workspace, ground_truth: dict[str, Any]
) -> None:
    tri = loaded.triage("CASE-001", min_severity="high")
    assert tri["flags_total"] > 600 and 10 <= tri["count"] <= SCREEN
    have = _covered(tri["rows"])
    missing = [(p["flag_type"], s["address"]) for p in ground_truth["planted"] for s in p["subjects"]
               if (p["flag_type"], s["chain"], s["address"]) not in have]  # fmt: skip
    assert missing == []
    flagged = {(f["flag_type"], f["chain"], f["address"]) for f in loaded.flags("CASE-001", limit=100_000)}
    assert have <= flagged  # rows cite real flags only; the raw flags stay queryable


def test_rows_are_ordered_and_cohorts_keep_every_member(
    loaded: Workspace, ground_truth: dict[str, Any]
) -> None:
    rows = triage(loaded.cases, "CASE-001")["rows"]
    ranks = ["info", "low", "medium", "high", "critical"]
    keys = [(-ranks.index(r["severity"]), r["role"] is None, -r["score"]) for r in rows]
    assert keys == sorted(keys)
    cohort = max((r for r in rows if r["subject"]["kind"] == "cohort"), key=lambda r: r["subject"]["members"])
    assert cohort["subject"]["members"] >= 300 and len(cohort["addresses"]) == cohort["subject"]["members"]
    perp = ground_truth["actors"]["A0"]
    row = next(r for r in rows if f"ethereum:{perp}" in r["addresses"])
    assert row["role"] == "perpetrator" and row["severity"] in ("high", "critical")
    peel = next(r for r in rows if "peel_chain" in r["flag_types"])
    assert any(f["flag_type"] == "dusting" for rel in peel["related"] for f in rel["flags"])


def test_dismissed_flags_leave_the_list(ws: Workspace) -> None:
    before = triage(ws.cases, "CASE-001")
    peel = ws.flags("CASE-001", flag_type="peel_chain")[0]
    ws.cases.connection.execute(
        "UPDATE anomaly_flags SET status = 'dismissed' WHERE flag_id = ?", [peel["flag_id"]]
    )
    after = triage(ws.cases, "CASE-001")
    assert after["flags_total"] == before["flags_total"] - 1
    assert not any("peel_chain" in r["flag_types"] for r in after["rows"])
    assert any(
        "peel_chain" in r["flag_types"] for r in triage(ws.cases, "CASE-001", include_dismissed=True)["rows"]
    )
