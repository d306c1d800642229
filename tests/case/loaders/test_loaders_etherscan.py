"""Etherscan-family exports as they really come: every export type, header variant and quirk."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from export_fixtures import (
    DAI,
    ERC20_HEADER,
    ERC721_HEADER,
    ERC1155_HEADER,
    NINE,
    TOKEN_PAGE_HEADER,
    USDT,
    WBTC,
    a,
    erc20_row,
    h,
    internal_header,
    mixed,
    normal_header,
    normal_row,
    when,
    write_csv,
)  # fmt: skip

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders import LoadError, load_etherscan_csv, load_file, recognise


def transfers(db: CaseDB, case: str = "C") -> list[dict]:
    return db.rows("SELECT * FROM transfers WHERE case_id = ? ORDER BY tx_hash, transfer_id", [case])


def test_token_page_export_loads_its_transfers(db: CaseDB, tmp_path: Path) -> None:
    """The token page's CSV (no contract column) loaded zero transfers before; the token comes from the file name."""
    rows = []
    for i, q in enumerate(["1,000.5", "2", "0.000001"]):
        unix, dt = when(i)
        rows.append([h(i + 1), "19000000", unix, dt, mixed(a(1)), mixed(a(2 + i)), q, "Transfer"])
    path = write_csv(tmp_path / f"export-token-{USDT}.csv", TOKEN_PAGE_HEADER, rows)
    assert recognise(path) == ("etherscan", "token-page")
    report = load_file(db, "C", path)
    assert report.files[0].inserted == 3 and report.files[0].unknown_decimals == 0
    got = {t["to_address"]: (t["amount_raw"], t["amount"]) for t in transfers(db)}
    assert got[a(2)] == ("1000500000", Decimal("1000.5"))  # USDT: 6 decimals, exact base units
    assert got[a(4)] == ("1", Decimal("0.000001"))
    assert all(t["asset_key"] == f"ethereum:{USDT}" for t in transfers(db))


def test_token_page_without_a_token_is_refused_with_the_column(db: CaseDB, tmp_path: Path) -> None:
    unix, dt = when(0)
    path = write_csv(tmp_path / "tokentxns.csv", TOKEN_PAGE_HEADER,
                     [[h(1), "1", unix, dt, a(1), a(2), "5", "Transfer"]])  # fmt: skip
    with pytest.raises(LoadError) as err:
        load_file(db, "C", path)
    assert (err.value.line, err.value.column) == (1, "ContractAddress") and "token=" in err.value.message
    load_file(db, "C", path, token=DAI)
    assert transfers(db)[0]["amount_raw"] == "5" + "0" * 18


@pytest.mark.parametrize("price", ["Eth", "ETH"])
def test_internal_export_with_trailing_field_bom_crlf_is_priced(
    db: CaseDB, tmp_path: Path, price: str
) -> None:
    unix, dt = when(0)
    rows = [
        [h(1), "1", unix, dt, a(9), a(8), "0", mixed(a(8)), mixed(a(1)), "", "2,000.25", "0", "0", "3,900", "", "", "call"],
        [h(1), "1", unix, dt, a(9), a(8), "0", mixed(a(8)), mixed(a(2)), "", "0", "1", "0", "3,900", "", "", "call"],
        [h(2), "2", unix, dt, a(9), a(8), "0", mixed(a(8)), mixed(a(3)), "", "5", "0", "0", "N/A", "", "", "call"],
        [h(3), "3", unix, dt, a(9), a(8), "0", mixed(a(8)), mixed(a(4)), "", "0", "0", "0", "3,900", "", "", "call"],
    ]  # fmt: skip
    chain = "arbitrum" if price == "ETH" else "ethereum"
    path = write_csv(
        tmp_path / "internal.csv", internal_header(price=price), rows, bom=True, crlf=True, trailing=True
    )
    report = load_file(db, "C", path, chain=chain)
    fr = report.files[0]
    assert fr.format == f"etherscan internal ({chain})"
    assert (fr.rows_read, fr.inserted, fr.unpriced) == (4, 3, 1)
    assert fr.skipped == {"internal call moving no value": 1}
    got = {t["to_address"]: t for t in transfers(db)}
    assert got[a(1)]["usd_value"] == pytest.approx(2000.25 * 3900) and got[a(1)]["kind"] == "internal"
    assert got[a(1)]["amount_raw"] == "2000250000000000000000" and got[a(1)]["chain"] == chain
    assert got[a(3)]["usd_value"] is None  # N/A price: unknown, not $0
    tx = db.one("SELECT from_address, status FROM transactions WHERE tx_hash = ?", [h(1)])
    assert tx == {
        "from_address": a(9),
        "status": None,
    }  # the internal export does not say if the tx succeeded


