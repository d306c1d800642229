"""Deterministic synthetic sample case (DOMAIN.md §8): ``generate_case(seed, out_dir)``.

Writes a case folder (``case.json`` + one CSV per table) and ``ground_truth.json``
listing the planted patterns, the laundering paths and the distractors that
must not be flagged. Every address and hash is random (synthetic); the same
seed gives the same bytes. Storyline "Aurora Gate bridge — validator key
compromise": theft → DEX swap → early exchange cash-out → Tornado-style
bulk deposits → fresh withdrawal addresses → THORChain to BTC with a peel
chain into a sanctioned mixer, and a chain hop ETH→BSC→Tron ending in
structured USDT payments; plus an unmatched Across deposit and distractors.

This module holds the cast (assets, actors, labels), the background activity,
the distractors and the writing of the folder; the incident's steps are in
``generator_incident``, the later storylines in ``generator_stories``, and
the primitives they all record with (``CaseBuilder``) in ``generator_core``.
"""

from __future__ import annotations

import json
from datetime import timedelta
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
from tahrix_lab.case.generator_incident import add_incident
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

    # -- 1.–7. the incident (generator_incident) --------------------------------------
    incident_assets = {"eth": eth, "btc": btc, "usdc": usdc, "eth_b": eth_b, "usdt_b": usdt_b, "usdt_t": usdt_t}  # fmt: skip
    add_incident(g, A, gt, plant, incident_assets, withdrawal_addrs=W, peel_addrs=peel_addrs,
                 peel_deposits=peel_deposits, eth_bg=eth_bg, btc_bg=btc_bg)  # fmt: skip

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
