"""One regression per detector defect, on small cases the tests build (see ``CaseBuilder`` in conftest)."""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.detectors import DEFAULTS, run_detectors
from tahrix_lab.case.taxonomy import FUNDING_CATEGORIES

ZERO = "0x0000000000000000000000000000000000000000"
EX, OTC, MIXER = "0x" + "e1" * 20, "0x" + "0c" * 20, "0x" + "aa" * 20


def a(i: int) -> str:
    return f"0x{i:040x}"


def flags(b: Any, cid: str, flag_type: str) -> dict[str, dict[str, Any]]:
    run_detectors(b.db, cid, [flag_type])
    rows, _ = b.db.list_flags(cid, flag_type=flag_type, limit=1000)
    return {f["address"]: f for f in rows}


def test_fresh_funding_counts_exchanges_otc_and_instant_exchangers(build: Any) -> None:
    assert {"exchange", "otc_desk", "instant_exchanger", "mixing_service", "defi_bridge"} <= set(
        DEFAULTS["fresh_address_funding"]["funding_categories"]
    ) and tuple(DEFAULTS["fresh_address_funding"]["funding_categories"]) == FUNDING_CATEGORIES
    b = build()
    attacker, honest, launderer = a(1), a(2), a(3)
    b.transfer(EX, attacker, 1_500.0, 0)  # the attacker's first funding, from a CEX
    b.transfer(attacker, a(9), 1_000.0, 60)
    b.role(attacker, "perpetrator")
    b.transfer(EX, honest, 2_000.0, 10)  # a CEX withdrawal to a new wallet that does nothing odd
    b.transfer(OTC, launderer, 50_000.0, 20)  # first funded by an OTC desk, then into a mixer
    b.transfer(launderer, MIXER, 49_000.0, 80)
    b.label(EX, "exchange")
    b.label(OTC, "otc_desk")
    b.label(MIXER, "mixing_service")
    got = flags(b, b.done(), "fresh_address_funding")
    assert set(got) == {attacker, launderer}
    assert (
        got[attacker]["evidence"]["funder_category"] == "exchange"
        and got[attacker]["evidence"]["case_address"]
    )
    assert got[launderer]["evidence"]["later_sent_to_risky_service"]


def test_mints_and_burns_through_the_zero_address_fund_nobody(build: Any) -> None:
    b = build()
    b.transfer(ZERO, a(1), 250_000.0, 0)  # a CCTP-style mint to a new address
    b.transfer(a(2), ZERO, 10_000.0, 5)  # a burn
    b.transfer(MIXER, a(3), 5_000.0, 10)  # control: a mixer withdrawal to a fresh address is flagged
    b.label(ZERO, "defi_bridge")  # some sources label the zero address with the bridge that mints
    b.label(MIXER, "mixing_service")
    got = flags(b, b.done(), "fresh_address_funding")
    assert set(got) == {a(3)}


def test_airdrops_are_not_dust_and_the_zero_address_is_no_duster(build: Any) -> None:
    b = build()
    drop, token, duster = a(100), a(101), a(102)
    for i in range(12):
        b.transfer(drop, a(200 + i), 0.5, 0, tx="0xairdrop")  # a labelled distributor's airdrop
        b.transfer(token, a(300 + i), 0.5, 1, tx="0xtokendrop")  # a token contract's own distribution
        b.transfer(ZERO, a(400 + i), 0.5, 2, tx="0xmintdrop")  # minted straight to holders
        b.transfer(a(103), a(500 + i), 0.5, 3, tx="0xviacontract")  # sent by a contract the tx called
        b.transfer(duster, a(600 + i), 0.5, 4, tx="0xdust")  # control: an unknown sender's dust fan-out
    b.tx("0xviacontract", a(700), a(104), 3)
    b.label(drop, "airdrop")
    b.label(token, "token_contract")
    b.label(a(104), "merkle distributor")
    got = flags(b, b.done(), "dusting")
    assert set(got) == {duster}


def test_pass_through_nets_out_change_returned_to_the_sender(build: Any) -> None:
    b = build()
    x = "bc1qchangeaddressexample"
    b.transfer("bc1qsource", x, 100_000.0, 0, chain="bitcoin", tx="in0")
    held = 100_000.0
    for i in range(6):  # six spends of 10k, each returning its change to x itself
        held -= 10_000.0
        b.transfer(x, f"bc1qpayee{i}", 10_000.0, 30 * (i + 1), chain="bitcoin", tx=f"spend{i}")
        b.transfer(x, x, held, 30 * (i + 1), chain="bitcoin", tx=f"spend{i}")
    mover = "bc1qrealpassthrough"
    b.transfer("bc1qsource", mover, 100_000.0, 0, chain="bitcoin", tx="in1")
    b.transfer(mover, "bc1qnext", 99_000.0, 20, chain="bitcoin", tx="out1")
    got = flags(b, b.done(), "pass_through")
    assert set(got) == {mover}  # x kept 40% of what it received: change is not inflow


def test_unknown_usd_is_not_zero_and_failed_transfers_move_nothing(build: Any) -> None:
    b = build()
    b.transfer(a(1), MIXER, None, 0)  # an unpriced deposit into a mixer
    b.transfer(a(2), MIXER, 500_000.0, 0, status=False)  # a failed one
    for i in range(4):  # structuring from a(3), one of them failed: only three count
        b.transfer(a(3), a(10 + i), 9_500.0, 10 * i, status=i != 0)
    b.label(MIXER, "mixing_service")
    cid = b.done()
    got = flags(b, cid, "mixer_exposure")
    assert set(got) == {a(1)}
    ev = got[a(1)]["evidence"]
    assert ev["usd"] is None and ev["unpriced_transfers"] == 1 and got[a(1)]["severity"] == "medium"
    s = flags(b, cid, "structuring")
    assert s[a(3)]["evidence"]["count_in_window"] == 3
    dq = run_detectors(b.db, cid, ["structuring"])["data_quality"]
    assert dq["unpriced"] == 1 and dq["failed"] == 2