def test_erc20_with_na_usd_and_decimals_6_8_9_18(db: CaseDB, tmp_path: Path) -> None:
    rows = [
        erc20_row(1, a(1), a(2), "1,234,567.891011", "$1,234,567.89", USDT, "USDT"),
        erc20_row(2, a(1), a(2), "0.12345678", "N/A", WBTC, "WBTC"),
        erc20_row(3, a(1), a(2), "1.123456789", "", NINE, "NINE"),
        erc20_row(4, a(1), a(2), "1,000.000000000000000001", "$1,000", DAI, "DAI"),
    ]
    report = load_etherscan_csv(db, "C", write_csv(tmp_path / "erc20.csv", ERC20_HEADER, rows))
    fr = report.files[0]
    assert (fr.inserted, fr.unpriced, fr.unknown_decimals) == (4, 2, 1)
    got = {t["asset_key"].split(":")[1]: t for t in transfers(db)}
    assert got[USDT]["amount_raw"] == "1234567891011" and got[USDT]["usd_value"] == pytest.approx(1234567.89)
    assert got[WBTC]["amount_raw"] == "12345678" and got[WBTC]["usd_value"] is None
    assert got[DAI]["amount_raw"] == "1000000000000000000001"
    # unknown decimals: the decimal amount the file gives, base units unknown (never assumed 18)
    assert got[NINE]["amount"] == Decimal("1.123456789") and got[NINE]["amount_raw"] is None
    # later the decimals become known (an ethereum-etl tokens.csv): the base units follow, exactly
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"address,symbol,name,decimals,total_supply,block_number\n{NINE},NINE,Nine,9,1000,1\n")
    later = load_file(db, "C", tokens)
    assert any("now exact" in n for n in later.files[0].notes)
    assert (
        db.scalar("SELECT amount_raw FROM transfers WHERE asset_key = ?", [f"ethereum:{NINE}"])
        == "1123456789"
    )


def test_more_fraction_digits_than_the_token_has_is_refused(db: CaseDB, tmp_path: Path) -> None:
    rows = [erc20_row(1, a(1), a(2), "1", "$1"), erc20_row(2, a(1), a(2), "1.0000001", "$1")]
    with pytest.raises(LoadError) as err:
        load_file(db, "C", write_csv(tmp_path / "erc20.csv", ERC20_HEADER, rows))
    assert (err.value.line, err.value.column) == (3, "TokenValue") and "6 decimals" in err.value.message
    assert db.scalar("SELECT count(*) FROM transfers") == 0


@pytest.mark.parametrize(
    ("symbol", "chain", "expected"),
    [("BNB", None, "bsc"), ("MATIC", "matic", "polygon"), ("POL", None, "polygon"), ("AVAX", "avax", "avalanche_c"),
     ("ETH", "base", "base"), ("ETH", "op", "optimism"), ("ETH", None, "ethereum")],
)  # fmt: skip
def test_explorer_variants_and_chain_aliases(
    db: CaseDB, tmp_path: Path, symbol: str, chain: str | None, expected: str
) -> None:
    header = normal_header(symbol, "Transaction Hash", "ETH" if symbol == "ETH" else symbol.capitalize())
    path = write_csv(tmp_path / "n.csv", header, [normal_row(1, a(1), a(2), "1,250.5", "0")])
    load_file(db, "C", path, chain=chain)
    t = transfers(db)[0]
    assert (t["chain"], t["asset_key"], t["transfer_id"]) == (
        expected,
        f"{expected}:native",
        f"{expected}:{h(1)}:native:0",
    )
    assert t["usd_value"] == pytest.approx(1250.5 * 3900.12) and t["amount_raw"] == "1250500000000000000000"


