"""Identity from content: overlapping exports, any order, nothing lost, nothing counted twice."""

from __future__ import annotations

import random
from pathlib import Path

import hypothesis.strategies as st
import pytest
from export_fixtures import DAI, ERC20_HEADER, USDT, a, erc20_row, write_csv
from hypothesis import HealthCheck, given, settings

from tahrix_lab.agent.storage.duck import connect
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders import LoadError, load_file, load_files

Q = "SELECT transfer_id, from_address, to_address, amount_raw, amount, usd_value FROM transfers WHERE case_id = ? ORDER BY 1"


def state(db: CaseDB, case: str = "C") -> tuple[list[tuple], float, int]:
    rows = [tuple(r.values()) for r in db.rows(Q, [case])]
    total = db.scalar("SELECT coalesce(sum(usd_value), 0) FROM transfers WHERE case_id = ?", [case])
    return rows, round(float(total), 6), len(rows)


def wallet_exports(tmp_path: Path) -> tuple[Path, Path]:
    """Wallet A's and wallet B's ERC-20 exports. Tx 2 moves 12,000 USDT A→B twice (two identical
    transfers) and once A→C; both wallets' files hold the A→B pair."""
    tx1 = erc20_row(1, a(0xA), a(0xB), "24,000", "$24,000.00")
    pair = [erc20_row(2, a(0xA), a(0xB), "12,000", "$12,000.00")] * 2
    to_c = erc20_row(2, a(0xA), a(0xC), "5", "$5.00")
    dai = erc20_row(3, a(0xD), a(0xB), "1", "$1.00", DAI, "DAI")
    fa = write_csv(tmp_path / "wallet_a.csv", ERC20_HEADER, [tx1, *pair, to_c])
    fb = write_csv(tmp_path / "wallet_b.csv", ERC20_HEADER, [dai, *pair, tx1])  # other order, newest first
    return fa, fb


def test_overlapping_wallet_exports_in_any_order(tmp_path: Path) -> None:
    fa, fb = wallet_exports(tmp_path)
    results = []
    for order in ([fa, fb], [fb, fa], [fa, fa, fb, fb]):
        db = CaseDB(connect(":memory:"))
        reports = [load_file(db, "C", f) for f in order]
        results.append(state(db))
        if order == [fa, fb]:
            b = reports[1].files[0]
            assert (b.rows_read, b.inserted, b.merged, b.conflicting) == (4, 1, 3, 0)
    assert results[0] == results[1] == results[2]
    rows, total, n = results[0]
    assert n == 5 and total == 24_000 + 2 * 12_000 + 5 + 1
    assert sum(1 for r in rows if r[3] == "12000000000") == 2  # both identical transfers, once each


def test_a_real_conflict_is_reported_and_not_overwritten(db: CaseDB, tmp_path: Path) -> None:
    one = write_csv(tmp_path / "one.csv", ERC20_HEADER, [erc20_row(1, a(1), a(2), "10", "$10.00")])
    two = write_csv(tmp_path / "two.csv", ERC20_HEADER, [erc20_row(1, a(1), a(2), "10", "$10.50")])
    load_file(db, "C", one)
    report = load_file(db, "C", two)
    fr = report.files[0]
    assert (fr.inserted, fr.merged, fr.conflicting) == (0, 1, 1)
    (c,) = fr.conflicts
    assert (c.field, c.existing, c.incoming, c.line) == ("usd_value", "10.0", "10.5", 2)
    assert db.scalar("SELECT usd_value FROM transfers") == 10.0
    assert report.to_frame().loc[0, "conflict fields"] == "usd_value"
    assert "conflicting" in report._repr_html_() and "usd_value" in report.table()


def test_one_load_of_many_files_reports_each(db: CaseDB, tmp_path: Path) -> None:
    fa, fb = wallet_exports(tmp_path)
    report = load_files(db, "C", [fa, fb, fa])
    assert [(f.inserted, f.merged) for f in report.files] == [(4, 0), (1, 3), (0, 4)]
    assert report.inserted["transfers"] == 5 and report.skipped_duplicates["transfers"] == 7


# -- the property: one wallet history, split into random overlapping exports, loaded in random orders ---------

ADDRS = [a(i) for i in range(1, 5)]
movement = st.tuples(st.sampled_from(ADDRS), st.sampled_from(ADDRS), st.sampled_from(["1", "2.5", "1,000", "0.000001"]),
                     st.sampled_from([USDT, DAI]))  # fmt: skip
