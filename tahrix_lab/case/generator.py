"""Deterministic synthetic sample case (DOMAIN.md §8): ``generate_case(seed, out_dir)``.

Writes a case folder (``case.json`` + one CSV per table) and ``ground_truth.json``
listing the planted patterns, the laundering paths and the distractors that
must not be flagged. Every address and hash is random (synthetic); the same
seed gives the same bytes. Storyline "Aurora Gate bridge — validator key
compromise": theft → DEX swap → early exchange cash-out → Tornado-style
bulk deposits → fresh withdrawal addresses → THORChain to BTC with a peel
chain into a sanctioned mixer, and a chain hop ETH→BSC→Tron ending in
structured USDT payments; plus an unmatched Across deposit and distractors.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from tahrix_lab.case.generator_core import (
    ASSET_COLUMNS,
    BRIDGE_COLUMNS,
    CASE_ID,
    INJECTION,
    LABEL_COLUMNS,
    PRICE_COLUMNS,
    T0,
    TRANSFER_COLUMNS,
    TX_COLUMNS,
    UTXO_COLUMNS,
    CaseBuilder,
    fmt_time,
    jitter,
    write_csv,
)
from tahrix_lab.case.generator_stories import add_storylines


def generate_case(seed: int = 7, out_dir: str | Path = "sample_case", *, intake: str = "roles") -> Path:
    """Write the sample case folder and ``ground_truth.json``; return the folder.

    ``intake="seeds"`` writes a case whose intake lists only ``seed`` addresses (the attacker and the
    early cash-out intermediary, no roles decided yet); ``ground_truth.json`` says which."""
    if intake not in ("roles", "seeds"):
        raise ValueError(f"intake must be 'roles' or 'seeds', not {intake!r}")
    g = CaseBuilder(seed)
    rng = g.rng
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    # -- assets -------------------------------------------------------------------
    eth = g.asset("ethereum", "ETH", 18, "ETH", token=False, name="Ether")
    bnb = g.asset("bsc", "BNB", 18, "BNB", token=False, name="BNB")
    trx = g.asset("tron", "TRX", 6, "TRX", token=False, name="Tronix")
    btc = g.asset("bitcoin", "BTC", 8, "BTC", token=False, name="Bitcoin")
    usdc = g.asset("ethereum", "USDC", 6, "USDC", token=True, name="USD Coin (synthetic)")
    usdt_e = g.asset("ethereum", "USDT", 6, "USDT", token=True, name="Tether USD (synthetic)")
    eth_b = g.asset("bsc", "ETH", 18, "ETH", token=True, name="Binance-Peg Ethereum (synthetic)")
    usdt_b = g.asset("bsc", "USDT", 18, "USDT", token=True, name="Binance-Peg BSC-USD (synthetic)")
    usdt_t = g.asset("tron", "USDT", 6, "USDT", token=True, name="Tether USD TRC20 (synthetic)")
    spam = g.asset("ethereum", "VISIT-CLAIM", 18, "SPAM", token=True, name=INJECTION, spam=True)
    del trx, bnb

    # -- actors -------------------------------------------------------------------
    A: dict[str, str] = {}
    for name in ("VB", "VOPS", "A0", "I1", "L1", "L2", "L3", "TC1", "TC100", "RELAY", "DEXR", "EAH",
                 "EA1", "EA2", "EA3", "EXCD", "EXCH", "THORR", "SGR", "ACROSS", "MM", "PAYR",
                 "E1", "E2", "E3", "C1", "C2", "C3", "C4", "C5", "C6"):  # fmt: skip
        A[name] = g.evm()
    A["LA"] = g.lookalike(A["EXCD"])
    for name in ("SGB", "PDEX", "MCR", "P1", "P2", "P3"):
        A[name] = g.evm()
    for name in ("MCT", "T1", "T2", "T3", "O1", "O2", "O3", "O4", "O5", "O6", "O7", "O8"):
        A[name] = g.tron()
    for name in ("THORV", "B0", "BZ", "MIXB", "DUST", "XU", "EBH", *(f"BX{i}" for i in range(1, 7))):
        A[name] = g.btc()
    peel_addrs = [A["B0"]] + [g.btc() for _ in range(12)]
    peel_deposits = [g.btc() for _ in range(12)]
    W = [g.evm() for _ in range(300)]
    users = [g.evm() for _ in range(30)]
    bg = {
        c: [g.addr(c) for _ in range(n)]
        for c, n in (("ethereum", 120), ("bsc", 40), ("tron", 40), ("bitcoin", 40))
    }

    # -- labels (one conflicting pack and one injection string among them) -----------
    g.label(
        "ethereum",
        A["VB"],
        "Aurora Gate: bridge escrow",
        "defi_bridge",
        entity="Aurora Gate",
        source="case intake",
        confidence="ownership",
    )
    g.label(
        "ethereum",
        A["VOPS"],
        "Aurora Gate: ops wallet",
        "defi_bridge",
        entity="Aurora Gate",
        source="case intake",
        confidence="ownership",
    )
    g.label(
        "ethereum",
        A["TC1"],
        "Tornado Cash: 1 ETH pool (synthetic)",
        "mixing_service",
        entity="Tornado Cash",
        source="relayer config",
        confidence="service_data",
    )
    g.label(
        "ethereum",
        A["TC1"],
        "Tornado Cash: 0.1 ETH",
        "mixing_service",
        entity="Tornado Cash",
        source="public-pack-x",
        confidence="web_crawl",
    )
    g.label(
        "ethereum",
        A["TC1"],
        "Exchange hot wallet",
        "exchange",
        entity="Unknown exchange",
        source="public-pack-y",
        confidence="heuristic",
    )
    g.label(
        "ethereum",
        A["TC100"],
        "Tornado Cash: 100 ETH pool (synthetic)",
        "mixing_service",
        entity="Tornado Cash",
        source="relayer config",
        confidence="service_data",
    )
    g.label(
        "ethereum",
        A["RELAY"],
        "Tornado Cash relayer",
        "mixing_service",
        entity="Tornado Cash relayer",
        source="relayer config",
        confidence="service_data",
    )
    g.label("ethereum", A["DEXR"], "SynthSwap: router", "defi_dex", entity="SynthSwap", source="synthetic")
    for k in ("EAH", "EA1", "EA2", "EA3"):
        g.label(
            "ethereum",
            A[k],
            f"ExchangeA: {'hot wallet' if k == 'EAH' else 'deposit'}",
            "exchange",
            entity="ExchangeA",
        )
    g.label("ethereum", A["EXCD"], "ExchangeC: deposit", "exchange", entity="ExchangeC")
    g.label("ethereum", A["EXCH"], "ExchangeC: hot wallet", "exchange", entity="ExchangeC")
    g.label("ethereum", A["THORR"], "THORChain: router (synthetic)", "defi_bridge", entity="THORChain")
    g.label("ethereum", A["SGR"], "Stargate: router (synthetic)", "defi_bridge", entity="Stargate")
    g.label("ethereum", A["ACROSS"], "Across: spoke pool (synthetic)", "defi_bridge", entity="Across")
    g.label("ethereum", A["MM"], "Synthetic Markets Ltd", "market_maker", entity="Synthetic Markets Ltd")
    g.label("bsc", A["SGB"], "Stargate: pool (synthetic)", "defi_bridge", entity="Stargate")
    g.label("bsc", A["PDEX"], "SynthCake: router", "defi_dex", entity="SynthCake")
    g.label("bsc", A["MCR"], "Multichain: router (synthetic)", "defi_bridge", entity="Multichain")
    g.label("tron", A["MCT"], "Multichain: router (synthetic)", "defi_bridge", entity="Multichain")
    for k in ("O1", "O2", "O3", "O4", "O5", "O6", "O7", "O8"):
        g.label("tron", A[k], "TronOTC desk: deposit", "exchange", entity="TronOTC")
    g.label("bitcoin", A["THORV"], "THORChain: BTC vault (synthetic)", "defi_bridge", entity="THORChain")
    g.label("bitcoin", A["MIXB"], "BlendMix (synthetic BTC mixer)", "mixing_service", entity="BlendMix", abuse="sanction",
            source="OFAC SDN (synthetic)", confidence="authority_data", valid_from=T0 + timedelta(days=20))  # fmt: skip
    g.label("bitcoin", A["EBH"], "ExchangeB: hot wallet", "exchange", entity="ExchangeB")
    for d in peel_deposits:
        g.label("bitcoin", d, "ExchangeB: deposit", "exchange", entity="ExchangeB")
    g.label("ethereum", bg["ethereum"][7], INJECTION, "scam", source="public-pack-x", confidence="web_crawl")

    gt: dict[str, Any] = {"case_id": CASE_ID, "seed": seed, "planted": [], "distractors": [], "paths": []}

    def plant(flag_type: str, subjects: list[tuple[str, str]], note: str, **extra: Any) -> None:
        gt["planted"].append(
            {
                "flag_type": flag_type,
                "subjects": [{"chain": c, "address": a} for c, a in subjects],
                "note": note,
                **extra,
            }
        )

    # -- background: funded long before the incident, active over ~70 days --------------
    start = T0 - timedelta(days=30)
    for a in bg["ethereum"] + users + [A["VOPS"], A["PAYR"], A["MM"]]:
        t = jitter(rng, start, 0, 5 * 1440)
        g.send("ethereum", t, A["EAH"], a, eth, round(rng.uniform(5, 60), 4), method="withdraw")
        g.send(
            "ethereum",
            t + timedelta(minutes=3),
            A["EAH"],
            a,
            usdc,
            round(rng.uniform(2000, 8000), 2),
            method="transfer",
        )
    g.send("ethereum", start + timedelta(hours=1), A["VB"], A["VOPS"], usdt_e, 900_000, method="transfer")
    g.send("ethereum", start + timedelta(hours=2), A["EAH"], A["PAYR"], usdt_e, 100_000, method="transfer")

    def safe_usd() -> float:
        v = rng.uniform(60, 6000)
        return v if not (900 <= v < 1000) else v + 200

    eth_bg = bg["ethereum"]
    for _ in range(1200):
        a, b = rng.sample(eth_bg, 2)
        t = T0 + timedelta(days=rng.uniform(-25, 40))
        if rng.random() < 0.4:  # a batch payment: one tx, several token transfers
            payees = rng.sample([x for x in eth_bg if x != a], rng.randint(2, 4))
            token_addr = g.assets[usdc]["token_address"]
            g.tx(
                "ethereum",
                t,
                a,
                token_addr,
                [("token", a, r, usdc, round(safe_usd(), 2)) for r in payees],
                method="multisend",
            )
        elif rng.random() < 0.5:
            g.send("ethereum", t, a, b, eth, round(safe_usd() / 3900, 5))
        else:
            g.send("ethereum", t, a, b, usdc, round(safe_usd(), 2))
    for chain, native, token in (("bsc", "bsc:native", usdt_b), ("tron", "tron:native", usdt_t)):
        hub = g.addr(chain)
        g.label(chain, hub, f"ExchangeD {chain} hot wallet", "exchange", entity="ExchangeD")
        for a in bg[chain]:
            t = jitter(rng, start, 0, 3 * 1440)
            g.send(chain, t, hub, a, token, round(rng.uniform(3000, 8000), 2), method="transfer")
            g.send(chain, t + timedelta(minutes=2), hub, a, native, round(rng.uniform(50, 400), 2))
        for i in range(500):
            a, b = rng.sample(bg[chain], 2)
            t = T0 + timedelta(days=rng.uniform(-25, 40))
            memo = INJECTION if (chain == "tron" and i == 3) else ""
            g.send(chain, t, a, b, token, round(safe_usd(), 2), memo=memo)
    btc_bg = bg["bitcoin"]
    for a in btc_bg:
        g.btc_tx(
            jitter(rng, start, 0, 2 * 1440),
            [("ext", A["EBH"], 5_000_000_000)],
            [(a, rng.randint(20_000_000, 90_000_000)), (A["EBH"], 1_000_000_000)],
        )
    for _ in range(200):
        a, b = rng.sample(btc_bg, 2)
        mine = [k for k, v in g.utxos.items() if v[0] == a]
        if not mine:
            continue
        prev = sorted(mine)[0]
        sats = g.utxos[prev][1]
        pay = int(sats * rng.uniform(0.3, 0.6))
        g.btc_tx(T0 + timedelta(days=rng.uniform(-20, 40)), [prev], [(b, pay), (a, sats - pay - 2_000)])

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

    # -- 9. distractors ----------------------------------------------------------------
    # victim ops wallet pays its usual exchange deposit weekly; a 4+4 look-alike poisons it
    for week in range(-4, 6):
        g.send(
            "ethereum",
            T0 + timedelta(days=7 * week + 1, hours=rng.randint(8, 16)),
            A["VOPS"],
            A["EXCD"],
            usdt_e,
            100_000,
        )
    poison = [g.send("ethereum", T0 + timedelta(days=d, minutes=rng.randint(0, 600)), A["LA"], A["VOPS"], usdt_e, 0, method="transferFrom")
              for d in (2, 4, 9)]  # fmt: skip
    missend = g.send("ethereum", T0 + timedelta(days=12, hours=3), A["VOPS"], A["LA"], usdt_e, 50_000)
    plant("address_poisoning", [("ethereum", A["VOPS"])], "zero-value transfers from a 4+4 look-alike of ExchangeC's deposit; one 50k USDT mis-send",
          tx_hashes=[*poison, missend], lookalike=A["LA"], imitated=A["EXCD"])  # fmt: skip
    # a labelled market maker with pass-through-like flow
    for i in range(20):
        t = T0 + timedelta(days=3 + i * 0.15)
        amt = round(rng.uniform(480, 520), 3)
        g.send("ethereum", t, A["EAH"], A["MM"], eth, amt)
        g.send(
            "ethereum",
            t + timedelta(minutes=rng.randint(5, 15)),
            A["MM"],
            A["EXCH"],
            eth,
            round(amt - 0.02, 3),
        )
    gt["distractors"].append(
        {
            "kind": "market_maker",
            "chain": "ethereum",
            "address": A["MM"],
            "must_not_flag": ["pass_through", "repeated_amount"],
        }
    )
    # payroll: three payments in the structuring band, weeks apart
    for i, e in enumerate(("E1", "E2", "E3")):
        g.send("ethereum", T0 + timedelta(days=1 + 7 * i), A["PAYR"], A[e], usdt_e, 9_800)
    gt["distractors"].append(
        {"kind": "payroll", "chain": "ethereum", "address": A["PAYR"], "must_not_flag": ["structuring"]}
    )
    # unrelated DEX users sharing the attacker's router
    for u in users:
        for _ in range(rng.randint(2, 5)):
            t = T0 + timedelta(days=rng.uniform(-20, 35))
            usd_amt = rng.choice([rng.uniform(200, 8500), rng.uniform(11_000, 40_000)])
            g.tx("ethereum", t, u, A["DEXR"], [("token", u, A["DEXR"], usdc, round(usd_amt, 2)),
                 ("internal", A["DEXR"], u, eth, round(usd_amt / g.price("ETH", t) * 0.997, 5))], method="swapExactTokensForETH")  # fmt: skip
        gt["distractors"].append(
            {"kind": "dex_user", "chain": "ethereum", "address": u, "must_not_flag": "all"}
        )
    # a spam airdrop whose token name is an injection string
    g.tx("ethereum", T0 + timedelta(days=6), eth_bg[3], spam.split(":")[1], [("token", eth_bg[3], r, spam, 1) for r in eth_bg[60:63]],
         method="airdrop")  # fmt: skip
    add_storylines(g, A, gt, plant, {"eth": eth, "eth_b": eth_b, "usdc": usdc}, eth_bg, T0)
    gt["label_conflicts"] = [
        {"chain": "ethereum", "address": A["TC1"], "resolved_category": "mixing_service"}
    ]
    gt["injection"] = {"text": INJECTION, "label_address": eth_bg[7], "token_asset_key": spam}
    gt["actors"] = dict(sorted(A.items()))
    gt["actors"]["peel_chain"] = peel_addrs
    gt["actors"]["peel_deposits"] = peel_deposits

    for path in gt["paths"]:
        path["hops"] = [[{"chain": c, "address": a} for c, a in stage] for stage in path["hops"]]
    gt["intake"] = intake
    _write(g, out, gt)
    return out


def _write(g: CaseBuilder, out: Path, gt: dict[str, Any]) -> None:
    for row in g.utxo:
        if row["direction"] == "out":
            row["spent_by_tx"] = g.spent_by.get((row["tx_hash"], int(row["idx"])), "")
    txs = sorted(g.txs, key=lambda r: (r["block_time"], r["chain"], r["tx_hash"]))
    transfers = sorted(g.transfers, key=lambda r: (r["block_time"], r["transfer_id"]))
    write_csv(out / "transactions.csv", TX_COLUMNS, txs)
    write_csv(out / "transfers.csv", TRANSFER_COLUMNS, transfers)
    write_csv(out / "utxo_io.csv", UTXO_COLUMNS, g.utxo)
    write_csv(out / "bridge_events.csv", BRIDGE_COLUMNS, g.bridges)
    write_csv(out / "labels.csv", LABEL_COLUMNS, g.labels)
    write_csv(out / "assets.csv", ASSET_COLUMNS, list(g.assets.values()))
    prices = [
        {"canonical_asset": a, "ts_hour": fmt_time(T0.replace(hour=0, minute=0) + timedelta(days=d)), "usd": f"{p:.4f}",
         "source": "synthetic"}
        for (a, d), p in sorted(g.prices.items())
    ]  # fmt: skip
    write_csv(out / "prices.csv", PRICE_COLUMNS, prices)
    actors = gt["actors"]
    case = {
        "case_id": CASE_ID,
        "title": "Aurora Gate bridge — validator key compromise",
        "incident_type": "bridge_exploit",
        "incident_time": fmt_time(T0),
        "reported_loss_usd": "190000000.00",
        "summary": (
            "Two forged withdrawals drained 48,000 ETH and 21.5M USDC from the Aurora Gate bridge escrow. "
            "Synthetic case: every address and hash is random."
        ),
        "addresses": [
            {"chain": "ethereum", "address": actors["VB"], "role": "victim", "note": "bridge escrow"},
            {"chain": "ethereum", "address": actors["VOPS"], "role": "victim", "note": "ops wallet"},
            {
                "chain": "ethereum",
                "address": actors["A0"],
                "role": "perpetrator",
                "note": "signed the forged withdrawals",
            },
            {
                "chain": "ethereum",
                "address": actors["I1"],
                "role": "suspect",
                "note": "early cash-out intermediary",
            },
        ],
    }
    if gt["intake"] == "seeds":  # an intake before anyone decided roles: the two addresses the victim named
        named: list[dict[str, str]] = case["addresses"]  # type: ignore[assignment]
        case["addresses"] = [{**a, "role": "seed", "note": "named in the intake"} for a in named
                             if a["role"] in ("perpetrator", "suspect")]  # fmt: skip
    (out / "case.json").write_text(json.dumps(case, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    gt["sizes"] = {
        "transactions": len(txs),
        "transfers": len(transfers),
        "bridge_events": len(g.bridges),
        "labels": len(g.labels),
    }
    (out / "ground_truth.json").write_text(json.dumps(gt, indent=2, sort_keys=True) + "\n", encoding="utf-8")
