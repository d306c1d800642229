"""Export fixtures written by the tests, shaped like the real files (imported by name;
conftest puts this folder on sys.path).

Headers follow the real exports (privatefolio's Etherscan parsers, the
ethereum-etl schema): Etherscan normal / internal / ERC-20 / ERC-721 /
ERC-1155 / token-page, with the quirks real downloads have (BOM, CRLF, a
trailing empty field on internal rows, thousands separators, ``$``, ``N/A``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

USDT = "0xdac17f958d2ee523a2206206994597c13d831ec7"  # 6 decimals
WBTC = "0x2260fac5e5542a773aa44fbcfedf7c193bc2c599"  # 8
DAI = "0x6b175474e89094c44da98b954eedeac495271d0f"  # 18
NINE = "0x" + "9" * 40  # a token the shipped table does not know (9 decimals via tokens.csv)
T0 = 1710209640


def h(n: int) -> str:
    return "0x" + f"{n:064x}"


def a(n: int) -> str:
    return "0x" + f"{n:040x}"


def mixed(addr: str) -> str:
    """An address as explorers print it (EIP-55-ish mixed case)."""
    return addr[:2] + "".join(c.upper() if i % 2 else c for i, c in enumerate(addr[2:]))


def normal_header(symbol: str = "ETH", hash_col: str = "Txhash", price: str = "Eth") -> list[str]:
    return [hash_col, "Blockno", "UnixTimestamp", "DateTime (UTC)", "From", "To", "ContractAddress",
            f"Value_IN({symbol})", f"Value_OUT({symbol})", f"CurrentValue @ $3500/{price}", f"TxnFee({symbol})",
            "TxnFee(USD)", f"Historical $Price/{price}", "Status", "ErrCode", "Method"]  # fmt: skip


def internal_header(symbol: str = "ETH", price: str = "Eth") -> list[str]:
    return ["Txhash", "Blockno", "UnixTimestamp", "DateTime (UTC)", "ParentTxFrom", "ParentTxTo",
            f"ParentTx{symbol}_Value", "From", "TxTo", "ContractAddress", f"Value_IN({symbol})",
            f"Value_OUT({symbol})", "CurrentValue", f"Historical $Price/{price}", "Status", "ErrCode", "Type"]  # fmt: skip


ERC20_HEADER = ["Txhash", "Blockno", "UnixTimestamp", "DateTime (UTC)", "From", "To", "TokenValue",
                "USDValueDayOfTx", "ContractAddress", "TokenName", "TokenSymbol"]  # fmt: skip
ERC721_HEADER = ["Txhash", "Blockno", "UnixTimestamp", "DateTime (UTC)", "From", "To", "ContractAddress",
                 "TokenId", "TokenName", "TokenSymbol"]  # fmt: skip
ERC1155_HEADER = ["Txhash", "Blockno", "UnixTimestamp", "DateTime (UTC)", "From", "To", "ContractAddress",
                  "TokenId", "TokenValue", "TokenName", "TokenSymbol"]  # fmt: skip
TOKEN_PAGE_HEADER = [
    "Txhash",
    "Blockno",
    "UnixTimestamp",
    "DateTime (UTC)",
    "From",
    "To",
    "Quantity",
    "Method",
]


def when(i: int) -> tuple[str, str]:
    from datetime import UTC, datetime

    t = T0 + 12 * i
    return str(t), datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def write_csv(
    path: Path,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    bom: bool = False,
    crlf: bool = False,
    trailing: bool = False,
) -> Path:
    """Quote every field as Etherscan does; optionally a BOM, CRLF, one trailing empty field per data row."""

    def line(fields: Sequence[str], extra: bool) -> str:
        out = ",".join('"' + f.replace('"', '""') + '"' for f in fields)
        return out + (',""' if extra else "")

    nl = "\r\n" if crlf else "\n"
    text = nl.join([line(header, False), *(line(r, trailing) for r in rows)]) + nl
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode())
    return path


def erc20_row(
    tx: int, frm: str, to: str, value: str, usd: str, token: str = USDT, symbol: str = "USDT"
) -> list[str]:
    unix, dt = when(tx)
    return [
        h(tx),
        str(19_000_000 + tx),
        unix,
        dt,
        mixed(frm),
        mixed(to),
        value,
        usd,
        mixed(token),
        symbol,
        symbol,
    ]


def normal_row(
    tx: int, frm: str, to: str, vin: str, vout: str, *, status: str = "", method: str = "Transfer"
) -> list[str]:
    unix, dt = when(tx)
    return [h(tx), str(19_000_000 + tx), unix, dt, mixed(frm), mixed(to), "", vin, vout, "1", "0.0021", "7.35",
            "3,900.12", status, "execution reverted" if status else "", method]  # fmt: skip
