"""The `tahrix` commands of the lab layer, run in-process through the real parser."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from lab_helpers import QUESTIONS

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.transcript import Session
from tahrix_lab.app.commands.notebook import KERNEL_NAME, lab_command
from tahrix_lab.cli import main
from tahrix_lab.lab.diff import diff


@pytest.fixture
def db(store: TranscriptStore, original: Session, monkeypatch: pytest.MonkeyPatch) -> str:
    path = store.path
    store.close()  # the CLI opens the file itself
    monkeypatch.delenv("TAHRIX_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "220")  # rich folds tables to the terminal's width
    return path


def tahrix(capsys: pytest.CaptureFixture[str], db: str, *args: str) -> tuple[int, str, str]:
    code = main(["--db", db, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_sessions_lists_the_session_with_its_cost(
    capsys: pytest.CaptureFixture[str], db: str, original: Session
) -> None:
    code, out, _ = tahrix(capsys, db, "sessions")
    assert code == 0
    assert original.id[:8] in out and "case 7" in out and "investigation" in out
    assert "$0.0" in out  # gpt-4o is priced


def test_sessions_figures_equal_the_cost_views(
    capsys: pytest.CaptureFixture[str], db: str, original: Session
) -> None:
    """`sessions` prices its calls without the cost views' DataFrame: the figures must agree."""
    _, out, _ = tahrix(capsys, db, "sessions", "--json")
    listed = {row["id"]: row for row in map(json.loads, out.splitlines())}
    _, out, _ = tahrix(capsys, db, "costs", "--by", "session", "--json")
    grouped = {row["session"]: row for row in map(json.loads, out.splitlines())}
    assert listed.keys() == grouped.keys() == {original.id}
    assert listed[original.id]["calls"] == grouped[original.id]["calls"] == 5
    assert listed[original.id]["cost_usd"] == pytest.approx(grouped[original.id]["cost_usd"], rel=1e-9)
    assert listed[original.id]["cost_usd"] > 0


def test_show_renders_the_flow_in_order(
    capsys: pytest.CaptureFixture[str], db: str, original: Session
) -> None:
    code, out, _ = tahrix(capsys, db, "show", original.id[:8])  # a unique prefix is enough
    assert code == 0
    order = [
        QUESTIONS[0],
        "Look the address up first.",
        "lookup_address",
        "0xabc is an exchange hot wallet.",
        QUESTIONS[1],
        "trace_funds",
        "The funds moved to 0xdef, also an exchange.",
    ]
    positions = [out.index(s) for s in order]
    assert positions == sorted(positions)
    assert "gpt-4o" in out and "total $" in out


