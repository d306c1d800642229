"""Two hosts, one record (issue 26 item 2): host A loads a case (a case folder, an Etherscan
export, detector runs); host B, in its own working directory with its own evidence file and
its own copy of the files, opens the case from the manifest in the record and gets the same
movements (ids, amounts) and flags. A tampered file is refused by name and nothing is
loaded; ``verify`` notices a changed local copy; a later step on A is caught up on B; an
annotation made on A is seen by B's next tool call and changes no fingerprint. On PostgreSQL
(a team) and on a DuckDB record file (the same interface); the CLI on PostgreSQL, as a team
runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.loaders import LoadError
from tahrix_lab.case.workspace import SAMPLE_CASE_ID as CASE
from tahrix_lab.case.workspace import Workspace, sample_case_dir
from tests.agent.storage.conftest import pg_server, pg_url  # noqa: F401
from tests.case.loaders.export_fixtures import ERC20_HEADER, a, erc20_row, write_csv
from tests.case.test_team_annotations import call

ROOT = Path(__file__).resolve().parents[2]
OVERRIDE = {"repeated_amount": {"min_count": 3}}


def case_files(where: Path) -> Path:
    """The case's files as an analyst has them: a case folder and one Etherscan export."""
    shutil.copytree(sample_case_dir(), where / "case")
    rows = [erc20_row(i, a(1000 + i), a(2000 + i), "1,250.5", "$1,250.50") for i in range(1, 6)]
    write_csv(where / "usdt.csv", ERC20_HEADER, rows, bom=True)
    return where


def load_on_a(ws: Workspace) -> None:
    """What host A does, from its working directory (paths as given are relative)."""
    ws.load_case_folder("files/case")
    ws.load_file(CASE, "files/usdt.csv", chain="ethereum")
    ws.run_detectors(CASE)


def evidence(ws: Workspace) -> dict[str, list[Any]]:
    return {
        "transfers": ws.cases.cursor().execute(
            "SELECT transfer_id, amount, amount_raw, usd_value, asset_key, from_address, to_address "
            "FROM transfers WHERE case_id = ? ORDER BY transfer_id", [CASE]
        ).fetchall(),
        "flags": ws.cases.cursor().execute(
            "SELECT flag_id, flag_type, severity, score, params FROM anomaly_flags WHERE case_id = ? "
            "ORDER BY flag_id", [CASE]
        ).fetchall(),
    }  # fmt: skip


@pytest.fixture(params=["postgresql", "duckdb"])
def hosts(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Workspace, Workspace, Path]]:
    """Host A with the case loaded; host B, empty, with its copy of the files in ``copy/``."""
    dir_a, dir_b = tmp_path / "host-a", tmp_path / "host-b"
    case_files(dir_a / "files")
    case_files(dir_b / "copy")
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        ws_a = Workspace(dir_a / "tahrix-evidence.duckdb", record=TranscriptStore(url))
        ws_b = Workspace(dir_b / "tahrix-evidence.duckdb", record=TranscriptStore(url))
    else:  # the record in A's DuckDB file; B's evidence in its own
        ws_a = Workspace(dir_a / "tahrix.duckdb")
        ws_b = Workspace(dir_b / "tahrix.duckdb", record=TranscriptStore(dir_a / "tahrix.duckdb"))
    monkeypatch.chdir(dir_a)
    load_on_a(ws_a)
    monkeypatch.chdir(dir_b)
    yield ws_a, ws_b, dir_b / "copy"
    ws_a.close()
    ws_b.close()


def test_b_rebuilds_the_same_evidence_from_the_manifest(hosts: tuple[Workspace, Workspace, Path]) -> None:
    ws_a, ws_b, copy = hosts
    steps = ws_b.store.case_manifest(CASE)
    assert [s["kind"] for s in steps] == ["load", "load", "detect"]
    folder, export = steps[0]["entry"], steps[1]["entry"]
    assert folder["folder"] == "files/case" and folder["files"][0]["path"] == "files/case/case.json"
    transfers = next(f for f in folder["files"] if f["path"].endswith("transfers.csv"))
    assert transfers["size"] == (copy / "case" / "transfers.csv").stat().st_size
    assert transfers["format"] == "case folder: transfers" and transfers["inserted"] > 0
    assert export["files"][0]["path"] == "files/usdt.csv" and export["chain"] == "ethereum"
    assert (export["files"][0]["format"], export["files"][0]["rows_read"]) == (
        "etherscan erc20 (ethereum)",
        5,
    )
    assert steps[2]["entry"]["params"]["dusting"]["min_recipients"] == 10  # defaults recorded too
    assert steps[2]["fingerprint"]["anomaly_flags"]["rows"] > 0

    with pytest.raises(LoadError, match=r"files/case/case\.json: .*give --files DIR"):
        ws_b.open_case(CASE)  # B's copy is not where A's files were
    assert not ws_b.cases.case_exists(CASE)

    assert ws_b.open_case(CASE, files=copy) == {
        "case_id": CASE, "status": "rebuilt", "steps": 3, "replayed": 3, "differences": [],
    }  # fmt: skip
    assert evidence(ws_b) == evidence(ws_a)
    assert ws_b.open_case(CASE, verify=True)["status"] == "identical"
    assert ws_b.open_case(CASE, files=copy)["status"] == "identical"  # nothing to do
    assert len(ws_b.store.case_manifest(CASE)) == 3  # a rebuild adds no steps


