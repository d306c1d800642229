"""Files with case data and transcripts are the owner's only (0600), even under umask 022."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tahrix_lab.app.cli import _setup_logging
from tahrix_lab.case.workspace import Workspace


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_workspace_files_wal_locks_and_evidence_copies_are_0600(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "ws.duckdb"
    with Workspace(db) as ws:
        ws.load_sample_case()
        flag = ws.flags("CASE-001")[0]["flag_id"]
        with ws.cases.write():  # inside a write the WAL exists
            ws.cases.connection.execute(
                "UPDATE anomaly_flags SET analyst_note = 'x' WHERE flag_id = ?", [flag]
            )
            created = sorted(p.name for p in tmp_path.iterdir())
            assert {"ws.duckdb", "ws.duckdb.lock", "ws.duckdb.turns"} <= set(created)
            assert all(_mode(tmp_path / name) == 0o600 for name in created), {
                n: oct(_mode(tmp_path / n)) for n in created
            }
        ws.annotate("CASE-001", "flag", flag, "note", {"text": "checked"}, analyst="ana")
        out = ws.export_case("CASE-001", tmp_path / "export")
        exported = list(out.iterdir())
        assert exported and all(_mode(p) == 0o600 for p in exported)
        assert _mode(out) == 0o700
    files = [p for p in tmp_path.iterdir() if p.is_file()]
    assert files and all(_mode(p) == 0o600 for p in files), {p.name: oct(_mode(p)) for p in files}
    # the process's umask is its own again once the file is let go
    probe = tmp_path / "after.txt"
    probe.write_text("x")
    assert _mode(probe) == 0o644


def test_the_log_file_is_0600(tmp_path: Path, umask_022: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAHRIX_LOG", str(tmp_path / "logs" / "tahrix.log"))
    log = _setup_logging(False)
    try:
        assert _mode(log) == 0o600
    finally:
        import logging

        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_tahrix", False)]:
            root.removeHandler(handler)
            handler.close()