def test_show_unknown_id_is_a_calm_error(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, _, err = tahrix(capsys, db, "show", "zzz")
    assert code == 1 and "No session id starts with 'zzz'" in err


def test_replay_estimate_and_a_replay_that_stops(
    capsys: pytest.CaptureFixture[str], db: str, original: Session
) -> None:
    code, out, _ = tahrix(capsys, db, "replay", original.id, "--backend", "bedrock", "--model",
                          "us.anthropic.claude-3-5-sonnet-20240620-v1:0", "--estimate")  # fmt: skip
    assert code == 0 and "5 calls" in out and "$" in out
    # the fake backend from configuration has no script: the replay stops calmly at turn 1
    code, out, _ = tahrix(
        capsys, db, "replay", original.id, "--backend", "fake", "--model", "m", "--recorded-tools"
    )
    assert code == 1
    assert "stopped at user turn 1 of 2" in " ".join(out.split())
    store = TranscriptStore(db)
    replays = [s for s in store.list_sessions() if s.replay_of == original.id]
    assert len(replays) == 1
    store.close()


def test_replay_of_several_sessions_reports_each(
    capsys: pytest.CaptureFixture[str], db: str, original: Session
) -> None:
    code, out, _ = tahrix(
        capsys, db, "replay", original.id, original.id[:8], "--backend", "fake", "--model", "m"
    )
    assert code == 1  # both stop: the configured fake backend has no script
    assert " ".join(out.split()).count("stopped at user turn 1 of 2") == 2


def test_diff_prints_a_table(capsys: pytest.CaptureFixture[str], db: str, original: Session) -> None:
    code, out, _ = tahrix(capsys, db, "diff", original.id, original.id, "--tools")
    assert code == 0 and "total" in out and "identical" in out


def test_costs_table_csv_and_bad_grouping(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, out, _ = tahrix(capsys, db, "costs", "--by", "model,day")
    assert code == 0 and "gpt-4o" in out and "total $" in out
    code, out, _ = tahrix(capsys, db, "costs", "--by", "user", "--csv")
    rows = out.strip().splitlines()
    assert code == 0 and rows[0].startswith("user,calls") and rows[1].startswith("ana,5,")
    code, _, err = tahrix(capsys, db, "costs", "--by", "colour")
    assert code == 1 and "Cannot group costs by 'colour'" in err


def test_export_import_round_trip(
    capsys: pytest.CaptureFixture[str], db: str, original: Session, tmp_path: Path
) -> None:
    dump = tmp_path / "sessions.jsonl"
    code, _, err = tahrix(capsys, db, "export", "-o", str(dump))
    assert code == 0 and "Exported 1 sessions" in err
    other = str(tmp_path / "other.duckdb")
    code, out, _ = tahrix(capsys, other, "import", str(dump))
    assert code == 0 and "Imported 1 sessions" in out
    code, out, _ = tahrix(capsys, other, "import", str(dump), "--skip-existing")
    assert "skipped 1" in out
    a, b = TranscriptStore(db), TranscriptStore(other)
    assert diff(original.id, original.id, store=a).identical
    assert b.load_messages(original.id) == a.load_messages(original.id)
    a.close()
    b.close()


def test_import_stdin_and_missing_file(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = tahrix(capsys, db, "export")
    line = out.strip()
    assert json.loads(line)["format"] == "tahrix-session/1"
    monkeypatch.setattr(sys, "stdin", io.StringIO(line + "\n"))
    code, out, _ = tahrix(capsys, str(tmp_path / "third.duckdb"), "import", "-")
    assert code == 0 and "Imported 1" in out
    code, _, err = tahrix(capsys, db, "import", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "Cannot read" in err


def test_lab_command_uses_the_project_kernel(tmp_path: Path) -> None:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    argv, env = lab_command(notebooks, port=8899, no_browser=True)
    assert argv[:4] == [sys.executable, "-m", "jupyter", "lab"]
    assert f"--notebook-dir={notebooks.resolve()}" in argv
    assert f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}" in argv
    assert "--ServerApp.port=8899" in argv and "--no-browser" in argv
    data_dir = tmp_path / ".jupyter"
    assert env["JUPYTER_PATH"].split(os.pathsep)[0] == str(data_dir)
    spec = json.loads((data_dir / "kernels" / KERNEL_NAME / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["argv"][1:3] == ["-m", "ipykernel_launcher"]


def test_lab_without_notebooks_folder_is_a_calm_error(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    code, _, err = tahrix(capsys, db, "lab", "--notebook-dir", str(tmp_path / "nope"), "--print-command")
    assert code == 1 and "There is no notebooks folder" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.e2e
def test_lab_server_starts_with_the_project_kernel_as_default(tmp_path: Path) -> None:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    port = _free_port()
    argv, env = lab_command(notebooks, port=port, no_browser=True,
                            extra=["--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=t0ken"])  # fmt: skip
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "config")
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        specs = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                r = httpx.get(
                    f"http://127.0.0.1:{port}/api/kernelspecs",
                    headers={"Authorization": "token t0ken"},
                    timeout=2,
                )
                if r.status_code == 200:
                    specs = r.json()
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        assert specs is not None, (tmp_path / "lab.log").read_text()[-2000:]
        assert specs["default"] == KERNEL_NAME
        assert specs["kernelspecs"][KERNEL_NAME]["spec"]["argv"][0] == sys.executable
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
