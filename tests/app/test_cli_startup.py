"""What `tahrix` imports before it answers: the parser and --help/--version load no heavy library,
and `sessions` no DataFrame and no JSON-schema grammar. (Times are in bench/bench_cli_startup.py;
a test asserts what is imported, never how long it took.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tahrix_lab.agent import FakeBackend, TranscriptStore, ask
from tahrix_lab.agent.backends.fake import text

HEAVY = ("pandas", "numpy", "duckdb", "rich", "fastapi", "jsonschema", "rfc3987_syntax", "openai", "boto3",
         "genai_prices", "pydantic", "tahrix_lab.agent", "tahrix_lab.case", "tahrix_lab.lab")  # fmt: skip


def imported(*args: str, db: Path | None = None) -> tuple[set[str], str]:
    env = {**os.environ, "COLUMNS": "200"}
    if db is not None:
        env["TAHRIX_DB"] = str(db)
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tahrix_lab.cli", *args],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")
    }
    return names, run.stdout


def heavy(names: set[str], allowed: tuple[str, ...] = ()) -> set[str]:
    return {n for n in names for h in HEAVY if (n == h or n.startswith(h + ".")) and h not in allowed}


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--version"], ["case", "flags", "--help"], ["sessions", "--help"], ["serve", "--help"]],
)
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    names, out = imported(*args)
    assert "tahrix_lab.app.cli" in names  # the measurement sees our modules
    assert heavy(names) == set()
    assert out  # and it answered


def test_sessions_loads_no_dataframe_and_no_schema_grammar(tmp_path: Path) -> None:
    with TranscriptStore(tmp_path / "t.duckdb") as store:
        session = store.create_session(user="ana", purpose="chat", title="hello")
        list(
            ask(store, session, "hi?", backend=FakeBackend([[text("hello")]], name="openai"), model="gpt-4o")
        )
    names, out = imported("sessions", db=tmp_path / "t.duckdb")
    assert "hello" in out and session.id in out
    assert {
        "pandas",
        "numpy",
        "jsonschema",
        "rfc3987_syntax",
        "tahrix_lab.lab",
        "tahrix_lab.case",
    } & names == set()
