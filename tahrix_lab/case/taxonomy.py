"""One label vocabulary: every label category normalised at load to one taxonomy.

The canonical ids are graphsense's concept ids (``graphsense-tagpack-tool``
``src/tagpack/db/concepts.yaml``: ``exchange``, ``mixing_service``,
``defi_dex``, ``defi_bridge``, ``gambling``, ``payment_processor``, …), which
the case schema already uses. Graphsense has no concept for OTC desks or
instant exchangers, which investigators meet at every cash-out, so two ids
are added here (``otc_desk``, ``instant_exchanger``), plus ``market_maker``,
``token_contract`` and ``airdrop_distributor`` for distractors the detectors
must recognise.

Label sources spell the same thing many ways (``otc``, ``OTC Broker``,
``cex``, ``Instant Exchange``, ``mixer``…). ``normalise_category`` maps a raw
spelling through ``ALIASES`` to the canonical id; a spelling it does not know
is kept as written (trimmed) and reported as unknown, never guessed.
"""

from __future__ import annotations

import re

# Canonical ids → a short description (shown by tools and docs).
CATEGORIES: dict[str, str] = {
    # graphsense concepts (services)
    "exchange": "centralised exchange (CEX)",
    "wallet_service": "custodial wallet service",
    "market": "market place (including darknet markets)",
    "shop": "online shop",
    "mixing_service": "mixer / tumbler",
    "coinjoin": "CoinJoin coordinator",
    "gambling": "gambling service",
    "payment_processor": "crypto payment processor",
    "atm": "cryptoasset ATM",
    "mining_service": "mining service",
    "miner": "miner",
    "faucet": "faucet",
    "hosting": "hosting provider",
    "vpn": "VPN provider",
    "defi": "DeFi protocol",
    "defi_dex": "decentralised exchange (DEX)",
    "defi_lending": "lending protocol",
    "defi_bridge": "cross-chain bridge",
    "defi_derivative": "derivatives protocol",
    "ico_wallet": "ICO wallet",
    "donation": "donation address",
    # graphsense concepts (actors and abuses used as categories by some sources)
    "user": "individual user",
    "organization": "organisation",
    "perpetrator": "perpetrator",
    "victim": "victim",
    "scam": "scam",
    "phishing": "phishing",
    "ransomware": "ransomware",
    "service_hack": "hacked service",
    "sanction": "sanctioned entity",
    "terrorism": "terrorism financing",
    # Tahrix extensions (no graphsense concept)
    "otc_desk": "OTC desk / broker",
    "instant_exchanger": "instant (no-account) exchanger",
    "market_maker": "market maker",
    "token_contract": "token contract",
    "airdrop_distributor": "airdrop / token distributor",
}

