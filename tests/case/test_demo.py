from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from tahrix_lab.app.demo import run_demo
from tahrix_lab.case.investigator import scripted_backend
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.cli import main


def test_scripted_demo_runs_tools_for_real_and_cites_real_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TAHRIX_BACKEND", raising=False)
    buf = io.StringIO()
    with Workspace(tmp_path / "demo.duckdb") as ws:
        out = run_demo(ws, console=Console(file=buf, width=200, highlight=False))
        text = buf.getvalue()
        assert out["scripted"] and "Scripted investigation" in text
        messages = ws.store.load_messages(out["session_id"])
        names = [p.tool_name for m in messages for p in m.parts if p.type == "tool_use"]
        assert names == [
            "get_case_overview",
            "trace_funds",
            "list_transfers",
            "list_flags",
            "list_flags",
            "list_flags",
            "find_bridge_events",
            "annotate",
        ]
        statuses = [p.tool_status for m in messages for p in m.parts if p.type == "tool_result"]
        assert statuses == ["ok"] * 7 + ["error"]  # the read-only grant refused the write
        answer = messages[-1].text
        flag_ids = re.findall(r"FLG-[0-9a-f]{10}", answer)
        assert flag_ids and all(
            ws.cases.scalar("SELECT count(*) FROM anomaly_flags WHERE flag_id = ?", [f]) for f in flag_ids
        )
        hashes = re.findall(r"\b(?:0x)?[0-9a-f]{64}\b", answer)
        assert hashes and all(
            ws.cases.scalar("SELECT count(*) FROM transactions WHERE tx_hash = ?", [h]) for h in hashes
        )
        assert "Flags in CASE-001" in text and "Cost" in text and "peel_chain 1" in text
        assert ws.flags("CASE-001", flag_type="peel_chain")[0]["status"] == "new"


def test_scripted_backend_allowed_to_write(tmp_path: Path) -> None:
    with Workspace(tmp_path / "w.duckdb") as ws:
        cid = ws.load_sample_case()
        out = run_demo(ws, backend=scripted_backend(ws, cid), model="scripted", console=Console(file=io.StringIO()),
                       grant={"may_write": True})  # fmt: skip
        assert out["case_id"] == cid
        assert ws.flags(cid, flag_type="peel_chain")[0]["status"] == "confirmed"


def test_cli_generate_load_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "cli.duckdb")
    assert main(["--db", db, "case", "generate", "--seed", "3", "--out", str(tmp_path / "g")]) == 0
    assert main(["--db", db, "case", "load", str(tmp_path / "g")]) == 0
    assert main(["--db", db, "case", "list"]) == 0
    assert main(["--db", db, "case", "detect", "CASE-001", "--only", "peel_chain"]) == 0
    assert main(["--db", db, "case", "export", "CASE-001", str(tmp_path / "e")]) == 0
    out = capsys.readouterr().out
    assert "CASE-001" in out and "peel_chain: 1 flags" in out
    assert (tmp_path / "e" / "transfers.csv").read_text().count("\n") == (
        tmp_path / "g" / "transfers.csv"
    ).read_text().count("\n")
    assert main(["--db", db, "case", "load", str(tmp_path / "nope.csv")]) == 1
    assert main(["--db", db, "case", "export", "CASE-404", str(tmp_path / "x")]) == 1
