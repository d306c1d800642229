"""Defects found on independently built cases, each on a fixture built here (not the sample case)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tahrix_lab.case.detectors import run_detectors
from tahrix_lab.case.labels import load_labels
from tahrix_lab.case.loaders import load_file

NORMAL_HEADER = ["Txhash", "Blockno", "UnixTimestamp", "DateTime (UTC)", "From", "To", "ContractAddress",
                 "Value_IN(ETH)", "Value_OUT(ETH)", "CurrentValue @ $3000/Eth", "TxnFee(ETH)", "TxnFee(USD)",
                 "Historical $Price/Eth", "Status", "ErrCode", "Method"]  # fmt: skip


def a(i: int) -> str:
    return f"0x{i:040x}"


def dust_flags(b: Any, cid: str) -> set[str]:
    run_detectors(b.db, cid, ["dusting"])
    rows, _ = b.db.list_flags(cid, flag_type="dusting", limit=1000)
    return {f["address"] for f in rows}


def test_a_generic_protocol_contract_distributing_is_not_dust(build: Any, tmp_path: Path) -> None:
    b = build()
    named, router, plain, duster = a(0x100), a(0x101), a(0x102), a(0x103)
    for i in range(12):
        b.transfer(named, a(0x200 + i), 0.4, 0, tx="0xmerkle")  # "Uniswap: Merkle Distributor", category defi
        b.transfer(
            router, a(0x300 + i), 0.4, 1, tx="0xmultisend"
        )  # a defi contract called with multisendToken
        b.transfer(
            plain, a(0x400 + i), 0.4, 2, tx="0xplain"
        )  # control: a defi contract, nothing says distribution
        b.transfer(duster, a(0x500 + i), 0.4, 3, tx="0xdust")  # control: an unknown sender
    b.tx("0xmultisend", a(0x600), router, 1)
    b.tx("0xplain", a(0x601), plain, 2)
    cid = b.done()
    b.db.cursor().execute(
        "UPDATE transactions SET method_name = 'Multisend Token' WHERE tx_hash = '0xmultisend'"
    )
    b.db.cursor().execute("UPDATE transactions SET method_name = 'Swap' WHERE tx_hash = '0xplain'")
    # the labels come as real lists do: eth-labels CSV rows whose slug is generic
    lst = tmp_path / "accounts.csv"
    lst.write_text("address,chainId,label,nameTag\n"
                   f'"{named.upper().replace("0X", "0x")}",1,"defi","Uniswap: Merkle Distributor"\n'
                   f'"{router}",1,"defi","Protocol X: Router"\n"{plain}",1,"defi","Protocol Y: Vault"\n')  # fmt: skip
    report = load_labels(b.db, [lst])
    assert report.total("new") == 3
    assert dust_flags(b, cid) == {plain, duster}


def test_an_etherscan_method_column_with_a_raw_selector_is_stored_as_the_selector(
    case_db: Any, tmp_path: Path
) -> None:
    def row(n: int, method: str) -> list[str]:
        return [f"0x{n:064x}", str(19_000_000 + n), str(1_710_000_000 + n), "2024-03-09 16:00:00", a(1), a(2), "",
                "0", "0.5", "1500", "0.001", "3", "3000", "", "", method]  # fmt: skip

    f = tmp_path / "normal.csv"
    rows = [NORMAL_HEADER, row(1, "0xA9059CBB"), row(2, "Transfer"), row(3, "0x12"), row(4, "")]
    f.write_text("\n".join(",".join(json.dumps(x) for x in r) for r in rows) + "\n")
    load_file(case_db, "C-SEL", f)
    got = case_db.rows(
        "SELECT tx_hash, method_selector, method_name FROM transactions WHERE case_id = 'C-SEL' ORDER BY tx_hash"
    )
    assert [(r["method_selector"], r["method_name"]) for r in got] == [
        ("0xa9059cbb", None), (None, "Transfer"), (None, "0x12"), (None, None)]  # fmt: skip


def test_a_trace_follows_value_through_a_dex_swap_back_to_the_sender(build: Any) -> None:
    from tahrix_lab.case.tracing import trace_funds

    b = build()
    victim, thief, router, ex, mixer = a(0x11), a(0x12), a(0x13), a(0x14), a(0x15)
    b.transfer(victim, thief, 100_000, 0, asset="ethereum:" + a(0x99), tx="0xsteal")  # stolen stablecoin
    b.transfer(thief, router, 100_000, 10, asset="ethereum:" + a(0x99), tx="0xswap")  # token into the router
    b.transfer(router, thief, 99_000, 10, tx="0xswap")  # native back by an internal transfer
    b.transfers[-2]["kind"], b.transfers[-1]["kind"] = "token", "internal"
    b.transfer(thief, ex, 60_000, 30, tx="0xcashout")  # then onward
    b.transfer(thief, mixer, 39_000, 40, tx="0xmix")
    b.label(router, "dex")
    b.label(ex, "exchange")
    b.label(mixer, "mixer")
    cid = b.done()
    s = trace_funds(b.db, cid, [victim])
    summary = s["summary"]
    assert summary["endpoint_usd_by_category"] == {"exchange": 60_000.0, "mixing_service": 39_000.0}
    assert summary["held_usd"] == 1_000.0  # the swap's cost stays with the thief, counted once
    assert summary["traced_usd"] == round(summary["endpoints_usd"] + summary["frontier_usd"] + summary["held_usd"]
                                          + summary["cut_off_usd"], 2)  # fmt: skip
    swaps = [e for e in s["edges"] if e.get("swap")]
    assert {(e["from"], e["to"]) for e in swaps} == {(thief, router), (router, thief)}