# Raw spellings seen in label sources → canonical id. Keys are compared after
# ``_key`` (lower case, runs of space, dash, slash and dot as one underscore).
ALIASES: dict[str, str] = {
    # exchanges
    "cex": "exchange",
    "centralized_exchange": "exchange",
    "centralised_exchange": "exchange",
    "exchange_deposit": "exchange",
    "exchange_hot_wallet": "exchange",
    "deposit_address": "exchange",
    "hot_wallet": "exchange",
    # OTC
    "otc": "otc_desk",
    "otc_broker": "otc_desk",
    "otc_trader": "otc_desk",
    "otc_desk": "otc_desk",
    "otc_exchange": "otc_desk",
    # instant exchangers
    "instant_exchange": "instant_exchanger",
    "instant_exchanger": "instant_exchanger",
    "instant_swap": "instant_exchanger",
    "no_kyc_exchange": "instant_exchanger",
    "swap_service": "instant_exchanger",
    # mixers
    "mixer": "mixing_service",
    "mixing": "mixing_service",
    "tumbler": "mixing_service",
    "privacy_protocol": "mixing_service",
    "coin_join": "coinjoin",
    # DeFi
    "dex": "defi_dex",
    "decentralized_exchange": "defi_dex",
    "decentralised_exchange": "defi_dex",
    "amm": "defi_dex",
    "dex_aggregator": "defi_dex",
    "bridge": "defi_bridge",
    "cross_chain_bridge": "defi_bridge",
    "lending": "defi_lending",
    "defi_protocol": "defi",
    # other services
    "gambling_service": "gambling",
    "casino": "gambling",
    "payment_service": "payment_processor",
    "payments": "payment_processor",
    "merchant_services": "payment_processor",
    "custodial_wallet": "wallet_service",
    "wallet": "wallet_service",
    "darknet_market": "market",
    "darknet": "market",
    "marketplace": "market",
    "mining_pool": "mining_service",
    # actors and abuses
    "sanctioned": "sanction",
    "sanctions": "sanction",
    "ofac": "sanction",
    "ofac_sanctioned": "sanction",
    "sanctioned_entity": "sanction",
    "hacker": "perpetrator",
    "exploiter": "perpetrator",
    "attacker": "perpetrator",
    "thief": "perpetrator",
    "hack": "service_hack",
    "exploit": "service_hack",
    "scammer": "scam",
    "fraud": "scam",
    "phish": "phishing",
    "phishing_scam": "phishing",
    # Etherscan label-cloud slugs (eth-labels file names)
    "phish_hack": "phishing",
    "heist": "service_hack",
    "exploiter_hacker": "perpetrator",
    "tornado_cash": "mixing_service",
    "blocked": "sanction",
    "multisender": "airdrop_distributor",
    "batch_sender": "airdrop_distributor",
    "gambling_and_betting": "gambling",
    "mm": "market_maker",
    "liquidity_provider": "market_maker",
    "token": "token_contract",
    "erc20": "token_contract",
    "erc_20": "token_contract",
    "airdrop": "airdrop_distributor",
    "distributor": "airdrop_distributor",
    "merkle_distributor": "airdrop_distributor",
}

# Services: their flow is not a person's flow (pass-through and structuring
# skip them).
SERVICE_CATEGORIES = frozenset(
    {
        "exchange", "wallet_service", "market", "shop", "mixing_service", "coinjoin", "gambling",
        "payment_processor", "atm", "mining_service", "faucet", "hosting", "vpn", "defi", "defi_dex",
        "defi_lending", "defi_bridge", "defi_derivative", "otc_desk", "instant_exchanger",
        "market_maker", "token_contract", "airdrop_distributor",
    }
)  # fmt: skip

# Where a trace ends by default: a service that takes custody or breaks the
# trail. A bridge ends a trace only when its far leg is unresolved, and a DEX
# only where the trail ends there (the tracer decides both).
ENDPOINT_CATEGORIES = (
    "exchange", "otc_desk", "instant_exchanger", "mixing_service", "coinjoin", "payment_processor",
    "gambling", "sanction", "market", "atm",
)  # fmt: skip

# Who can fund a fresh address without the funder being a person of the case
# (DOMAIN.md §3.7): mixers, bridges, instant exchangers, exchanges, OTC desks.
FUNDING_CATEGORIES = (
    "mixing_service",
    "coinjoin",
    "defi_bridge",
    "instant_exchanger",
    "exchange",
    "otc_desk",
)


def _key(raw: str) -> str:
    return re.sub(r"[\s\-/.]+", "_", raw.strip().lower()).strip("_")


def normalise_category(raw: str | None) -> tuple[str | None, bool]:
    """``(category, known)``: the canonical id and ``True``, or the raw spelling
    (trimmed) and ``False`` when no alias knows it. ``None``/blank stays ``None``."""
    if raw is None or not str(raw).strip():
        return None, True
    key = _key(str(raw))
    if key in CATEGORIES:
        return key, True
    if key in ALIASES:
        return ALIASES[key], True
    return str(raw).strip(), False
