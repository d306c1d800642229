"""The incident storyline of the sample case, each step with its ground truth: the attacker funded from a
mixer, the forged withdrawals, a DEX swap, an early exchange cash-out, Tornado-style bulk deposits and
fresh withdrawal addresses, then THORChain to BTC with a peel chain into a sanctioned mixer, and a chain
hop ETH→BSC→Tron ending in structured USDT payments; plus an unmatched Across deposit.

It runs after the background activity and before the distractors (``generator.generate_case``); the
order of the builder's random draws is what keeps the sample's bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from tahrix_lab.case.generator_core import T0, CaseBuilder


def add_incident(
    g: CaseBuilder,
    A: dict[str, str],
    gt: dict[str, Any],
    plant: Callable[..., None],
    assets: dict[str, str],
    *,
    withdrawal_addrs: list[str],
    peel_addrs: list[str],
    peel_deposits: list[str],
    eth_bg: list[str],
    btc_bg: list[str],
) -> None:
    eth, btc, usdc = assets["eth"], assets["btc"], assets["usdc"]
    eth_b, usdt_b, usdt_t = assets["eth_b"], assets["usdt_b"], assets["usdt_t"]
    W = withdrawal_addrs
    rng = g.rng

    # -- 1. attacker funded from the 1 ETH pool (nonce 0) ------------------------------
    t = T0 - timedelta(days=3)
    h = g.tx("ethereum", t, A["RELAY"], A["TC1"], [("internal", A["TC1"], A["A0"], eth, Decimal("0.9965")),
             ("internal", A["TC1"], A["RELAY"], eth, Decimal("0.0035"))], method="withdraw")  # fmt: skip
    plant(
        "fresh_address_funding",
        [("ethereum", A["A0"])],
        "attacker EOA funded from the Tornado 1 ETH pool",
        tx_hashes=[h],
    )
    plant("mixer_exposure", [("ethereum", A["A0"])], "direct: received from the 1 ETH pool")

    # -- 2. the forged withdrawals -----------------------------------------------------
    theft1 = g.tx(
        "ethereum",
        T0,
        A["A0"],
        A["VB"],
        [("internal", A["VB"], A["A0"], eth, 48_000)],
        method="withdrawWithSignatures",
    )
    theft2 = g.tx(
        "ethereum",
        T0 + timedelta(minutes=3),
        A["A0"],
        A["VB"],
        [("token", A["VB"], A["A0"], usdc, 21_500_000)],
        method="withdrawWithSignatures",
    )
    gt["theft_tx_hashes"] = [theft1, theft2]

    # -- 3. USDC → ETH on a DEX in 5 chunks -------------------------------------------
    eth_bal = 48_000.0
    for i in range(5):
        t = T0 + timedelta(minutes=40 + 7 * i)
        chunk = 4_300_000
        got = round(chunk / g.price("ETH", t) * 0.997, 4)
        eth_bal += got
        g.tx(
            "ethereum",
            t,
            A["A0"],
            A["DEXR"],
            [("token", A["A0"], A["DEXR"], usdc, chunk), ("internal", A["DEXR"], A["A0"], eth, got)],
            method="swapExactTokensForETH",
        )

    # -- 4. early cash-out through I1 to ExchangeA deposits --------------------------------
    t = T0 + timedelta(days=1)
    g.send("ethereum", t, A["A0"], A["I1"], eth, 2000)
    for i, k in enumerate(("EA1", "EA2", "EA3")):
        td = t + timedelta(hours=1 + i, minutes=rng.randint(0, 50))
        g.send("ethereum", td, A["I1"], A[k], eth, 650)
        g.send("ethereum", td + timedelta(hours=2), A[k], A["EAH"], eth, 649.99, method="sweep")
    gt["paths"].append({"name": "early_cashout", "start": {"chain": "ethereum", "address": A["A0"]},
                        "max_hops": 3, "expect_endpoints": [{"chain": "ethereum", "address": A[k]} for k in ("EA1", "EA2", "EA3")],
                        "category": "exchange",
                        "hops": [[("ethereum", A["A0"])], [("ethereum", A["I1"])], [("ethereum", A[k]) for k in ("EA1", "EA2", "EA3")]]})  # fmt: skip

    # -- 5. layering wallets → bursts of 100 ETH deposits -----------------------------------
    for k in ("L1", "L2", "L3"):
        g.send("ethereum", T0 + timedelta(days=2, minutes=rng.randint(0, 90)), A["A0"], A[k], eth, 13_400)
    deposits: list[datetime] = []
    remaining = {"L1": 134, "L2": 134, "L3": 134}
    day = 5.0
    while any(remaining.values()):
        k = rng.choice(sorted(n for n, left in remaining.items() if left))
        burst = min(remaining[k], rng.randint(10, 20))
        t = T0 + timedelta(days=day)
        for _ in range(burst):
            t = t + timedelta(minutes=rng.uniform(1.5, 3.8))
            g.send("ethereum", t, A[k], A["TC100"], eth, 100, method="deposit")
            deposits.append(t)
        remaining[k] -= burst
        day += rng.uniform(0.6, 1.0)
    for k in ("L1", "L2", "L3"):
        plant("mixer_bulk_deposit", [("ethereum", A[k])], "bursts of 10–20 × 100 ETH deposits within an hour")
        plant("repeated_amount", [("ethereum", A[k])], "≥5 identical 100 ETH deposits to one pool within 6 h")
        plant("mixer_exposure", [("ethereum", A[k])], "direct: deposits into the 100 ETH pool")
    # noise users of the same pool (single deposits, established wallets)
    for a in eth_bg[20:40]:
        g.send("ethereum", T0 + timedelta(days=rng.uniform(1, 30)), a, A["TC100"], eth, 100, method="deposit")

    # withdrawals to fresh addresses, each after its deposit
    withdrawals = sorted(d + timedelta(hours=rng.uniform(2, 120)) for d in deposits)
    w_funded: dict[str, datetime] = {}
    for i, t in enumerate(withdrawals):
        w = W[i % len(W)]
        g.tx("ethereum", t, A["RELAY"], A["TC100"], [("internal", A["TC100"], w, eth, Decimal("99.7")),
             ("internal", A["TC100"], A["RELAY"], eth, Decimal("0.3"))], method="withdraw")  # fmt: skip
        w_funded[w] = t
    for a in eth_bg[40:60]:
        g.tx("ethereum", T0 + timedelta(days=rng.uniform(2, 35)), A["RELAY"], A["TC100"],
             [("internal", A["TC100"], a, eth, Decimal("99.7")), ("internal", A["TC100"], A["RELAY"], eth, Decimal("0.3"))], method="withdraw")  # fmt: skip
    plant(
        "fresh_address_funding",
        [("ethereum", w) for w in W],
        "fresh withdrawal addresses funded by the 100 ETH pool",
    )
    plant(
        "mixer_exposure", [("ethereum", w) for w in W[:20]], "direct: received from the 100 ETH pool (sample)"
    )

    # -- W* fates: consolidate for the BTC leg (60%) or the chain hop (25%) -----------------
    btc_set = [w for i, w in enumerate(W) if i % 20 < 12]
    hop_set = [w for i, w in enumerate(W) if 12 <= i % 20 < 17]
    across_w = W[17]
    c_in: dict[str, float] = defaultdict(float)
    c_last: dict[str, datetime] = {}
    for i, w in enumerate(btc_set + hop_set):
        c = f"C{1 + i % 4}" if w in btc_set else f"C{5 + i % 2}"
        amount = 99.7 * (2 if W.index(w) < len(withdrawals) - len(W) else 1) - 0.01
        t = w_funded[w] + timedelta(days=rng.uniform(1, 5))
        g.send("ethereum", t, w, A[c], eth, round(amount, 4))
        c_in[c] += round(amount, 4)
        c_last[c] = max(c_last.get(c, t), t)
    plant(
        "mixer_exposure",
        [("ethereum", A[f"C{i}"]) for i in range(1, 7)],
        "indirect: consolidates mixer withdrawals (2 hops)",
    )
    t = w_funded[across_w] + timedelta(days=2)
    src = g.send("ethereum", t, across_w, A["ACROSS"], eth, 99.6, method="depositV3")
    unmatched = g.bridge(bridge_name="across", bridge_version="v3", protocol_msg_id="1907733", msg_id_kind="deposit_id",
                         src_chain="ethereum", src_tx_hash=src, src_log_index=0, src_time=t, src_address=across_w,
                         src_contract=A["ACROSS"], src_asset_key=eth, src_amount=Decimal("99.6"),
                         src_usd=g.usd(eth, Decimal("99.6"), t), declared_dst_chain="arbitrum",
                         declared_recipient=across_w, status="pending")  # fmt: skip
    gt["unmatched_bridge_events"] = [unmatched]

    # -- 6. BTC leg: THORChain swaps, consolidation, the peel chain ---------------------------
    thor_ids: list[str] = []
    bx_outs: list[tuple[str, int]] = []
    tstart = max(c_last[f"C{i}"] for i in range(1, 5)) + timedelta(hours=6)
    for ci in range(1, 5):
        c = f"C{ci}"
        bal = c_in[c] - 0.5
        pieces = 7 if ci < 4 else 9
        for p in range(pieces):
            t = tstart + timedelta(hours=ci * 5 + p * 0.7, minutes=rng.randint(0, 30))
            amt = round(bal / pieces, 4)
            bx = A[f"BX{1 + (ci * 7 + p) % 6}"]
            memo = f"=:BTC.BTC:{bx}:0/1/0"
            src = g.send("ethereum", t, A[c], A["THORR"], eth, amt, method="deposit", memo=memo)
            tdst = t + timedelta(minutes=rng.uniform(20, 90))
            sats = int(amt * g.price("ETH", t) / g.price("BTC", t) * 0.995 * 1e8)
            dst = g.btc_tx(tdst, [("ext", A["THORV"], sats + 5_000_000)], [(bx, sats), (A["THORV"], 4_990_000), (None, 0)],
                           memo="OUT:" + src[2:].upper())  # fmt: skip
            bx_outs.append((dst, 0))
            thor_ids.append(g.bridge(bridge_name="thorchain", bridge_version="v1", protocol_msg_id=src, msg_id_kind="inbound_tx_hash",
                                     src_chain="ethereum", src_tx_hash=src, src_log_index=0, src_time=t, src_address=A[c],
                                     src_contract=A["THORR"], src_asset_key=eth, src_amount=Decimal(str(amt)),
                                     src_usd=g.usd(eth, Decimal(str(amt)), t), declared_dst_chain="bitcoin", declared_recipient=bx,
                                     dst_chain="bitcoin", dst_tx_hash=dst, dst_log_index=0, dst_time=tdst, dst_address=bx,
                                     dst_asset_key=btc, dst_amount=Decimal(sats).scaleb(-8), dst_usd=g.usd(btc, Decimal(sats).scaleb(-8), tdst),
                                     relayer=A["THORV"], match_method="memo", match_confidence=1.0, status="matched"))  # fmt: skip
    for i in range(1, 7):
        plant(
            "fresh_address_funding",
            [("bitcoin", A[f"BX{i}"])],
            "BTC arrival address funded by THORChain outbound",
        )
    t = tstart + timedelta(days=2)
    total = sum(g.utxos[o][1] for o in bx_outs)
    cons = g.btc_tx(t, list(bx_outs), [(A["B0"], total - 40_000)])
    prev = (cons, 0)
    peel_txs = []
    for i in range(12):
        t = t + timedelta(hours=rng.uniform(2, 9))
        sats = g.utxos[prev][1]
        peel = int(sats * rng.uniform(0.01, 0.04))
        h = g.btc_tx(t, [prev], [(peel_addrs[i + 1], sats - peel - 3_000), (peel_deposits[i], peel)])
        peel_txs.append(h)
        prev = (h, 0)
        if i == 3:  # dust lands around the chain
            dust_to = peel_addrs[3:9] + btc_bg[:10]
            dust_tx = g.btc_tx(t + timedelta(minutes=30), [("ext", A["DUST"], 200_000)],
                               [*[(d, 546) for d in dust_to], (A["DUST"], 180_000)])  # fmt: skip
    plant(
        "peel_chain",
        [("bitcoin", A["B0"])],
        "12-hop 1-in/2-out peel chain peeling 1–4% to ExchangeB deposits",
        tx_hashes=peel_txs,
    )
    plant(
        "dusting",
        [("bitcoin", A["DUST"])],
        "546-sat dust fan-out to peel-chain addresses",
        tx_hashes=[dust_tx],
    )
    t = t + timedelta(hours=5)
    sats = g.utxos[prev][1]
    final = g.btc_tx(t, [prev], [(A["MIXB"], 40_000_000_000), (A["BZ"], sats - 40_000_000_000 - 5_000)])
    plant(
        "sanctions_exposure",
        [("bitcoin", peel_addrs[12])],
        "400 BTC into the sanctioned mixer after its designation",
        tx_hashes=[final],
    )
    plant("mixer_exposure", [("bitcoin", peel_addrs[12])], "direct: 400 BTC into the BTC mixer")
    # an unrelated user paid the same mixer before it was designated: not a sanctions hit
    x_in = g.btc_tx(
        T0 + timedelta(days=1),
        [("ext", A["EBH"], 100_000_000)],
        [(A["XU"], 60_000_000), (A["EBH"], 39_990_000)],
    )
    g.btc_tx(T0 + timedelta(days=5), [(x_in, 0)], [(A["MIXB"], 50_000_000), (A["XU"], 9_990_000)])
    gt["distractors"].append({"kind": "pre_designation_mixer_user", "chain": "bitcoin", "address": A["XU"],
                              "must_not_flag": ["sanctions_exposure"]})  # fmt: skip
    gt["paths"].append({"name": "btc_leg", "start": {"chain": "ethereum", "address": btc_set[0]}, "max_hops": 20,
                        "expect_endpoints": [{"chain": "bitcoin", "address": A["MIXB"]}, {"chain": "bitcoin", "address": peel_deposits[0]},
                                             {"chain": "bitcoin", "address": peel_deposits[11]}],
                        "category": "exchange",
                        "hops": [[("ethereum", btc_set[0])], [("ethereum", A["C1"])], [("ethereum", A["THORR"])],
                                 [("bitcoin", A[f"BX{i}"]) for i in range(1, 7)], *[[("bitcoin", b)] for b in peel_addrs],
                                 [("bitcoin", A["MIXB"])]]})  # fmt: skip

    # -- 7. chain hop: Stargate ETH→BSC, swap, Multichain BSC→Tron, structured payouts -------------
    tstart = max(c_last["C5"], c_last["C6"]) + timedelta(hours=3)
    hop_pairs = []
    tron_bal: dict[str, float] = defaultdict(float)
    tron_first: dict[str, datetime] = {}
    n = 0
    for ci in (5, 6):
        c = f"C{ci}"
        pieces = 5
        for p in range(pieces):
            t = tstart + timedelta(hours=(ci - 5) * 6 + p * 1.3, minutes=rng.randint(0, 20))
            amt = round((c_in[c] - 0.5) / pieces, 4)
            pk = f"P{1 + n % 3}"
            tk = f"T{1 + n % 3}"
            n += 1
            guid = "0x" + f"{rng.getrandbits(256):064x}"
            src = g.send("ethereum", t, A[c], A["SGR"], eth, amt, method="sendOFT", memo=f"guid:{guid}")
            tdst = t + timedelta(minutes=rng.uniform(2, 5))
            got = round(amt * 0.9994, 4)
            dst = g.tx(
                "bsc",
                tdst,
                A["SGB"],
                A["SGB"],
                [("token", A["SGB"], A[pk], eth_b, got)],
                method="lzReceive",
                memo=f"guid:{guid}",
            )
            sg = g.bridge(bridge_name="stargate", bridge_version="v2", protocol_msg_id=guid, msg_id_kind="lz_guid",
                          src_chain="ethereum", src_tx_hash=src, src_log_index=0, src_time=t, src_address=A[c], src_contract=A["SGR"],
                          src_asset_key=eth, src_amount=Decimal(str(amt)), src_usd=g.usd(eth, Decimal(str(amt)), t),
                          declared_dst_chain="bsc", declared_recipient=A[pk], dst_chain="bsc", dst_tx_hash=dst, dst_log_index=0,
                          dst_time=tdst, dst_address=A[pk], dst_asset_key=eth_b, dst_amount=Decimal(str(got)),
                          dst_usd=g.usd(eth_b, Decimal(str(got)), tdst), match_method="protocol_id", match_confidence=1.0,
                          status="matched")  # fmt: skip
            tswap = tdst + timedelta(minutes=rng.uniform(2, 6))
            usd_amt = round(got * g.price("ETH", tswap) * 0.997, 2)
            g.tx("bsc", tswap, A[pk], A["PDEX"], [("token", A[pk], A["PDEX"], eth_b, got), ("token", A["PDEX"], A[pk], usdt_b, usd_amt)],
                 method="swapExactTokensForTokens")  # fmt: skip
            tout = tswap + timedelta(minutes=rng.uniform(3, 8))
            src2 = g.send("bsc", tout, A[pk], A["MCR"], usdt_b, usd_amt, method="anySwapOut")
            tarr = tout + timedelta(minutes=rng.uniform(10, 30))
            arrived = round(usd_amt - 1.9, 2)
            dst2 = g.tx(
                "tron",
                tarr,
                A["MCT"],
                A["MCT"],
                [("token", A["MCT"], A[tk], usdt_t, arrived)],
                method="anySwapIn",
                memo=f"anySwapIn:{src2}",
            )
            mc = g.bridge(bridge_name="multichain", bridge_version="v6", protocol_msg_id=src2, msg_id_kind="src_tx_hash",
                          src_chain="bsc", src_tx_hash=src2, src_log_index=0, src_time=tout, src_address=A[pk], src_contract=A["MCR"],
                          src_asset_key=usdt_b, src_amount=Decimal(str(usd_amt)), src_usd=f"{usd_amt:.2f}", declared_dst_chain="tron",
                          declared_recipient=A[tk], dst_chain="tron", dst_tx_hash=dst2, dst_log_index=0, dst_time=tarr, dst_address=A[tk],
                          dst_asset_key=usdt_t, dst_amount=Decimal(str(arrived)), dst_usd=f"{arrived:.2f}", match_method="protocol_id",
                          match_confidence=1.0, status="matched")  # fmt: skip
            hop_pairs.append([sg, mc])
            tron_bal[tk] += arrived
            tron_first.setdefault(tk, tarr)
            # the Tron side cashes out in large chunks to the OTC desk
            chunk_usd = round(arrived * 0.5, 2) if tk != "T1" else round(arrived * 0.48, 2)
            for j in range(2):
                g.send(
                    "tron",
                    tarr + timedelta(hours=1 + j, minutes=rng.randint(0, 40)),
                    A[tk],
                    A[f"O{1 + (n + j) % 4}"],
                    usdt_t,
                    chunk_usd,
                )
                tron_bal[tk] -= chunk_usd
    plant("chain_hopping", [("bsc", A[p]) for p in ("P1", "P2", "P3")], "Stargate ETH→BSC then Multichain BSC→Tron within minutes",
          bridge_event_pairs=hop_pairs)  # fmt: skip
    plant(
        "pass_through",
        [("bsc", A[p]) for p in ("P1", "P2", "P3")],
        "receives bridged ETH, swaps to USDT, forwards within 10 minutes",
    )
    plant(
        "fresh_address_funding",
        [("bsc", A[p]) for p in ("P1", "P2", "P3")],
        "first funded by the Stargate bridge",
    )
    structured = []
    t = tron_first["T1"] + timedelta(hours=4)
    for i in range(12):
        t = t + timedelta(minutes=rng.uniform(40, 110))
        structured.append(
            g.send("tron", t, A["T1"], A[f"O{5 + i % 4}"], usdt_t, round(rng.uniform(9500, 9990), 2))
        )
    plant(
        "structuring",
        [("tron", A["T1"])],
        "12 USDT payments of 9,500–9,990 within 24 h",
        tx_hashes=structured,
    )
    gt["paths"].append({"name": "chain_hop_leg", "start": {"chain": "ethereum", "address": hop_set[0]}, "max_hops": 10,
                        "expect_endpoints": [{"chain": "tron", "address": A[f"O{i}"]} for i in range(1, 5)],
                        "category": "exchange",
                        "hops": [[("ethereum", hop_set[0])], [("ethereum", A["C5"])], [("ethereum", A["SGR"])],
                                 [("bsc", A[p]) for p in ("P1", "P2", "P3")], [("bsc", A["MCR"])],
                                 [("tron", A[t]) for t in ("T1", "T2", "T3")], [("tron", A[f"O{i}"]) for i in range(1, 5)]]})  # fmt: skip