def test_unknown_chain_and_wrong_native_are_clear_errors(db: CaseDB, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "n.csv", normal_header("BNB"), [normal_row(1, a(1), a(2), "1", "0")])
    with pytest.raises(UserFacingError, match=r"Unknown chain 'arbitrumm'.*arbitrum"):
        load_file(db, "C", path, chain="arbitrumm")
    with pytest.raises(LoadError) as err:
        load_file(db, "C", path, chain="ethereum")
    assert err.value.column == "Value_IN(BNB)" and "BNB" in err.value.message
    assert db.scalar("SELECT count(*) FROM chains") == 9


def test_failed_transactions_are_marked_and_move_nothing_in_totals(db: CaseDB, tmp_path: Path) -> None:
    rows = [normal_row(1, a(1), a(2), "0", "3"), normal_row(2, a(1), a(3), "0", "5", status="Error(0)"),
            normal_row(3, a(1), a(4), "0", "1", status="Error(1)")]  # fmt: skip
    load_file(db, "C", write_csv(tmp_path / "n.csv", normal_header(), rows))
    status = {t["to_address"]: t["status"] for t in transfers(db)}
    assert status == {a(2): True, a(3): False, a(4): True}  # Error(1): only an internal call failed
    out = db.scalar("SELECT total_out_usd FROM addresses WHERE case_id = 'C' AND address = ?", [a(1)])
    assert out == pytest.approx(4 * 3900.12)


def test_erc721_and_erc1155_exports(db: CaseDB, tmp_path: Path) -> None:
    nft = a(77)
    unix, dt = when(0)
    e721 = write_csv(tmp_path / "nft.csv", ERC721_HEADER,
                     [[h(1), "1", unix, dt, a(1), a(2), mixed(nft), "1234", "Punks", "P"],
                      [h(1), "1", unix, dt, a(2), a(3), mixed(nft), "1234", "Punks", "P"]])  # fmt: skip
    e1155 = write_csv(tmp_path / "multi.csv", ERC1155_HEADER,
                      [[h(2), "2", unix, dt, a(1), a(2), mixed(a(78)), "7", "15", "Items", "I"]])  # fmt: skip
    assert recognise(e721) == ("etherscan", "erc721") and recognise(e1155) == ("etherscan", "erc1155")
    load_file(db, "C", e721)
    load_file(db, "C", e1155)
    got = transfers(db)
    assert [(t["token_id"], t["amount_raw"], t["usd_value"]) for t in got] == [("1234", "1", None)] * 2 + [
        ("7", "15", None)
    ]
    std = dict(
        db.cursor()
        .execute("SELECT token_address, standard FROM assets WHERE token_address IN (?, ?)", [nft, a(78)])
        .fetchall()
    )
    assert std == {nft: "erc721", a(78): "erc1155"}


def test_token_export_before_normal_export_gives_the_same_transaction(db: CaseDB, tmp_path: Path) -> None:
    """The ERC-20 export has no sender, fee or method: loading it first must not leave them out."""
    normal = write_csv(
        tmp_path / "n.csv", normal_header(), [normal_row(1, a(1), a(50), "0", "0", method="Transfer")]
    )
    token = write_csv(tmp_path / "t.csv", ERC20_HEADER, [erc20_row(1, a(1), a(2), "10", "$10")])
    results = []
    for order in ((normal, token), (token, normal)):
        other = CaseDB(db.connection.cursor())
        case = f"C{len(results)}"
        for f in order:
            load_file(other, case, f)
        results.append(
            other.one(
                "SELECT from_address, to_address, fee, method_name, status FROM transactions WHERE case_id = ?",
                [case],
            )
        )
    assert results[0] == results[1] == {"from_address": a(1), "to_address": a(50), "fee": Decimal("0.0021"),
                                        "method_name": "Transfer", "status": True}  # fmt: skip


