"""Finding the citations in an answer: hashes, addresses, amounts, times and record ids.

``find_citations(text, symbols)`` scans Markdown as plain text (code spans,
links and line breaks need no parsing: the patterns carry their own
boundaries) and returns one ``Citation`` per distinct value, with every place
it occurs. Kinds:

* ``tx``: an EVM hash (``0x`` + 64 hex) or a bare 64-hex hash (Bitcoin, Tron);
* ``address``: EVM (``0x`` + 40 hex, any case), Tron (``T`` + 33 base58),
  Bitcoin (bech32 ``bc1…`` or base58 ``1…``/``3…``);
* ``short``: a shortened hash or address (``0x3373…3eb2``, ``0x3373...3eb2``);
* ``amount``: a number with an asset symbol (``1,200 ETH``, ``21.5M USDC``);
* ``usd``: ``$131,663,290``, ``$4.2M``, ``1.5 million USD``;
* ``block``: ``block 19,432,100``; ``time``: ``2024-03-12 02:14 UTC``;
* ``id``: a flag, label, bridge-event, audit or note id (``FLG-…``, ``LBL-…``, ``BR-…``, ``AUD-…``, ``NOTE-…``).

A number's ``unit`` is the size of its last shown digit (``4.2M`` → 100,000):
the checker reads "verified" within half a unit, as a reader of the rounded
figure would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tahrix_lab.case.chains import CHAINS

B58 = "1-9A-HJ-NP-Za-km-z"
_HEX = "0-9a-fA-F"
# Asset symbols recognised without asking the case (the case's own symbols are added).
COMMON_SYMBOLS = ("ETH", "WETH", "BTC", "WBTC", "USDT", "USDC", "DAI", "BNB", "TRX", "POL", "MATIC", "AVAX")
_SCALE = {
    "k": Decimal(1_000), "thousand": Decimal(1_000), "m": Decimal(1_000_000), "mn": Decimal(1_000_000),
    "million": Decimal(1_000_000), "b": Decimal(1_000_000_000), "bn": Decimal(1_000_000_000),
    "billion": Decimal(1_000_000_000),
}  # fmt: skip
_NUM_BODY = r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:\s?(k|K|M|mn|B|bn|thousand|million|billion)\b)?"
_NUM = r"(?<![\w.,$])" + _NUM_BODY
_CHAIN_WORDS = {a: c.name for c in CHAINS.values() for a in (c.name, *c.aliases)} | {
    "bnb chain": "bsc", "binance smart chain": "bsc", "tron": "tron", "bitcoin": "bitcoin",
}  # fmt: skip
_CHAIN_RE = re.compile(
    r"\b("
    + "|".join(sorted((re.escape(w) for w in _CHAIN_WORDS if len(w) > 2), key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)

# (kind, pattern): earlier kinds win where matches overlap.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("tx", re.compile(rf"(?<![{_HEX}xX])0x[{_HEX}]{{64}}(?![{_HEX}])")),
    ("tx", re.compile(rf"(?<![\w])[{_HEX}]{{64}}(?![\w])")),
    ("address", re.compile(rf"(?<![{_HEX}xX])0x[{_HEX}]{{40}}(?![\w])")),
    ("address", re.compile(rf"(?<![\w])T[{B58}]{{33}}(?![\w])")),
    ("address", re.compile(r"(?<![\w])(?:bc1|BC1)[02-9ac-hj-np-zAC-HJ-NP-Z]{11,71}(?![\w])")),
    ("address", re.compile(rf"(?<![\w])[13][{B58}]{{25,34}}(?![\w])")),
    ("short", re.compile(rf"(?<![\w])(0x[{_HEX}]{{2,16}}|bc1[02-9ac-hj-np-z]{{2,16}}|T[{B58}]{{2,16}})"
                         rf"(?:…|\.{{2,3}})([{_HEX}]{{3,16}}|[{B58}]{{3,16}})(?![\w])")),
    ("id", re.compile(r"(?<![\w-])(?:FLG-[0-9a-f]{10}|LBL-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?|BR-\d+|AUD-[0-9a-f]{12}"
                      r"|NOTE-[0-9a-f]{10})(?![\w-])")),
    ("time", re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2})(:\d{2})?(?:\.\d+)?\s?(?:Z|UTC)?(?![\d:])")),
    ("usd", re.compile(r"(?:US)?\$\s?" + _NUM_BODY)),
    ("usd", re.compile(_NUM + r"\s?(?:USD|US dollars|dollars)\b")),
    ("block", re.compile(r"\bblock(?:\s+(?:number|height|no\.?))?\s*#?\s*(\d{1,3}(?:,\d{3})+|\d+)\b", re.I)),
]  # fmt: skip


@dataclass
class Citation:
    """One distinct cited value and every place it occurs (``spans``: [start, end) offsets)."""

    kind: str
    text: str
    value: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    number: Decimal | None = None  # amount, usd, block
    unit: Decimal | None = None  # size of the last shown digit
    symbol: str | None = None  # amount's asset
    chain: str | None = None  # a chain named just before the citation
    status: str = "not_found"
    match: dict[str, Any] | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "text": self.text,
            "value": self.value,
            "status": self.status,
        }
        if self.symbol:
            out["symbol"] = self.symbol
        if self.chain:
            out["chain_cited"] = self.chain
        out["spans"] = [list(s) for s in self.spans]
        out["match"] = self.match
        if self.note:
            out["note"] = self.note
        return out


def parse_number(whole: str, frac: str | None, scale: str | None) -> tuple[Decimal, Decimal]:
    """(value, unit) of ``21.5`` + ``M``: 21,500,000 shown to 100,000."""
    mult = _SCALE[scale.lower()] if scale else Decimal(1)
    digits = whole.replace(",", "") + ("." + frac if frac else "")
    unit = Decimal(1).scaleb(-len(frac)) if frac else Decimal(1)
    return Decimal(digits) * mult, unit * mult


def _amount_re(symbols: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(sorted((re.escape(s) for s in symbols), key=len, reverse=True))
    return re.compile(_NUM + r"\s?(" + alts + r")(?![\w])")


def _chain_before(text: str, start: int) -> str | None:
    """The chain named on the same line within a few words before ``start`` ("on BSC, tx 0x…")."""
    line_start = text.rfind("\n", 0, start) + 1
    window = text[max(line_start, start - 40) : start]
    found = list(_CHAIN_RE.finditer(window))
    return _CHAIN_WORDS.get(found[-1].group(1).lower()) if found else None


def find_citations(text: str, symbols: tuple[str, ...] = ()) -> list[Citation]:
    """Every citation in ``text``, one per distinct value, in order of first appearance."""
    syms = tuple(
        dict.fromkeys(s for s in (*COMMON_SYMBOLS, *symbols) if s and re.fullmatch(r"[A-Za-z0-9.]{2,12}", s))
    )
    patterns = [*_PATTERNS[:-1], ("amount", _amount_re(syms)), _PATTERNS[-1]]
    taken: list[tuple[int, int]] = []
    hits: list[tuple[int, int, str, re.Match[str]]] = []
    for kind, pattern in patterns:
        for m in pattern.finditer(text):
            s, e = m.span()
            if any(s < te and ts < e for ts, te in taken):
                continue
            taken.append((s, e))
            hits.append((s, e, kind, m))
    hits.sort(key=lambda h: h[0])
    out: dict[tuple[str, str], Citation] = {}
    for s, e, kind, m in hits:
        c = _citation(kind, m)
        if c is None:
            continue
        if kind in ("tx", "address", "short"):
            c.chain = _chain_before(text, s)
        found = out.setdefault((c.kind, c.value), c)
        found.chain = found.chain or c.chain  # the first chain named beside any of its mentions
        found.spans.append((s, e))
    return list(out.values())


def _citation(kind: str, m: re.Match[str]) -> Citation | None:
    raw = m.group(0)
    if kind == "tx" or (kind == "address" and raw[:2].lower() == "0x"):
        return Citation(kind, raw, raw.lower())
    if kind == "address":
        return Citation(kind, raw, raw.lower() if raw[:3].lower() == "bc1" else raw)
    if kind == "short":
        head, tail = m.group(1), m.group(2)
        lower = head[:2].lower() in ("0x", "bc")
        return Citation(kind, raw, (head.lower() + "…" + tail.lower()) if lower else head + "…" + tail)
    if kind == "id":
        return Citation(kind, raw, raw)
    if kind == "time":
        value = f"{m.group(1)} {m.group(2)}{m.group(3) or ''}"
        return Citation(kind, raw.strip(), value, unit=Decimal(1 if m.group(3) else 60))
    if kind == "block":
        n = Decimal(m.group(1).replace(",", ""))
        return Citation(kind, raw, str(n), number=n, unit=Decimal(1))
    number, unit = parse_number(m.group(1), m.group(2), m.group(3))
    if kind == "usd":
        return Citation(kind, raw.strip(), _plain(number), number=number, unit=unit)
    symbol = m.group(4).upper()
    return Citation(kind, raw, f"{_plain(number)} {symbol}", number=number, unit=unit, symbol=symbol)


def _plain(d: Decimal) -> str:
    return format(d.normalize(), "f")


__all__ = ["COMMON_SYMBOLS", "Citation", "find_citations", "parse_number"]
