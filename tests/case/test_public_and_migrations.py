from __future__ import annotations

from pathlib import Path

import duckdb

import tahrix_lab.case as case
from tahrix_lab.agent.migrations import applied_migrations
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.case.schema import MIGRATIONS


def test_public_surface() -> None:
    modules = {"annotations", "chains", "commands", "context", "db", "demo", "detectors", "generator",
               "generator_core", "generator_incident", "generator_stories", "investigator", "known_tokens", "labels",
               "loaders", "prompts", "schema", "sqlguard", "taxonomy", "tools", "tracing", "tracing_hops",
               "tracing_index", "tracing_result", "tracing_taint", "tracing_types", "workspace"}  # fmt: skip
    exported = {n for n in dir(case) if not n.startswith("_")} - modules
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
