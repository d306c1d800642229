"""Case manifests travel (issue 26): every step of a case's manifest moves as a
``tahrix-manifest/1`` line, lossless (number, id, who, when to the microsecond, entry and
fingerprint), on both engines; a step already there is refused or skipped, another step at
its number or a gap before it is always refused (the evidence's history would fork), a
hostile step line is named by its line and nothing is written. Across engines the target
rebuilds and verifies the same evidence with ``tahrix case open``."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.lab.transfer import export_sessions, import_sessions
from tests.lab.test_transfer_cases import annotated_workspace, run_cli

ENTRY = {"source": "files", "files": [{"path": "x/ü.csv", "size": 3, "sha256": "ab" * 32}], "chain": None}
PRINT = {"transfers": {"rows": 3, "hash": "f" * 32}, "anomaly_flags": {"rows": 0, "hash": "0" * 32}}


def source_with_steps(path: Path, case_id: str = "C-1") -> TranscriptStore:
    store = TranscriptStore(path)
    store.add_manifest_step(case_id, "load", ENTRY, PRINT, step_id="step-a", recorded_by="ana")
    store.add_manifest_step(
        case_id, "detect", {"params": {"b": {"z": 1, "a": 0.5}}, "detectors": ["b"]}, PRINT, step_id="step-b"
    )
    return store


def exported(store: TranscriptStore, **kwargs: Any) -> str:
    out = io.StringIO()
    export_sessions(store, out, **kwargs)
    return out.getvalue()


def test_steps_move_losslessly_and_again_are_refused_or_skipped(store_target: str, tmp_path: Path) -> None:
    source = source_with_steps(tmp_path / "src.duckdb")
    text = exported(source, case="C-1")
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(r["format"], r["step"], r["step_id"]) for r in lines] == [
        ("tahrix-manifest/1", 0, "step-a"), ("tahrix-manifest/1", 1, "step-b"),
    ]  # fmt: skip
    assert list(lines[1]["entry"]) == ["detectors", "params"] and list(lines[1]["entry"]["params"]["b"]) == [
        "a",
        "z",
    ]

    store = TranscriptStore(store_target)
    assert import_sessions(store, io.StringIO(text)).case_rows == 2
    assert store.case_manifest("C-1") == source.case_manifest("C-1")  # recorded_at to the microsecond
    assert store.record_cases() == ["C-1"] and exported(store) == exported(source)
    with pytest.raises(ConfigurationError, match=r"line 1: step: step 0 of case 'C-1' is already in"):
        import_sessions(store, io.StringIO(text))
    again = import_sessions(store, io.StringIO(text), on_conflict="skip")
    assert (again.case_rows, again.case_rows_skipped) == (0, 2)
    source.close()


def test_another_step_at_its_number_or_a_gap_is_always_refused(store_target: str, tmp_path: Path) -> None:
    source = source_with_steps(tmp_path / "src.duckdb")
    text = exported(source, case="C-1")
    store = TranscriptStore(store_target)
    store.add_manifest_step("C-1", "load", ENTRY, PRINT, step_id="made-here")  # this record's own history
    for on_conflict in ("error", "skip"):
        with pytest.raises(
            ConfigurationError, match=r"line 1: step: step 0 of case 'C-1' is another step"
        ) as info:
            import_sessions(store, io.StringIO(text), on_conflict=on_conflict)  # type: ignore[arg-type]
        assert "fork" in str(info.value)
    assert [s["step_id"] for s in store.case_manifest("C-1")] == ["made-here"]  # nothing written

    gap = text.splitlines()[1] + "\n"  # step 1 alone into an empty case
    fresh = TranscriptStore(tmp_path / "fresh.duckdb")
    with pytest.raises(ConfigurationError, match=r"line 1: step: step 1 of case 'C-1' follows no step 0"):
        import_sessions(fresh, io.StringIO(gap))
    # one step id in two places (another case here) is refused by the id
    moved = json.dumps({**json.loads(text.splitlines()[0]), "case_id": "C-2"})
    with pytest.raises(ConfigurationError, match=r"line 2: step_id: step-a is already step 0 of case 'C-1'"):
        import_sessions(fresh, io.StringIO(text.splitlines()[0] + "\n" + moved + "\n"))
    assert fresh.manifest_cases() == []
    source.close()


GOOD_STEP = {"format": "tahrix-manifest/1", "case_id": "C-1", "step": 0, "step_id": "s-0", "kind": "load",
             "entry": ENTRY, "fingerprint": PRINT, "recorded_by": None,
             "recorded_at": "2026-03-04T05:06:07.123456+00:00"}  # fmt: skip


def _step(**changes: Any) -> str:
    return json.dumps({**GOOD_STEP, **changes})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_step(step="0"), r'line 2: step: "0" is not a step number'),
        (_step(step=-1), "line 2: step: -1 is not a step number"),
        (_step(step=True), "line 2: step: true is not a step number"),
        (_step(kind="delete"), 'line 2: kind: "delete" is not one of load, detect'),
        (_step(entry=[1]), r"line 2: entry: \[1\] is not an object"),
        (_step(fingerprint=None), "line 2: fingerprint: null is not an object"),
        (
            _step(recorded_at="2026-03-04T05:06:07"),
            "line 2: recorded_at: .* not a timestamp with its time zone",
        ),
        (_step(step_id=""), 'line 2: step_id: "" is not a non-empty string'),
        (_step(sql="DROP TABLE x"), "line 2: sql: not a field of a tahrix-manifest/1 row"),
        (
            json.dumps({k: v for k, v in GOOD_STEP.items() if k != "fingerprint"}),
            "line 2: fingerprint: missing",
        ),
    ],
)
def test_a_hostile_step_is_refused_naming_the_line_nothing_written(
    store_target: str, bad: str, message: str
) -> None:
    text = _step() + "\n" + bad + "\n" + _step(step=1, step_id="s-1") + "\n"
    store = TranscriptStore(store_target)
    with pytest.raises(ConfigurationError, match=message) as info:
        import_sessions(store, io.StringIO(text))
    assert str(info.value).startswith("Nothing was imported") and "1 bad record(s) of 3" in str(info.value)
    assert store.manifest_cases() == [] and store.record_cases() == []


def test_duckdb_to_postgresql_to_duckdb_then_case_open_verifies(tmp_path: Path, pg_url: str) -> None:
    """As an analyst moves a case with the CLI: the target rebuilds its evidence from the files
    the manifest names, and ``--verify`` finds it identical."""
    case_id, _ = annotated_workspace(tmp_path / "ws.duckdb")
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "NO_COLOR": "1", "COLUMNS": "200"}
    base.pop("TAHRIX_EVIDENCE_DB", None)
    envs = {name: {**base, "TAHRIX_DB": target} for name, target in
            (("duck", str(tmp_path / "ws.duckdb")), ("pg", pg_url), ("back", str(tmp_path / "back.duckdb")))}  # fmt: skip
    dump = tmp_path / "case.jsonl"
    assert run_cli(envs["duck"], "export", "--case", case_id, "-o", str(dump)).returncode == 0
    assert run_cli(envs["pg"], "import", str(dump)).returncode == 0
    dump.write_text(run_cli(envs["pg"], "export", "--case", case_id).stdout, encoding="utf-8")
    out = run_cli(envs["back"], "import", str(dump))
    assert out.returncode == 0, out.stderr
    opened = run_cli(envs["back"], "case", "open", case_id)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.startswith(f"{case_id}: rebuilt (2 steps in its manifest, 2 replayed here)")
    verified = run_cli(envs["back"], "case", "open", case_id, "--verify")
    assert verified.returncode == 0 and verified.stdout.startswith(f"{case_id}: identical"), verified.stdout
    # the three records hold the same manifest, byte for byte
    assert run_cli(envs["back"], "export", "--case", case_id).stdout == dump.read_text(encoding="utf-8")