history = st.lists(st.lists(movement, min_size=1, max_size=4), min_size=1, max_size=12)  # txs of movements


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=history, seed=st.integers(0, 2**32 - 1))
def test_random_overlapping_exports_give_the_same_movements(tmp_path_factory, history, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    rows = [erc20_row(tx, f, t, v, f"${v}", tok, "USDT" if tok == USDT else "DAI")
            for tx, moves in enumerate(history, start=1) for f, t, v, tok in moves]  # fmt: skip
    # an export: one wallet's rows (every row touching it) within a block range, in either order
    exports: list[list[list[str]]] = []
    for wallet in ADDRS:
        mine = [r for r in rows if wallet in (r[4].lower(), r[5].lower())]
        if not mine:
            continue
        lo, hi = sorted(rng.sample(range(len(history) + 2), 2))
        parts = [
            [r for r in mine if int(r[1]) - 19_000_000 <= hi],
            [r for r in mine if int(r[1]) - 19_000_000 > lo],
        ]
        for part in parts:
            if part:
                exports.append(part[::-1] if rng.random() < 0.5 else part)
    folder = tmp_path_factory.mktemp("exports")
    files = [write_csv(folder / f"e{i}.csv", ERC20_HEADER, e) for i, e in enumerate(exports)]
    expected = len(rows)  # every row is in some export (each wallet's two parts cover its history)
    seen = []
    db = CaseDB(connect(":memory:"))
    for one_load in (False, True):  # file by file, or all in one load
        order = files[:] + rng.sample(files, k=min(2, len(files)))  # some files twice
        rng.shuffle(order)
        case = f"C{int(one_load)}"
        if one_load:
            load_files(db, case, order)
        else:
            for f in order:
                load_file(db, case, f)
        seen.append(state(db, case))
    assert seen[0] == seen[1]
    assert seen[0][2] == expected
    assert seen[0][1] == round(sum(float(r[7].strip("$").replace(",", "")) for r in rows), 6)


# -- several exports of one layout are staged with one read: refusals still name their own file and line ------


def test_a_refusal_in_a_group_of_exports_names_its_file_line_and_column(db: CaseDB, tmp_path: Path) -> None:
    fa, fb = wallet_exports(tmp_path)
    rows = [
        erc20_row(5, a(1), a(2), "1", "$1"),
        erc20_row(6, a(1), a(2), "2", "$2"),
        erc20_row(7, a(1), a(2), "3", "$3"),
    ]
    rows[2][4] = "0x12"  # From, on the file's 4th line (the header is line 1)
    bad = write_csv(tmp_path / "bad.csv", ERC20_HEADER, rows)
    worse = write_csv(tmp_path / "worse.csv", ERC20_HEADER, [erc20_row(8, a(1), a(2), "x", "$1")])
    with pytest.raises(LoadError) as err:
        load_files(db, "C", [fa, bad, fb, worse])
    assert (err.value.file, err.value.line, err.value.column) == (str(bad), 4, "From")
    assert "'0x12' is not an address" in err.value.message
    assert db.scalar("SELECT count(*) FROM transfers") == 0
    short = tmp_path / "short.csv"
    header = ",".join(f'"{c}"' for c in ERC20_HEADER)
    good = ",".join(f'"{c}"' for c in erc20_row(9, a(1), a(2), "1", "$1"))
    short.write_text(f"{header}\n{good}\n{good}\n{good}\n{good.rsplit(',', 2)[0]}\n")
    with pytest.raises(LoadError, match="fewer fields") as err2:
        load_files(db, "C", [fa, fb, short])
    assert (err2.value.file, err2.value.line) == (str(short), 5)


def test_exports_staged_together_report_their_own_rows(db: CaseDB, tmp_path: Path) -> None:
    fa, fb = wallet_exports(tmp_path)
    one = write_csv(tmp_path / "one.csv", ERC20_HEADER, [erc20_row(5, a(1), a(2), "1", "N/A")])
    report = load_files(db, "C", [one, fa, fb])
    assert [Path(f.file).name for f in report.files] == ["one.csv", "wallet_a.csv", "wallet_b.csv"]
    assert [(f.rows_read, f.inserted, f.merged, f.unpriced) for f in report.files] == [
        (1, 1, 0, 1), (4, 4, 0, 0), (4, 1, 3, 0)
    ]  # fmt: skip
    stored = db.rows("SELECT file, report FROM load_reports ORDER BY file")
    assert [Path(r["file"]).name for r in stored] == ["one.csv", "wallet_a.csv", "wallet_b.csv"]


def test_a_quoted_line_break_is_refused_with_its_file_and_line(db: CaseDB, tmp_path: Path) -> None:
    """DuckDB's parallel reader refuses a line break inside quotes; the refusal names the file
    among those staged together and the record's first line (not "transaction aborted")."""
    fa, fb = wallet_exports(tmp_path)
    header = ",".join(f'"{c}"' for c in ERC20_HEADER)
    rows = [erc20_row(i, a(1), a(2), "1", "$1") for i in (1, 2, 3)]
    rows[2][-2] = "Tether\nUSD"  # the token name, quoted, over two lines
    path = tmp_path / "broken.csv"
    path.write_text("\n".join([header, *(",".join(f'"{c}"' for c in r) for r in rows)]) + "\n")
    with pytest.raises(LoadError, match="line break") as err:
        load_files(db, "C", [fa, path, fb])
    assert (err.value.file, err.value.line) == (str(path), 4)
    assert db.scalar("SELECT count(*) FROM transfers") == 0


@pytest.mark.parametrize("crlf", [False, True])
def test_a_refusal_after_blank_lines_names_the_line_an_editor_shows(
    db: CaseDB, tmp_path: Path, crlf: bool
) -> None:
    """DuckDB's reader skips blank lines, so its record numbers drift from the file's lines."""
    header = ",".join(f'"{c}"' for c in ERC20_HEADER)
    good = [",".join(f'"{c}"' for c in erc20_row(i, a(1), a(2), "1", "$1")) for i in (1, 2)]
    bad = erc20_row(4, a(1), a(2), "1", "$1")
    bad[4] = "0x12"
    end = "\r\n" if crlf else "\n"
    path = tmp_path / "blanks.csv"
    path.write_bytes(
        end.join([header, good[0], "", good[1], "", "", ",".join(f'"{c}"' for c in bad)]).encode()
    )
    with pytest.raises(LoadError) as err:
        load_file(db, "C", path)
    # header 1, row 2, blank 3, row 4, blanks 5 and 6, the bad row 7
    assert (err.value.line, err.value.column) == (7, "From")
