"""`tahrix case flags|trace|detect` run as the real CLI (a subprocess) on a workspace with the sample case."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.case.workspace import Workspace

WIDE = {"COLUMNS": "300", "NO_COLOR": "1"}


def tahrix(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **WIDE, "TAHRIX_LOG": str(db.parent / "tahrix.log")}
    env.pop("TAHRIX_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", "--db", str(db), *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("case-cli") / "ws.duckdb"
    with Workspace(path) as ws:
        ws.load_sample_case()
    return path


@pytest.fixture(scope="module")
def expected(sample_db: Path) -> dict[str, Any]:
    """What the domain says, read once: the CLI must show exactly this."""
    with Workspace(sample_db) as ws:
        return {"triage": as_json(ws.triage("CASE-001")), "flags": as_json(ws.flags("CASE-001", limit=5000)),
                "trace": as_json(ws.trace("CASE-001"))}  # fmt: skip


@pytest.fixture
def own_db(sample_db: Path, tmp_path: Path) -> Path:
    """A copy for the tests that write (detect, a second case)."""
    path = tmp_path / "ws.duckdb"
    shutil.copy(sample_db, path)
    return path


def table_rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in out.splitlines()
            if line.startswith("│")]  # fmt: skip


def test_flags_table_rows_are_triage_rows(sample_db: Path, expected: dict[str, Any]) -> None:
    run = tahrix(sample_db, "case", "flags")  # the only loaded case
    assert run.returncode == 0, run.stderr
    rows = table_rows(run.stdout)
    triage = expected["triage"]["rows"]
    assert len(rows) == len(triage) == expected["triage"]["count"] > 0
    for cells, row in zip(rows, triage, strict=True):
        severity, types, subject, _label, chains, amount, count = cells
        assert severity == row["severity"]
        assert types == ", ".join(t.replace("_", " ") for t in row["flag_types"])
        assert int(count) == row["flag_count"]
        assert chains == ", ".join(sorted({a.split(":", 1)[0] for a in row["addresses"]}))
        s = row["subject"]
        if s["kind"] == "address":
            assert subject == f"{s['address'][:6]}…{s['address'][-4:]}"
        elif s["kind"] == "cohort":
            assert subject == f"{s['members']} addresses"
        assert amount == "–" or amount.startswith("$")
    suspect = next(c for c in rows if "suspect" in c[3])
    assert suspect[5] == "$6,474,178"  # the pass-through's USD, not its mixer exposure's added on top


def test_flags_json_round_trips(sample_db: Path, expected: dict[str, Any]) -> None:
    run = tahrix(sample_db, "case", "flags", "CASE-001", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected["triage"]


def test_raw_flags_table_and_json(sample_db: Path, expected: dict[str, Any]) -> None:
    run = tahrix(sample_db, "case", "flags", "--raw", "--json", "--limit", "5000")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected["flags"]
    run = tahrix(sample_db, "case", "flags", "--raw", "--limit", "5000")
    rows = table_rows(run.stdout)
    assert [r[0] for r in rows] == [f["flag_id"] for f in expected["flags"]]
    assert len(rows) == expected["triage"]["flags_total"]
    run = tahrix(sample_db, "case", "flags", "--raw", "--min-severity", "critical", "--json")
    assert {f["severity"] for f in json.loads(run.stdout)} == {"critical"}


def test_trace_endpoints_in_native_units_and_usd(sample_db: Path, expected: dict[str, Any]) -> None:
    run = tahrix(sample_db, "case", "trace", "--json")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    want = expected["trace"]
    assert got["summary"] == want["summary"] and got["edges"] == want["edges"]
    assert {c: [{k: v for k, v in e.items() if k != "received"} for e in eps] for c, eps in got["endpoints"].items()} \
        == want["endpoints"]  # fmt: skip
    for eps in got["endpoints"].values():
        for e in eps:
            into = [x for x in want["edges"] if x["target"] == f"{e['chain']}:{e['address']}"]
            assert sum(a["transfers"] for a in e["received"]) == sum(x["transfers"] for x in into)
            assert sum(a["usd"] for a in e["received"]) == pytest.approx(sum(x["usd"] for x in into))
            assert e["tainted_usd"] <= sum(a["usd"] for a in e["received"]) + 0.01
    mixer = got["endpoints"]["mixing_service"][0]
    assert [(a["symbol"], Decimal(a["amount"])) for a in mixer["received"]] == [("ETH", Decimal(40200))]
    run = tahrix(sample_db, "case", "trace")
    assert run.returncode == 0, run.stderr
    line = next(r for r in table_rows(run.stdout) if "Tornado" in r[2])
    assert line[0] == "mixing service" and line[4] == "40,200 ETH" and line[5] == "$134,068,326"


def test_trace_from_an_address(sample_db: Path, expected: dict[str, Any]) -> None:
    suspect = next(r for r in expected["triage"]["rows"] if r["role"] == "suspect")["subject"]["address"]
    run = tahrix(sample_db, "case", "trace", "--from", suspect, "--json")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["summary"]["start"]["given"] == [suspect]
    assert got["summary"]["traced_usd"] < expected["trace"]["summary"]["traced_usd"]


def test_detect_ends_with_the_triage_and_the_next_command(own_db: Path, expected: dict[str, Any]) -> None:
    run = tahrix(own_db, "case", "detect", "--only", "dusting")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].startswith("dusting: 1 flags")
    assert len(table_rows(run.stdout)) == expected["triage"]["count"]
    assert run.stdout.rstrip().splitlines()[-1].startswith("Next: tahrix case trace CASE-001")


NORMAL = (
    '"Txhash","Blockno","UnixTimestamp","DateTime (UTC)","From","To","ContractAddress","Value_IN(ETH)",'
    '"Value_OUT(ETH)","CurrentValue @ $3500/Eth","TxnFee(ETH)","TxnFee(USD)","Historical $Price/Eth","Status",'
    '"ErrCode","Method"\n'
    f'"0x{"1" * 64}","19420000","1710209640","2024-03-12 02:14:00","0x{"a" * 40}","0x{"b" * 40}","","1.5","0",'
    '"1","0.0021","7.35","3,900.12","","","Transfer"\n'
)


def test_several_cases_are_named_and_one_must_be_chosen(own_db: Path) -> None:
    export = own_db.parent / "normal.csv"
    export.write_text(NORMAL)
    assert tahrix(own_db, "case", "load", str(export), "--case-id", "CASE-002").returncode == 0
    for command in (["flags"], ["detect"], ["export", str(own_db.parent / "out")]):  # one rule serves all
        run = tahrix(own_db, "case", *command)
        assert run.returncode == 1, command
        assert (
            run.stderr.strip()
            == "tahrix: Several cases are loaded (CASE-001, CASE-002); name one, e.g. CASE-001."
        )
        assert run.stdout == ""
    run = tahrix(own_db, "case", "flags", "CASE-002", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["rows"] == []


def test_no_case_and_an_unknown_case_are_calm_errors(tmp_path: Path, sample_db: Path) -> None:
    run = tahrix(tmp_path / "empty.duckdb", "case", "flags")
    assert run.returncode == 1 and run.stderr.startswith("tahrix: No case is loaded: load one with")
    run = tahrix(sample_db, "case", "trace", "CASE-NOPE")
    assert run.returncode == 1 and "No case named 'CASE-NOPE' (cases: CASE-001)" in run.stderr


def test_the_severity_choices_are_the_domains() -> None:
    from tahrix_lab.app.commands.case import SEVERITIES
    from tahrix_lab.case.schema import SEVERITIES as DOMAIN

    assert SEVERITIES == DOMAIN
