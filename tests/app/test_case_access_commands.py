"""`tahrix case grant|revoke|access` and `case load --owner`, run as the real CLI (subprocesses)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tahrix_lab.case.workspace import Workspace, sample_case_dir
from tests.app.test_case_commands import tahrix


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ws.duckdb"
    with Workspace(path) as ws:
        ws.load_sample_case(detect=False)
    return path


def test_grant_access_revoke(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAHRIX_USER", "admin")
    done = tahrix(db, "case", "grant", "CASE-001", "alice", "--role", "owner")
    assert done.returncode == 0, done.stderr
    assert "alice may open CASE-001 as owner" in done.stdout
    assert tahrix(db, "case", "grant", "CASE-001", "bob", "--role", "viewer").returncode == 0
    listed = tahrix(db, "case", "access", "CASE-001")
    assert listed.returncode == 0, listed.stderr
    lines = [line.split("\t") for line in listed.stdout.splitlines() if "\t" in line]
    assert [(u, r, by.split(" at ")[0]) for u, r, by in lines] == [
        ("alice", "owner", "granted by admin"),
        ("bob", "viewer", "granted by admin"),
    ]
    assert "open to every signed-in user" in listed.stdout  # the sample case is open by default

    gone = tahrix(db, "case", "revoke", "CASE-001", "bob")
    assert gone.returncode == 0 and "bob may no longer open CASE-001" in gone.stdout
    again = tahrix(db, "case", "revoke", "CASE-001", "bob")
    assert again.returncode == 0 and "nothing changed" in again.stdout
    with Workspace(db) as ws:
        assert ws.store.cases_granted("alice") == {"CASE-001": "owner"}
        assert ws.store.cases_granted("bob") == {}


def test_unknown_case_and_role_are_calm_errors(db: Path) -> None:
    unknown = tahrix(db, "case", "grant", "CASE-NOPE", "alice")
    assert unknown.returncode == 1
    assert "No case named 'CASE-NOPE'" in unknown.stderr + unknown.stdout
    assert "Traceback" not in unknown.stderr
    bad = tahrix(db, "case", "grant", "CASE-001", "alice", "--role", "admin")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_load_grants_its_owner(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    shutil.copytree(sample_case_dir(), folder)
    db = tmp_path / "ws.duckdb"
    done = tahrix(db, "case", "load", str(folder), "--owner", "carol")
    assert done.returncode == 0, done.stderr
    with Workspace(db) as ws:
        assert ws.store.cases_granted("carol") == {"CASE-001": "owner"}
