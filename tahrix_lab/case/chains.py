"""The chains a case can hold, with the names analysts and tools use for them.

``resolve_chain("matic")`` gives ``"polygon"``; a name no chain answers to is
a clear error listing the known ones (``--chain arbitrumm`` is refused, not
stored as a new chain). The rows match the ``chains`` table of migration
``0001_case_core``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tahrix_lab.agent.errors import UserFacingError


@dataclass(frozen=True)
class Chain:
    name: str
    family: str  # evm | tron | utxo
    evm_chain_id: int | None
    native_symbol: str
    native_decimals: int
    aliases: tuple[str, ...] = ()
    # the native symbols an explorer export of this chain may name in ``Value_IN(…)``
    export_symbols: tuple[str, ...] = ()


CHAINS: dict[str, Chain] = {
    c.name: c
    for c in (
        Chain("ethereum", "evm", 1, "ETH", 18, ("eth", "mainnet", "ethereum_mainnet", "homestead", "etherscan"),
              ("ETH",)),
        Chain("bsc", "evm", 56, "BNB", 18, ("bnb", "binance", "bnb_chain", "bnb_smart_chain", "bsc_mainnet",
                                            "bscscan"), ("BNB",)),
        Chain("polygon", "evm", 137, "POL", 18, ("matic", "polygon_pos", "pol", "polygonscan"), ("MATIC", "POL")),
        Chain("arbitrum", "evm", 42161, "ETH", 18, ("arb", "arbitrum_one", "arb1", "arbiscan"), ("ETH",)),
        Chain("optimism", "evm", 10, "ETH", 18, ("op", "optimism_mainnet", "op_mainnet", "optimistic_etherscan"),
              ("ETH",)),
        Chain("avalanche_c", "evm", 43114, "AVAX", 18, ("avax", "avalanche", "c_chain", "avalanche_c_chain",
                                                        "snowtrace"), ("AVAX",)),
        Chain("base", "evm", 8453, "ETH", 18, ("base_mainnet", "basescan"), ("ETH",)),
        Chain("tron", "tron", None, "TRX", 6, ("trx", "tronscan"), ("TRX",)),
        Chain("bitcoin", "utxo", None, "BTC", 8, ("btc", "xbt"), ("BTC",)),
    )
}  # fmt: skip

EVM_CHAINS = tuple(n for n, c in CHAINS.items() if c.family == "evm")

_ALIASES: dict[str, str] = {a: c.name for c in CHAINS.values() for a in (c.name, *c.aliases)}


def _key(name: str) -> str:
    return re.sub(r"[\s\-./]+", "_", name.strip().lower()).strip("_")


def resolve_chain(name: str | None) -> str:
    """The registry name of a chain given any of its known spellings."""
    found = _ALIASES.get(_key(name or ""))
    if found is None:
        known = ", ".join(f"{c.name} ({', '.join(c.aliases[:3])})" for c in CHAINS.values())
        raise UserFacingError(f"Unknown chain {name!r}. Known chains (with some aliases): {known}.")
    return found


def chains_for_symbol(symbol: str) -> list[str]:
    """The chains whose explorer exports name this native symbol (``BNB`` → ``bsc``)."""
    s = symbol.strip().upper()
    return [c.name for c in CHAINS.values() if s in c.export_symbols]