def test_interleaved_small_reads_and_loads(tmp_path: Path) -> None:
    """A one-row read on the workspace connection, then a load: no 'unfinished result' error."""
    from tahrix_lab.case.workspace import Workspace

    token = write_csv(
        tmp_path / "t.csv", ERC20_HEADER, [erc20_row(i, a(1), a(2 + i), "1", "$1") for i in range(5)]
    )
    normal = write_csv(tmp_path / "n.csv", normal_header(), [normal_row(9, a(1), a(2), "1", "0")])
    with Workspace(tmp_path / "w.duckdb") as ws:
        ws.load_file("C-1", token)
        ws.require_case("C-1")
        ws.cases.cursor().execute("SELECT * FROM transfers")  # a result left unread on this thread's cursor
        assert ws.cases.scalar("SELECT count(*) FROM transfers") == 5
        ws.load_etherscan_csv("C-1", normal)
        ws.require_case("C-1")
        assert ws.cases.one("SELECT count(*) AS n FROM transfers")["n"] == 6
        same = ws.load_path(token, case_id="C-1")  # the same bytes again: recognised, not re-read
        assert same.files[0].format.startswith("unchanged") and same.files[0].inserted == 0
        assert sum(same.files[0].skipped.values()) == 5
        again = ws.load_path(token, case_id="C-1", force=True)
        assert again.files[0].inserted == 0 and again.files[0].merged == 5
        assert [r["report"]["inserted"] for r in ws.load_reports("C-1")] == [5, 1, 0]


@pytest.mark.parametrize(
    ("edit", "line", "column", "words"),
    [
        (lambda r: r[1].__setitem__(0, "0xnothash"), 3, "Txhash", "not a transaction hash"),
        (lambda r: r[2].__setitem__(7, "12x"), 4, "Value_IN(ETH)", "not a number"),
        (lambda r: r[0].__setitem__(2, "yesterday"), 2, "UnixTimestamp", "not a time"),
        (lambda r: r[1].__setitem__(4, "0x12"), 3, "From", "not an address"),
    ],
)
def test_refusals_name_file_line_and_column(
    db: CaseDB, tmp_path: Path, edit, line: int, column: str, words: str
) -> None:  # type: ignore[no-untyped-def]
    rows = [normal_row(i, a(1), a(2), "1", "0") for i in range(1, 4)]
    for r in rows:
        r[3] = ""  # no DateTime: the time must come from UnixTimestamp
    edit(rows)
    path = write_csv(tmp_path / "bad.csv", normal_header(), rows)
    with pytest.raises(LoadError) as err:
        load_file(db, "C", path)
    assert (err.value.file, err.value.line, err.value.column) == (str(path), line, column)
    assert words in err.value.message and str(path) in str(err.value)
    assert db.scalar("SELECT count(*) FROM transactions") == 0


def test_structural_refusals(db: CaseDB, tmp_path: Path) -> None:
    header = ",".join(f'"{c}"' for c in ERC20_HEADER)
    good = ",".join(f'"{c}"' for c in erc20_row(1, a(1), a(2), "1", "$1"))
    short = tmp_path / "short.csv"
    short.write_text(f"{header}\n{good}\n{good.rsplit(',', 2)[0]}\n")
    with pytest.raises(LoadError, match="fewer fields") as err:
        load_file(db, "C", short)
    assert err.value.line == 3
    extra = tmp_path / "extra.csv"
    extra.write_text(f'{header}\n{good},""\n{good},"surprise"\n')
    with pytest.raises(LoadError, match="more fields") as err2:
        load_file(db, "C", extra)
    assert err2.value.line == 3
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("date,amount,memo\n2024-01-01,5,rent\n")
    with pytest.raises(LoadError) as err3:
        load_file(db, "C", unknown)
    assert err3.value.line == 1 and "date, amount, memo" in err3.value.message
    assert "token-page" in err3.value.message and "token_transfers" in err3.value.message
