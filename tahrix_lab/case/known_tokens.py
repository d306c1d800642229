"""Well-known token contracts and their decimals, for exports that do not say.

Etherscan token exports and ethereum-etl ``token_transfers`` carry no
decimals. A token listed here (or in the ``assets`` table, or in an
ethereum-etl ``tokens.csv``) gets exact amounts; any other token's amount
stays unknown and is counted in the load report — never assumed to be 18.
Bridged stablecoins are different contracts per chain, and BSC's USDT and
USDC have 18 decimals, not 6: the table is per chain on purpose.
"""

from __future__ import annotations

# (chain, lower-cased contract) -> (symbol, decimals, canonical asset)
KNOWN_TOKENS: dict[tuple[str, str], tuple[str, int, str]] = {
    ("ethereum", "0xdac17f958d2ee523a2206206994597c13d831ec7"): ("USDT", 6, "USDT"),
    ("ethereum", "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"): ("USDC", 6, "USDC"),
    ("ethereum", "0x6b175474e89094c44da98b954eedeac495271d0f"): ("DAI", 18, "DAI"),
    ("ethereum", "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2"): ("WETH", 18, "ETH"),
    ("ethereum", "0x2260fac5e5542a773aa44fbcfedf7c193bc2c599"): ("WBTC", 8, "BTC"),
    ("ethereum", "0x514910771af9ca656af840dff83e8264ecf986ca"): ("LINK", 18, "LINK"),
    ("ethereum", "0x1f9840a85d5af5bf1d1762f925bdaddc4201f984"): ("UNI", 18, "UNI"),
    ("ethereum", "0x95ad61b0a150d79219dcf64e1e6cc01f0b64c4ce"): ("SHIB", 18, "SHIB"),
    ("ethereum", "0x6982508145454ce325ddbe47a25d4ec3d2311933"): ("PEPE", 18, "PEPE"),
    ("ethereum", "0xae7ab96520de3a18e5e111b5eaab095312d7fe84"): ("stETH", 18, "ETH"),
    ("ethereum", "0x4fabb145d64652a948d72533023f6e7a623c7c53"): ("BUSD", 18, "BUSD"),
    ("bsc", "0x55d398326f99059ff775485246999027b3197955"): ("USDT", 18, "USDT"),
    ("bsc", "0x8ac76a51cc950d9822d68b83fe1ad97b32cd580d"): ("USDC", 18, "USDC"),
    ("bsc", "0xbb4cdb9cbd36b01bd1cbaebf2de08d9173bc095c"): ("WBNB", 18, "BNB"),
    ("bsc", "0xe9e7cea3dedca5984780bafc599bd69add087d56"): ("BUSD", 18, "BUSD"),
    ("polygon", "0x2791bca1f2de4661ed88a30c99a7a9449aa84174"): ("USDC.e", 6, "USDC"),
    ("polygon", "0x3c499c542cef5e3811e1192ce70d8cc03d5c3359"): ("USDC", 6, "USDC"),
    ("polygon", "0xc2132d05d31c914a87c6611c10748aeb04b58e8f"): ("USDT", 6, "USDT"),
    ("polygon", "0x0d500b1d8e8ef31e21c99d1db9a6444d3adf1270"): ("WMATIC", 18, "POL"),
    ("polygon", "0x7ceb23fd6bc0add59e62ac25578270cff1b9f619"): ("WETH", 18, "ETH"),
    ("arbitrum", "0xaf88d065e77c8cc2239327c5edb3a432268e5831"): ("USDC", 6, "USDC"),
    ("arbitrum", "0xff970a61a04b1ca14834a43f5de4533ebddb5cc8"): ("USDC.e", 6, "USDC"),
    ("arbitrum", "0xfd086bc7cd5c481dcc9c85ebe478a1c0b69fcbb9"): ("USDT", 6, "USDT"),
    ("arbitrum", "0x82af49447d8a07e3bd95bd0d56f35241523fbab1"): ("WETH", 18, "ETH"),
    ("arbitrum", "0x912ce59144191c1204e64559fe8253a0e49e6548"): ("ARB", 18, "ARB"),
    ("optimism", "0x0b2c639c533813f4aa9d7837caf62653d097ff85"): ("USDC", 6, "USDC"),
    ("optimism", "0x94b008aa00579c1307b0ef2c499ad98a8ce58e58"): ("USDT", 6, "USDT"),
    ("optimism", "0x4200000000000000000000000000000000000006"): ("WETH", 18, "ETH"),
    ("optimism", "0x4200000000000000000000000000000000000042"): ("OP", 18, "OP"),
    ("base", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"): ("USDC", 6, "USDC"),
    ("base", "0x4200000000000000000000000000000000000006"): ("WETH", 18, "ETH"),
    ("avalanche_c", "0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e"): ("USDC", 6, "USDC"),
    ("avalanche_c", "0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"): ("USDT", 6, "USDT"),
    ("avalanche_c", "0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7"): ("WAVAX", 18, "AVAX"),
    ("tron", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"): ("USDT", 6, "USDT"),
}


def known_rows() -> list[tuple[str, str, str, int, str]]:
    """``(asset_key, chain, symbol, decimals, canonical_asset)`` for a SQL VALUES table."""
    return [(f"{ch}:{addr}", ch, sym, dec, canon) for (ch, addr), (sym, dec, canon) in KNOWN_TOKENS.items()]
