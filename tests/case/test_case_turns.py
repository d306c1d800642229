"""Two hosts working on one case at the same moment (a team on one record): each load or
detector run holds the host's turn at the case from its up-to-date check until its step is
recorded. The other host's attempt meanwhile is refused at once, by name, with nothing loaded
or recorded, and after ``tahrix case open`` it is recorded as the next step: the manifest
stays one history that any host replays. Without the turn both would record a step over the
same copy and no host could rebuild the case. If the turn is lost with its connection (the
record's server kills it), the step's number still refuses the late step, and the manifest
still rebuilds on a fresh host. A host killed mid-load gives its turn back at once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import CaseBusy, ManifestMoved
from tahrix_lab.case.loaders import files as file_loader
from tahrix_lab.case.loaders.manifest import StaleCopy, fingerprint
from tahrix_lab.case.workspace import SAMPLE_CASE_ID as CASE
from tahrix_lab.case.workspace import Workspace
from tests.agent.storage.conftest import pg_server, pg_url  # noqa: F401
from tests.case.loaders.export_fixtures import ERC20_HEADER, a, erc20_row, write_csv
from tests.case.test_case_open import OVERRIDE, case_files, evidence, hosts  # noqa: F401

Hosts = tuple[Workspace, Workspace, Path]


def steps(ws: Workspace) -> list[tuple[int, str, str | None]]:
    return [(s["step"], s["kind"], s["recorded_by"]) for s in ws.store.case_manifest(CASE)]


def export(path: Path, first: int) -> Path:
    rows = [erc20_row(i, a(first + i), a(first + 500 + i), "3", "$3.00") for i in range(1, 4)]
    write_csv(path, ERC20_HEADER, rows)
    return path


class PausedLoad:
    """Host A's load, in its own thread, stopped inside its turn until ``finish()``."""

    def __init__(self, ws: Workspace, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inside, self.go = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        real: Callable[..., Any] = file_loader._load

        def paused(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is self.thread:
                self.inside.set()
                assert self.go.wait(60)
            return real(*args, **kwargs)

        monkeypatch.setattr(file_loader, "_load", paused)

        def run() -> None:
            try:
                ws.load_file(CASE, path, chain="ethereum")
            except BaseException as exc:  # the test reads it
                self.error = exc

        self.thread = threading.Thread(target=run, name="host-a-load")
        self.thread.start()
        assert self.inside.wait(60), "host A's load never began"

    def finish(self) -> BaseException | None:
        self.go.set()
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self.error


def test_the_second_host_is_refused_while_the_first_works_then_takes_its_turn(
    hosts: Hosts,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws_a, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)  # both copies at step 2
    theirs = export(copy / "from-a.csv", 5000)
    ours = export(copy / "from-b.csv", 7000)
    monkeypatch.setenv("TAHRIX_USER", "ana")
    paused = PausedLoad(ws_a, theirs, monkeypatch)

    monkeypatch.setenv("TAHRIX_USER", "bob")
    held, before = fingerprint(ws_b.cases, CASE), steps(ws_b)
    for attempt in (
        lambda: ws_b.load_file(CASE, ours, chain="ethereum"),
        lambda: ws_b.run_detectors(CASE, ["repeated_amount"], OVERRIDE),
    ):
        with pytest.raises(CaseBusy) as info:
            attempt()
        assert f"Another host is loading into case {CASE!r}" in str(info.value)
        assert f"tahrix case open {CASE}" in str(info.value) and "Nothing was loaded" in str(info.value)
    assert fingerprint(ws_b.cases, CASE) == held and steps(ws_b) == before

    monkeypatch.setenv("TAHRIX_USER", "ana")  # one process plays both hosts: A's user as it records
    assert paused.finish() is None
    assert steps(ws_a)[-1] == (3, "load", "ana")
    monkeypatch.setenv("TAHRIX_USER", "bob")
    with pytest.raises(StaleCopy, match="the copy here is at step 2"):
        ws_b.load_file(CASE, ours, chain="ethereum")
    assert ws_b.open_case(CASE, files=copy)["status"] == "caught up"
    ws_b.load_file(CASE, ours, chain="ethereum")
    assert steps(ws_b)[-1] == (4, "load", "bob")
    assert ws_a.open_case(CASE, files=copy)["status"] == "caught up"  # one history: A replays B's step
    assert evidence(ws_a) == evidence(ws_b)


def test_one_host_may_work_on_two_cases_at_once(hosts: Hosts) -> None:  # noqa: F811
    """The turn is per case: host A holding CASE's does not hold up another case on host B."""
    ws_a, ws_b, copy = hosts
    with ws_a.store.case_turn(CASE):
        with pytest.raises(CaseBusy):
            ws_b.store.case_turn(CASE).__enter__()
        report = ws_b.load_file("CASE-OTHER", export(copy / "other.csv", 9000), chain="ethereum")
        assert report.inserted["transfers"] == 3
    with ws_b.store.case_turn(CASE):  # given back at the block's end
        pass


@pytest.mark.parametrize("hosts", ["postgresql"], indirect=True)
def test_a_turn_lost_with_its_connection_records_nothing_over_the_other_hosts_step(
    hosts: Hosts,  # noqa: F811
    pg_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    ws_a, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)
    theirs = export(copy / "from-a.csv", 5000)
    ours = export(copy / "from-b.csv", 7000)
    monkeypatch.setenv("TAHRIX_USER", "ana")
    paused = PausedLoad(ws_a, theirs, monkeypatch)
    with psycopg.connect(pg_url, autocommit=True) as admin:  # the server ends A's turn's session
        # With a timeout, pg_terminate_backend waits until the session has exited and so let its
        # lock go; without one it returns once signalled, and B could still find the turn taken.
        killed = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_locks "
            "WHERE locktype = 'advisory' AND classid = 2048548356 AND granted"
        ).fetchone()
    assert killed == (1,)

    monkeypatch.setenv("TAHRIX_USER", "bob")
    ws_b.load_file(CASE, ours, chain="ethereum")  # the turn is free: B records step 3
    assert steps(ws_b)[-1] == (3, "load", "bob")
    late = paused.finish()
    assert isinstance(late, ManifestMoved)
    assert "another host recorded step 3 of its manifest" in late.message and "not recorded" in late.message
    assert steps(ws_a) == steps(ws_b) and len(steps(ws_a)) == 4
    # and nothing of A's load stayed on A's copy: it is at step 2, caught up as the message says
    assert ws_a.open_case(CASE, files=copy)["status"] == "caught up"
    monkeypatch.setenv("TAHRIX_USER", "ana")
    ws_a.load_file(CASE, theirs, chain="ethereum")
    assert steps(ws_a)[-1] == (4, "load", "ana")

    case_files(tmp_path / "host-c")  # a third host rebuilds the manifest as recorded: B's, then A's
    ws_c = Workspace(tmp_path / "host-c" / "tahrix-evidence.duckdb", record=TranscriptStore(pg_url))
    try:
        assert ws_c.open_case(CASE, files=copy)["status"] == "rebuilt"
        assert evidence(ws_c) == evidence(ws_a)
    finally:
        ws_c.close()


@pytest.fixture(params=["postgresql", "duckdb"])
def record_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A team's PostgreSQL record, or one workspace file that several processes on this machine
    share (a notebook, ``tahrix serve``, the CLI: each holds the file only for a burst)."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "tahrix.duckdb")


def test_a_host_killed_mid_load_gives_its_turn_back(record_url: str) -> None:
    """Another process holds the turn: this one is refused by name; ``kill -9`` of that process
    gives the turn back at once (PostgreSQL ends its session with its socket; on a shared file,
    the process's lock on ``<file>.turns`` goes with it). Nothing stuck."""
    other = TranscriptStore(record_url)
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_A_TURN, record_url, CASE], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with pytest.raises(CaseBusy):
                other.case_turn(CASE).__enter__()
        finally:
            holder.kill()
    for _ in range(100):  # the server sees the closed socket at once; allow it a moment
        try:
            with other.case_turn(CASE):
                break
        except CaseBusy:
            time.sleep(0.1)
    else:
        raise AssertionError("the killed host's turn was never given back")
    other.close()


HOLD_A_TURN = """
import sys, time
from tahrix_lab.agent import TranscriptStore
with TranscriptStore(sys.argv[1]).case_turn(sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""
