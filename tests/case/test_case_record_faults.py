"""The record's server goes away while a host works on a case (PostgreSQL stopped with
``pg_ctl stop -m immediate`` inside a load or a detector run, then started again).

The evidence and its manifest step commit together: the step is recorded before the
evidence's transaction commits, so a step the record never got leaves nothing on the copy.
The analyst gets the calm store message, runs the same command again once the server is
back, and it is recorded as the next step; another host rebuilds the same evidence. Before
this, the copy kept the load without its step, every later load was refused as "matches no
step", and ``case open`` could only say to start a fresh evidence file."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import StoreUnavailableError
from tahrix_lab.agent.storage import PostgresStore
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.manifest import fingerprint
from tahrix_lab.case.workspace import SAMPLE_CASE_ID as CASE
from tahrix_lab.case.workspace import Workspace
from tests.agent.storage.pg_server import PgServer
from tests.agent.storage.test_faults import own_server  # noqa: F401  (a server this module stops)
from tests.case.test_case_open import OVERRIDE, case_files, evidence, load_on_a
from tests.case.test_case_turns import export, steps


@pytest.fixture
def host(
    own_server: PgServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Workspace, str]]:
    # Short deadlines: the stopped server is given up on in seconds, not minutes.
    monkeypatch.setenv("TAHRIX_PG_STATEMENT_TIMEOUT", "1")
    monkeypatch.setenv("TAHRIX_PG_RETRY", "1")
    monkeypatch.setenv("TAHRIX_DB_WAIT", "2")
    url = own_server.url(own_server.create_database())
    case_files(tmp_path / "host-a" / "files")
    monkeypatch.chdir(tmp_path / "host-a")
    ws = Workspace(tmp_path / "host-a" / "tahrix-evidence.duckdb", record=TranscriptStore(url))
    load_on_a(ws)
    yield ws, url
    ws.close()
    PostgresStore.close_pools()


def stop_inside(monkeypatch: pytest.MonkeyPatch, name: str, server: PgServer) -> None:
    """The record's server stops once ``CaseDB.name`` (part of the work inside the turn) has run."""
    real: Callable[..., Any] = getattr(CaseDB, name)
    done = threading.Event()

    def then_stop(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        if not done.is_set():
            done.set()
            server.stop("immediate")
        return got

    monkeypatch.setattr(CaseDB, name, then_stop)


WORK = {
    "load": lambda ws, files: ws.load_file(CASE, export(files / "more.csv", 5000), chain="ethereum"),
    "folder": lambda ws, files: ws.load_case_folder(_other_case(files)),
    "detect": lambda ws, files: ws.run_detectors(CASE, ["repeated_amount"], OVERRIDE),
}
# Where the server stops: inside the work's transaction, after the evidence is written
# (every load ends by rebuilding the case's address profiles; a run writes its flags).
INSIDE = {"load": "refresh_addresses", "folder": "refresh_addresses", "detect": "upsert_flags"}


def _other_case(files: Path) -> Path:
    """The sample case folder under another case id: a second case loaded from a folder."""
    folder = files / "case-2"
    if not folder.exists():
        shutil.copytree(files / "case", folder)
        meta = json.loads((folder / "case.json").read_text())
        (folder / "case.json").write_text(json.dumps({**meta, "case_id": "CASE-002"}))
    return folder


@pytest.mark.parametrize("kind", list(WORK))
def test_a_step_the_record_never_got_leaves_nothing_and_the_same_command_works_again(
    kind: str,
    host: tuple[Workspace, str],
    own_server: PgServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    ws, url = host
    files = tmp_path / "host-a" / "files"
    case = "CASE-002" if kind == "folder" else CASE
    before_steps = steps(ws) if kind != "folder" else []
    before = fingerprint(ws.cases, case) if ws.cases.case_exists(case) else None
    with monkeypatch.context() as patched:
        stop_inside(patched, INSIDE[kind], own_server)
        try:
            with pytest.raises(StoreUnavailableError) as info:
                WORK[kind](ws, files)
        finally:
            own_server.start()
    assert "PostgreSQL record" in str(info.value) and "Try again" in str(info.value)
    # nothing of the work is on the copy: it still matches the manifest's last step
    assert (fingerprint(ws.cases, case) if ws.cases.case_exists(case) else None) == before

    WORK[kind](ws, files)  # the server is back: the same command, as the message says
    recorded = [(s["step"], s["kind"]) for s in ws.store.case_manifest(case)]
    expected = "load" if kind != "detect" else "detect"
    assert recorded[-1] == (len(before_steps), expected)
    assert ws.open_case(case, verify=True)["status"] == "identical"

    case_files(tmp_path / "host-b" / "files")  # another host rebuilds what A has
    _other_case(tmp_path / "host-b" / "files")
    export(tmp_path / "host-b" / "files" / "more.csv", 5000)
    ws_b = Workspace(tmp_path / "host-b" / "tahrix-evidence.duckdb", record=TranscriptStore(url))
    try:
        assert ws_b.open_case(case, files=tmp_path / "host-b" / "files")["status"] == "rebuilt"
        if case == CASE:
            assert evidence(ws_b) == evidence(ws)
        assert fingerprint(ws_b.cases, case) == fingerprint(ws.cases, case)
    finally:
        ws_b.close()


KILLED_AFTER_ITS_STEP = """
import os, signal, sys
from tahrix_lab.agent import TranscriptStore
from tahrix_lab.case.loaders import manifest
from tahrix_lab.case.workspace import Workspace

real = manifest.record_step

def then_killed(*args, **kwargs):
    real(*args, **kwargs)  # the step is in the record; the evidence has not committed yet
    os.kill(os.getpid(), signal.SIGKILL)

manifest.record_step = then_killed
ws = Workspace(sys.argv[1], record=TranscriptStore(sys.argv[2]))
ws.load_file(sys.argv[3], sys.argv[4], chain="ethereum")
"""


def test_a_host_killed_between_its_step_and_its_commit_is_one_step_behind(
    host: tuple[Workspace, str], tmp_path: Path
) -> None:
    """The other order's window: the step recorded, then ``kill -9`` before the evidence
    commits. The copy is then behind its manifest by that step, which ``case open`` catches
    up like any other host's step."""
    ws, url = host
    files = tmp_path / "host-a" / "files"
    before = fingerprint(ws.cases, CASE)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_ITS_STEP, str(ws.path), url, CASE,
         str(export(files / "more.csv", 5000))],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [(s["step"], s["kind"]) for s in ws.store.case_manifest(CASE)][-1] == (3, "load")
    assert fingerprint(ws.cases, CASE) == before  # the killed load left nothing here
    assert ws.open_case(CASE, files=files)["status"] == "caught up"
    assert ws.open_case(CASE, verify=True)["status"] == "identical"
    assert ws.cases.scalar("SELECT count(*) FROM transfers WHERE case_id = ?", [CASE]) == 5942