def test_a_tampered_file_is_refused_by_name_and_nothing_is_loaded(
    hosts: tuple[Workspace, Workspace, Path],
) -> None:
    _, ws_b, copy = hosts
    usdt = copy / "usdt.csv"
    usdt.write_bytes(usdt.read_bytes().replace(b"1,250.5", b"1,250.6", 1))
    with pytest.raises(LoadError, match=r"copy/usdt\.csv: its SHA-256 .* differs from the manifest's"):
        ws_b.open_case(CASE, files=copy)
    assert not ws_b.cases.case_exists(CASE)  # checked before the folder (step 0) was loaded


# A DuckDB record in A's own file is one analyst's: A's writes stay in that file (record_sync)
@pytest.mark.parametrize("hosts", ["postgresql"], indirect=True)
def test_an_annotation_on_a_is_seen_by_b_and_is_no_change_of_the_evidence(
    hosts: tuple[Workspace, Workspace, Path],
) -> None:
    ws_a, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)
    flag = next(f for f in ws_a.flags(CASE) if f["address"] and f["status"] == "new")
    ws_a.annotate(CASE, "flag", flag["flag_id"], "confirm_flag", {"note": "desk 7"}, analyst="ana")
    session = ws_b.start_investigation(CASE, user="bob", grant={"may_write": False})
    flags = call(ws_b, session, "list_flags", {"view": "raw", "address": flag["address"]})["flags"]
    assert [f["status"] for f in flags if f["flag_id"] == flag["flag_id"]] == ["confirmed"]
    assert ws_b.open_case(CASE, verify=True)["status"] == "identical"


def test_verify_notices_a_changed_copy(hosts: tuple[Workspace, Workspace, Path]) -> None:
    _, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)
    ws_b.cases.cursor().execute(
        "UPDATE transfers SET amount = amount * 2 WHERE transfer_id = "
        "(SELECT min(transfer_id) FROM transfers WHERE case_id = ?)",
        [CASE],
    )
    result = ws_b.open_case(CASE, verify=True)
    assert result["status"] == "differs"
    assert result["differences"] == ["transfers: 5,939 rows expected, same count, other content"]
    with pytest.raises(UserFacingError, match="differs from every step of its manifest"):
        ws_b.open_case(CASE, files=copy)


def test_a_later_step_on_a_is_caught_up_on_b(hosts: tuple[Workspace, Workspace, Path]) -> None:
    ws_a, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)
    ws_a.run_detectors(CASE, ["repeated_amount"], OVERRIDE)  # other thresholds: other flags
    assert ws_b.open_case(CASE, verify=True)["status"] == "differs"
    result = ws_b.open_case(CASE, files=copy)
    assert (result["status"], result["replayed"]) == ("caught up", 1)
    assert evidence(ws_b) == evidence(ws_a)


def tahrix(cwd: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAHRIX_DB": url, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("TAHRIX_EVIDENCE_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", *args],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def test_the_cli_on_two_hosts(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    dir_a, dir_b = tmp_path / "host-a", tmp_path / "host-b"
    case_files(dir_a / "files")
    case_files(dir_b / "copy")
    loaded = tahrix(dir_a, pg_url, "case", "load", "files/case")
    assert loaded.returncode == 0, loaded.stderr
    assert tahrix(dir_a, pg_url, "case", "detect").returncode == 0

    opened = tahrix(dir_b, pg_url, "case", "open", "--files", "copy")
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.splitlines() == [f"{CASE}: rebuilt (2 steps in its manifest, 2 replayed here)"]
    verified = tahrix(dir_b, pg_url, "case", "open", CASE, "--verify")
    assert (verified.returncode, verified.stdout.split(":")[1].split()[0]) == (0, "identical")

    with Workspace(dir_b / "tahrix-evidence.duckdb") as ws:
        ws.cases.cursor().execute(
            "DELETE FROM anomaly_flags WHERE flag_id = (SELECT min(flag_id) FROM anomaly_flags)"
        )
    changed = tahrix(dir_b, pg_url, "case", "open", "--verify")
    assert changed.returncode == 1
    assert changed.stdout.splitlines()[0].startswith(f"{CASE}: differs")
    assert "anomaly_flags:" in changed.stdout

    (dir_b / "copy" / "case" / "labels.csv").write_text("tampered\n")
    (tmp_path / "host-c").mkdir()
    refused = tahrix(tmp_path / "host-c", pg_url, "case", "open", "--files", str(dir_b / "copy"))
    assert refused.returncode == 1 and "labels.csv: its SHA-256" in refused.stderr
