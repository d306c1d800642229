"""Storylines the sample case gained for issue 12, each with its ground truth.

* an OTC cash-out: the attacker's funds reach an OTC desk and an instant
  exchanger whose labels use other spellings (``OTC Broker``, ``Instant Exchange``);
* a bridge round trip: funds cross to BSC and come back to the same address
  before they reach an exchange (the tracer must count them once);
* an airdrop distractor: a labelled distributor sends sub-dollar amounts to
  many holders (not dust), and a CCTP-style mint from the zero address funds
  a new address (not a funder).

The seed-only intake is an option of ``generate_case`` (``intake="seeds"``).
These run after every other storyline so the earlier ones keep their bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tahrix_lab.case.generator_core import CaseBuilder

ZERO = "0x0000000000000000000000000000000000000000"


def add_storylines(
    g: CaseBuilder,
    A: dict[str, str],
    gt: dict[str, Any],
    plant: Callable[..., None],
    assets: dict[str, str],
    bg: list[str],
    t0: datetime,
) -> None:
    eth, eth_b, usdc = assets["eth"], assets["eth_b"], assets["usdc"]
    for name in ("K0", "K1", "OTC", "IX", "R0", "DROP", "CCTPR"):
        A[name] = g.evm()
    g.label("ethereum", A["OTC"], "Meridian OTC (synthetic)", "OTC Broker", entity="Meridian OTC")
    g.label("ethereum", A["IX"], "SwiftSwap (synthetic)", "Instant Exchange", entity="SwiftSwap")
    g.label(
        "ethereum",
        A["DROP"],
        "Aurora token: merkle distributor (synthetic)",
        "airdrop",
        entity="Aurora token",
    )
    g.label("ethereum", ZERO, "Circle CCTP: minter (synthetic)", "bridge", entity="Circle CCTP")

    # -- OTC cash-out: attacker → K0 → K1 → OTC desk and instant exchanger -----------------
    t = t0 + timedelta(days=20, hours=3)
    g.send("ethereum", t, A["A0"], A["K0"], eth, 150)
    g.send("ethereum", t + timedelta(hours=2), A["K0"], A["K1"], eth, 100)
    otc = g.send("ethereum", t + timedelta(hours=5), A["K1"], A["OTC"], eth, 60)
    ix = g.send("ethereum", t + timedelta(hours=6), A["K1"], A["IX"], eth, 39.9)
    gt["paths"].append({"name": "otc_cashout", "start": {"chain": "ethereum", "address": A["K0"]}, "max_hops": 4,
                        "expect_endpoints": [{"chain": "ethereum", "address": A["OTC"], "category": "otc_desk"},
                                             {"chain": "ethereum", "address": A["IX"], "category": "instant_exchanger"}],
                        "category": "otc_desk", "tx_hashes": [otc, ix],
                        "hops": [[("ethereum", A["K0"])], [("ethereum", A["K1"])], [("ethereum", A["OTC"])]]})  # fmt: skip

    # -- bridge round trip: R0 → Stargate → R0 on BSC → Stargate → R0 → exchange deposit -------
    t = t0 + timedelta(days=21, hours=9)
    g.send("ethereum", t, A["A0"], A["R0"], eth, 200)
    legs = []
    for i, (src_chain, dst_chain, router, pool, asset_in, asset_out) in enumerate(
        (
            ("ethereum", "bsc", A["SGR"], A["SGB"], eth, eth_b),
            ("bsc", "ethereum", A["SGB"], A["SGR"], eth_b, eth),
        )
    ):
        ts = t + timedelta(hours=1 + 3 * i)
        amt = round(199 - 0.2 * i, 4)
        guid = "0x" + f"{g.rng.getrandbits(256):064x}"
        src = g.send(src_chain, ts, A["R0"], router, asset_in, amt, method="sendOFT", memo=f"guid:{guid}")
        td = ts + timedelta(minutes=4)
        got = round(amt * 0.9994, 4)
        dst = g.tx(dst_chain, td, pool, pool, [("token" if dst_chain == "bsc" else "internal", pool, A["R0"], asset_out, got)],
                   method="lzReceive", memo=f"guid:{guid}")  # fmt: skip
        legs.append(g.bridge(bridge_name="stargate", bridge_version="v2", protocol_msg_id=guid, msg_id_kind="lz_guid",
                             src_chain=src_chain, src_tx_hash=src, src_log_index=0, src_time=ts, src_address=A["R0"],
                             src_contract=router, src_asset_key=asset_in, src_amount=Decimal(str(amt)),
                             src_usd=g.usd(asset_in, Decimal(str(amt)), ts), declared_dst_chain=dst_chain,
                             declared_recipient=A["R0"], dst_chain=dst_chain, dst_tx_hash=dst, dst_log_index=0, dst_time=td,
                             dst_address=A["R0"], dst_asset_key=asset_out, dst_amount=Decimal(str(got)),
                             dst_usd=g.usd(asset_out, Decimal(str(got)), td), match_method="protocol_id",
                             match_confidence=1.0, status="matched"))  # fmt: skip
    cash = g.send("ethereum", t + timedelta(hours=8), A["R0"], A["EA2"], eth, 198.5)
    gt["paths"].append({"name": "bridge_round_trip", "start": {"chain": "ethereum", "address": A["R0"]}, "max_hops": 6,
                        "expect_endpoints": [{"chain": "ethereum", "address": A["EA2"], "category": "exchange"}],
                        "category": "exchange", "bridge_event_ids": legs, "cashout_tx_hash": cash,
                        "hops": [[("ethereum", A["R0"])], [("bsc", A["R0"])], [("ethereum", A["EA2"])]]})  # fmt: skip
    plant("chain_hopping", [("bsc", A["R0"])], "bridge round trip ethereum → bsc → ethereum within hours",
          bridge_event_pairs=[legs])  # fmt: skip

    # -- airdrop distractor and a CCTP-style mint ------------------------------------------------
    t = t0 + timedelta(days=8, hours=14)
    holders = bg[20:45]
    g.tx(
        "ethereum",
        t,
        A["DROP"],
        A["DROP"],
        [("token", A["DROP"], h, usdc, 0.5) for h in holders],
        method="claimBatch",
    )
    g.tx("ethereum", t + timedelta(hours=5), ZERO, g.assets[usdc]["token_address"], [("token", ZERO, A["CCTPR"], usdc, 120_000)],
         method="receiveMessage")  # fmt: skip
    g.send("ethereum", t + timedelta(hours=9), A["CCTPR"], bg[50], usdc, 119_000)
    gt["distractors"].append({"kind": "airdrop_distributor", "chain": "ethereum", "address": A["DROP"],
                              "must_not_flag": ["dusting"]})  # fmt: skip
    gt["distractors"].append({"kind": "cctp_mint_recipient", "chain": "ethereum", "address": A["CCTPR"],
                              "must_not_flag": ["fresh_address_funding"]})  # fmt: skip
    gt["distractors"].append(
        {"kind": "zero_address", "chain": "ethereum", "address": ZERO, "must_not_flag": "all"}
    )
