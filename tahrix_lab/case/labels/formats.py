"""Label files recognised by their content, read into one column batch.

The formats (DOMAIN.md §4, the sources named in docs/case.md "Label library"):

* ``eth-labels-json``: the eth-labels dataset, one JSON array per label slug
  (``airdrop-distributor.json``: ``[{"address", "nameTag"}, …]``); the category is the
  file name.
* ``eth-labels-csv``: its CSV form, ``address,chainId,label,nameTag``.
* ``etherscan-export``: Etherscan's address-tag export (``"address";"nametag";…;"labels";
  "labels_slug";…;"lastupdatedtimestamp"``, semicolon separated); one label per slug.
* ``ofac-list``: an OFAC address list per chain or asset, a JSON array of strings or a TXT
  file of one address a line (``sanctioned_addresses_ETH.json``); the asset comes from the
  file name, or is given.
* ``ofac-sdn-xml``: OFAC's ``sdn_advanced.xml`` (Digital Currency Address features, with the
  party's name, programs and designation date) or the classic ``sdn.xml`` (``idType``).
* ``ofac-sdn-csv``: OFAC's ``sdn.csv`` (no header; the Remarks column carries
  ``Digital Currency Address - XBT 1abc…;``).
* ``labels-csv``: one's own CSV: ``address`` and at least one of ``name``/``label``/
  ``category``, optionally ``chain``, ``entity``, ``source``, ``confidence``, ``valid_from``,
  ``valid_to``, ``abuse``, ``overrides``.

Each reader appends to a ``Batch`` (parallel lists: a million labels stay cheap) and names
every row it cannot use by file, line and column; it never guesses an address.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import (
    parse as parse_xml,  # no entities, no DTD: a list file is attacker-reachable
)

from tahrix_lab.case.chains import CHAINS

FIELDS = (
    "line", "chain", "address", "label", "entity", "source_category", "source", "valid_from", "valid_to",
    "program", "asset", "confidence", "abuse", "overrides",
)  # fmt: skip

# OFAC's asset tickers (the ``Digital Currency Address - <TICKER>`` feature) → chain. Tokens
# (USDT, USDC) live on several chains: their chain comes from the address's form.
OFAC_ASSETS: dict[str, str | None] = {
    "ETH": "ethereum", "XBT": "bitcoin", "BTC": "bitcoin", "TRX": "tron", "BSC": "bsc", "ARB": "arbitrum",
    "USDT": None, "USDC": None, "ETC": "ethereum_classic", "LTC": "litecoin", "BCH": "bitcoin_cash",
    "BSV": "bitcoin_sv", "BTG": "bitcoin_gold", "XMR": "monero", "ZEC": "zcash", "DASH": "dash", "XRP": "xrp",
    "XVG": "verge", "SOL": "solana", "ETHW": "ethereum",
}  # fmt: skip
EVM_IDS = {c.evm_chain_id: c.name for c in CHAINS.values() if c.evm_chain_id}
_EVM_RE = re.compile(r"^0x[0-9a-fA-F]{40}$")
_TRON_RE = re.compile(r"^T[1-9A-HJ-NP-Za-km-z]{33}$")
_DCA_RE = re.compile(r"Digital Currency Address - ([A-Za-z0-9]+)[\s:]+([^\s;,]+)")


@dataclass
class Bad:
    file: str
    line: int | None
    column: str | None
    reason: str

    def __str__(self) -> str:
        where = self.file + (f", line {self.line}" if self.line is not None else "")
        return f"{where}{f', column {self.column!r}' if self.column else ''}: {self.reason}"


@dataclass
class Batch:
    """Labels read from one file, as parallel lists (``FIELDS``), as written: the loader checks
    and normalises every row in SQL, one mechanism for every format (``loaders._check``)."""

    file: str
    format: str
    source: str
    source_version: str | None = None
    addr_column: str = "address"  # the file's columns a bad row is named by
    chain_column: str = "chain"
    cols: dict[str, list[Any]] = field(default_factory=lambda: {f: [] for f in FIELDS})
    bad: list[Bad] = field(default_factory=list)
    read: int = 0

    def add(self, line: int | None, chain: str | None, address: Any, **kw: Any) -> None:
        """One row; ``chain`` as the file names it (None: from the address's form)."""
        self.read += 1
        c = self.cols
        c["line"].append(line)
        c["chain"].append(chain)
        c["address"].append(address if isinstance(address, str) else None)
        for f in FIELDS[3:]:
            v = kw.get(f)
            c[f].append((v.strip() or None) if isinstance(v, str) else v)

    def __len__(self) -> int:
        return len(self.cols["address"])


def chain_of(address: str) -> str | None:
    """The chain an address's form names when nothing else does (EVM hex is read as Ethereum)."""
    if _EVM_RE.match(address):
        return "ethereum"
    if _TRON_RE.match(address):
        return "tron"
    if address.startswith(("bc1", "1", "3")) and 25 <= len(address) <= 90:
        return "bitcoin"
    return None


def _date(text: str | None) -> str | None:
    """A date as ISO text from the forms the sources write (ISO, ``MM/DD/YYYY``, unix seconds)."""
    if not text or not text.strip():
        return None
    t = text.strip()
    if t.isdigit() and len(t) >= 9:
        return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    m = re.match(r"^(\d{1,2})/(\d{1,2})/(\d{4})$", t)
    if m:
        return f"{m[3]}-{int(m[1]):02d}-{int(m[2]):02d}"
    return t


# -- recognising ----------------------------------------------------------------------------------
def sniff(path: Path) -> str:
    """The format of a label file, from its first bytes (and, for OFAC lists, its name)."""
    with path.open("rb") as fh:
        head = fh.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    name = path.name.lower()
    if head.startswith("<"):
        return "ofac-sdn-xml"
    if head.startswith("["):
        body = head[1:].lstrip()
        # OFAC lists are arrays of strings; eth-labels files arrays of objects
        return (
            "ofac-list"
            if body.startswith('"') or (body.startswith("]") and "sanction" in name)
            else ("eth-labels-json")
        )
    first = head.splitlines()[0] if head else ""
    low = first.lower().replace('"', "").replace(" ", "")
    if low.startswith("address;nametag") or ("labels_slug" in low and "nametag" in low):
        return "etherscan-export"
    if {"address", "chainid", "label", "nametag"} <= set(low.split(",")):
        return "eth-labels-csv"
    if low.startswith(("address,", "address;")) or ",address," in f",{low},":
        return "labels-csv"
    if "digital currency address" in head.lower() or re.match(r"^\d+,", first):
        return "ofac-sdn-csv"
    if "sanction" in name or all(chain_of(x.strip()) for x in head.splitlines()[:5] if x.strip()):
        return "ofac-list"
    return "unknown"


# -- readers ----------------------------------------------------------------------------------------
def read_eth_labels_json(b: Batch, path: Path, chain: str | None) -> None:
    slug = path.stem
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    if not isinstance(data, list):
        b.bad.append(Bad(b.file, None, None, "expected a JSON array of {address, nameTag}"))
        return
    # JSON has no record lines: a row is named by its position in the array (1 = first)
    for i, e in enumerate(data, 1):
        if not isinstance(e, dict):
            b.read += 1
            b.bad.append(Bad(b.file, i, None, "entry is not an object"))
            continue
        tag = e.get("nameTag") or e.get("name") or e.get("label")
        b.add(i, chain or "ethereum", e.get("address"), label=tag, source_category=slug)


def read_eth_labels_csv(b: Batch, path: Path, chain: str | None) -> None:
    b.chain_column = "chainId"
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            line = reader.line_num
            cid = (row.get("chainId") or "").strip()
            ch = chain or (EVM_IDS.get(int(cid), cid) if cid.isdigit() else "ethereum")
            tag = row.get("nameTag")
            b.add(
                line,
                ch,
                row.get("address"),
                label=tag,
                source_category=row.get("label"),
            )


def read_etherscan_export(b: Batch, path: Path, chain: str | None) -> None:
    text = path.read_text(encoding="utf-8-sig")
    delim = ";" if text.split("\n", 1)[0].count(";") >= text.split("\n", 1)[0].count(",") else ","
    reader = csv.DictReader(io.StringIO(text), delimiter=delim)
    for row in reader:
        line = reader.line_num
        tag = row.get("nametag") or row.get("internal_nametag")
        slugs = [s.strip() for s in (row.get("labels_slug") or "").split(",") if s.strip()] or [None]
        names = [s.strip() for s in (row.get("labels") or "").split(",")]
        for i, slug in enumerate(slugs):  # an address in several categories: one label each
            b.add(
                line,
                chain or "ethereum",
                row.get("address"),
                label=tag,
                source_category=slug or (names[i] if i < len(names) else None) or None,
            )


def read_ofac_list(b: Batch, path: Path, chain: str | None, asset: str | None) -> None:
    m = re.search(r"sanctioned_addresses_([A-Za-z0-9]+)", path.name)
    asset = (asset or (m[1] if m else "")).upper() or None
    fixed = chain or (OFAC_ASSETS.get(asset) if asset else None)
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("["):
        data = json.loads(text)
        items: Iterator[tuple[int, Any]] = enumerate(data, 1)
    else:
        items = ((n, s) for n, s in enumerate(text.splitlines(), 1) if s.strip() and not s.startswith("#"))
    for line, addr in items:
        b.add(
            line,
            fixed,
            addr,
            label="OFAC SDN listed address",
            source_category="SDN",
            asset=asset,
            abuse="sanction",
        )


def read_sdn_xml(b: Batch, path: Path, chain: str | None) -> None:
    b.addr_column = "VersionDetail"
    root = parse_xml(path).getroot()
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    if root.tag.endswith("sdnList"):
        _read_classic_sdn(b, root, ns, chain)
        return
    d = root.find(f"{ns}DateOfIssue")
    if d is not None:
        b.source_version = _ymd(d, ns)
    ftypes = {
        ft.get("ID"): (ft.text or "").strip()
        for ft in root.iter(f"{ns}FeatureType")
        if (ft.text or "").startswith("Digital Currency Address")
    }
    programs: dict[str, list[str]] = {}
    dates: dict[str, str] = {}
    for entry in root.iter(f"{ns}SanctionsEntry"):
        pid = entry.get("ProfileID") or ""
        programs[pid] = sorted(
            c.text.strip() for c in entry.iter(f"{ns}Comment") if c.text and c.text.strip()
        )
        ev = entry.find(f"{ns}EntryEvent/{ns}Date")
        if ev is not None:
            dates[pid] = _ymd(ev, ns)
    for profile in root.iter(f"{ns}Profile"):
        pid = profile.get("ID") or ""
        name = _primary_name(profile, ns)
        for feat in profile.iter(f"{ns}Feature"):
            ftype = ftypes.get(feat.get("FeatureTypeID"))
            if ftype is None:
                continue
            asset = ftype.rsplit("-", 1)[-1].strip().upper()
            for det in feat.iter(f"{ns}VersionDetail"):
                b.add(None, chain or OFAC_ASSETS.get(asset), det.text, label=name,
                      entity=name, source_category="SDN", program="; ".join(programs.get(pid, [])) or None,
                      asset=asset, valid_from=dates.get(pid), abuse="sanction")  # fmt: skip


def _ymd(el: ET.Element, ns: str) -> str:
    y, m, d = (el.findtext(f"{ns}{k}") or "1" for k in ("Year", "Month", "Day"))
    return f"{int(y):04d}-{int(m):02d}-{int(d):02d}"


def _primary_name(profile: ET.Element, ns: str) -> str | None:
    aliases = list(profile.iter(f"{ns}Alias"))
    for alias in sorted(aliases, key=lambda a: a.get("Primary") != "true"):
        parts = [v.text.strip() for v in alias.iter(f"{ns}NamePartValue") if v.text and v.text.strip()]
        if parts:
            return " ".join(parts)
    return None


def _read_classic_sdn(b: Batch, root: ET.Element, ns: str, chain: str | None) -> None:
    b.addr_column = "idNumber"
    b.source_version = _date(root.findtext(f"{ns}publshInformation/{ns}Publish_Date"))
    for entry in root.iter(f"{ns}sdnEntry"):
        name = " ".join(
            x for x in (entry.findtext(f"{ns}firstName"), entry.findtext(f"{ns}lastName")) if x and x.strip()
        ) or None  # fmt: skip
        progs = "; ".join(sorted(p.text.strip() for p in entry.iter(f"{ns}program") if p.text)) or None
        for ident in entry.iter(f"{ns}id"):
            itype = ident.findtext(f"{ns}idType") or ""
            if not itype.startswith("Digital Currency Address"):
                continue
            asset = itype.rsplit("-", 1)[-1].strip().upper()
            b.add(None, chain or OFAC_ASSETS.get(asset), ident.findtext(f"{ns}idNumber"),
                  label=name, entity=name, source_category="SDN", program=progs, asset=asset, abuse="sanction")  # fmt: skip


def read_sdn_csv(b: Batch, path: Path, chain: str | None) -> None:
    """``sdn.csv``: ent_num, SDN_Name, SDN_Type, Program, Title, …, Remarks (OFAC writes ``-0-`` for empty)."""
    b.addr_column = "Remarks"
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
        reader = csv.reader(fh)
        for row in reader:
            line = reader.line_num
            if len(row) < 12:
                continue  # the end-of-file marker and blank lines
            name = row[1].strip() or None
            program = row[3].strip().replace("] [", "; ").strip("[] ") or None
            for m in _DCA_RE.finditer(row[11]):
                asset = m[1].upper()
                b.add(line, chain or OFAC_ASSETS.get(asset), m[2], label=name, entity=name,
                      source_category="SDN", program=None if program == "-0-" else program, asset=asset,
                      abuse="sanction")  # fmt: skip


_TRUE = {"1", "true", "yes", "y", "t"}


def read_labels_csv(b: Batch, path: Path, chain: str | None) -> None:
    text = path.read_text(encoding="utf-8-sig")
    first = text.split("\n", 1)[0]
    reader = csv.DictReader(io.StringIO(text), delimiter=";" if first.count(";") > first.count(",") else ",")
    reader.fieldnames = [f.strip().lower().replace(" ", "_") for f in reader.fieldnames or []]
    for row in reader:
        line = reader.line_num
        ch = (row.get("chain") or row.get("network") or "").strip() or chain
        name = row.get("name") or row.get("label") or row.get("name_tag") or row.get("nametag")
        b.add(line, ch, row.get("address"), label=name, entity=row.get("entity"),
              source_category=row.get("category"), source=row.get("source"), valid_from=_date(row.get("valid_from")),
              valid_to=_date(row.get("valid_to")), confidence=row.get("confidence"), abuse=row.get("abuse"),
              overrides=(row.get("overrides") or row.get("override") or "").strip().lower() in _TRUE)  # fmt: skip


DEFAULT_SOURCES = {
    "eth-labels-json": "eth-labels",
    "eth-labels-csv": "eth-labels",
    "etherscan-export": "etherscan",
    "ofac-list": "ofac-sdn",
    "ofac-sdn-xml": "ofac-sdn",
    "ofac-sdn-csv": "ofac-sdn",
    "labels-csv": "own",
}
# graphsense confidence ids (DOMAIN.md §4) and their levels, per format
CONFIDENCE = {
    "eth-labels-json": ("web_crawl", 20),
    "eth-labels-csv": ("web_crawl", 20),
    "etherscan-export": ("trusted_provider", 50),
    "ofac-list": ("authority_data", 60),
    "ofac-sdn-xml": ("authority_data", 60),
    "ofac-sdn-csv": ("authority_data", 60),
    "labels-csv": ("forensic", 50),
}
LEVELS = {
    "override": 100, "ownership": 100, "manual_transaction": 90, "service_api": 70, "authority_data": 60,
    "trusted_provider": 50, "service_data": 50, "forensic": 50, "untrusted_transaction": 40, "web_crawl": 20,
    "heuristic": 10, "unknown": 5,
}  # fmt: skip


def read_file(
    path: Path, *, chain: str | None = None, asset: str | None = None, source: str | None = None
) -> Batch:
    """Read one label file of any known format; an unknown format is one bad row naming it."""
    fmt = sniff(path)
    b = Batch(file=str(path), format=fmt, source=source or DEFAULT_SOURCES.get(fmt, "unknown"))
    try:
        if fmt == "eth-labels-json":
            read_eth_labels_json(b, path, chain)
        elif fmt == "eth-labels-csv":
            read_eth_labels_csv(b, path, chain)
        elif fmt == "etherscan-export":
            read_etherscan_export(b, path, chain)
        elif fmt == "ofac-list":
            read_ofac_list(b, path, chain, asset)
        elif fmt == "ofac-sdn-xml":
            read_sdn_xml(b, path, chain)
        elif fmt == "ofac-sdn-csv":
            read_sdn_csv(b, path, chain)
        elif fmt == "labels-csv":
            read_labels_csv(b, path, chain)
        else:
            b.bad.append(Bad(b.file, None, None, "not a label format this loader knows (see docs/case.md)"))
    except (json.JSONDecodeError, ET.ParseError, DefusedXmlException, UnicodeDecodeError, csv.Error) as exc:
        b.bad.append(Bad(b.file, getattr(exc, "lineno", None), None, f"cannot be read as {fmt}: {exc}"))
    return b
