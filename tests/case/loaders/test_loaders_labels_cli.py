"""Label categories normalised at load; the CLI prints the load report as a table."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from export_fixtures import ERC20_HEADER, a, erc20_row, write_csv

from tahrix_lab.agent.storage.duck import connect
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders import load_case_folder
from tahrix_lab.case.loaders.labels import _KEY_SQL
from tahrix_lab.case.taxonomy import ALIASES, _key
from tahrix_lab.cli import main


def test_sql_key_matches_the_taxonomy_key() -> None:
    con = connect(":memory:")
    spellings = [*ALIASES, "OTC Broker", "  Instant-Exchange ", "cross.chain/bridge", "Mixer"]
    for raw in spellings:
        got = con.execute(f"SELECT {_KEY_SQL} FROM (SELECT ? AS category)", [raw]).fetchall()[0][0]
        assert got == _key(raw), raw


def test_folder_labels_are_normalised_and_unknown_ones_counted(sample_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "case"
    shutil.copytree(sample_dir, folder)
    path = folder / "labels.csv"
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    col = rows[0].index("category")
    rows[1][col], rows[2][col] = "OTC Broker", "Weird Thing"
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    db = CaseDB(connect(":memory:"))
    report = load_case_folder(db, folder)
    label_ids = [rows[1][rows[0].index("label_id")], rows[2][rows[0].index("label_id")]]
    got = dict(
        db.cursor()
        .execute("SELECT label_id, category FROM labels WHERE label_id IN (?, ?)", label_ids)
        .fetchall()
    )
    assert got == {label_ids[0]: "otc_desk", label_ids[1]: "Weird Thing"}
    assert report.unknown_categories == {"Weird Thing": 1}
    assert "Weird Thing" in report.table()


def test_cli_loads_exports_and_prints_the_report_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write_csv(tmp_path / "t.csv", ERC20_HEADER, [erc20_row(1, a(1), a(2), "1", "N/A")])
    db = str(tmp_path / "cli.duckdb")
    assert main(["--db", db, "case", "load", str(f), "--case-id", "C-9", "--chain", "eth"]) == 0
    out = capsys.readouterr().out
    assert "rows read" in out and "unpriced" in out and "t.csv" in out
    assert main(["--db", db, "case", "load", str(f), "--case-id", "C-9", "--force", "--json"]) == 0
    assert '"merged": 1' in capsys.readouterr().out
    assert main(["--db", db, "case", "load", str(f), "--case-id", "C-9", "--chain", "arbitrumm"]) != 0
    assert "Unknown chain" in capsys.readouterr().err
