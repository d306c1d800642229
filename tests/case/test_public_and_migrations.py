from __future__ import annotations

from pathlib import Path
from types import ModuleType

import duckdb

import tahrix_lab.case as case
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.migrations import applied_migrations
from tahrix_lab.case.schema import MIGRATIONS


def test_public_surface() -> None:
    # the submodules are reachable as attributes once imported; the curated names are the rest
    exported = {
        n for n in dir(case) if not n.startswith("_") and not isinstance(getattr(case, n), ModuleType)
    }
    assert exported == set(case.__all__)
    for name in case.__all__:
        assert getattr(case, name) is not None


def test_migrates_a_blank_database_and_a_transcript_only_one(tmp_path: Path) -> None:
    blank = duckdb.connect(str(tmp_path / "blank.duckdb"))
    case.CaseDB(blank)
    case.CaseDB(blank)  # a second open applies nothing again
    assert applied_migrations(blank, "case") == [m.name for m in MIGRATIONS]
    blank.close()
    old = tmp_path / "old.duckdb"
    TranscriptStore(old).close()  # a database made before the case package existed
    with case.Workspace(old) as ws:
        assert applied_migrations(ws.cases.connection, "case") == [m.name for m in MIGRATIONS]
        assert applied_migrations(ws.cases.connection, "transcript")
        assert ws.list_cases() == []
