"""Loading label files into the library: idempotent, with a report per file.

A label's identity is ``(source, chain, address, source category, entity)``: loading the
same list again changes nothing; a new version of a list updates the labels whose fields
changed (name, dates, version) and adds the new ones. Two rows of one load with the same
identity (an address twice in a list, in upper and lower case) are one label, counted as
duplicates. Labels a list no longer carries are kept: a library is a record of what each
source said as of its version (``tahrix labels sources`` shows the versions).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.chains import CHAINS, EVM_CHAINS, resolve_chain
from tahrix_lab.case.db import CaseDB, utcnow_naive
from tahrix_lab.case.labels.formats import (
    CONFIDENCE,
    DEFAULT_SOURCES,
    EVM_IDS,
    FIELDS,
    LEVELS,
    OFAC_ASSETS,
    Bad,
    Batch,
    read_file,
    sniff,
)
from tahrix_lab.case.loaders.sqlparts import lit, q
from tahrix_lab.case.taxonomy import normalise_category

# Categories that are an abuse as well (screen_exposure's lists read ``abuse`` too).
ABUSE_CATEGORIES = frozenset({"sanction", "scam", "phishing", "ransomware", "service_hack", "terrorism"})
OFAC_FORMATS = frozenset({"ofac-list", "ofac-sdn-xml", "ofac-sdn-csv"})
# the fields whose change makes a reload an update
COMPARED = (
    "label", "entity", "category", "source_category", "abuse", "source_version", "confidence", "confidence_level",
    "valid_from", "valid_to", "program", "asset", "overrides",
)  # fmt: skip


@dataclass
class FileLabels:
    file: str
    format: str
    source: str
    source_version: str | None
    read: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    duplicates: int = 0
    unknown_categories: dict[str, int] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)


@dataclass
class LabelLoadReport:
    """What ``load_labels`` did, per file (``files``) and in total."""

    files: list[FileLabels] = field(default_factory=list)

    def total(self, name: str) -> int:
        return sum(int(getattr(f, name)) for f in self.files)

    @property
    def unknown_categories(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            for k, v in f.unknown_categories.items():
                out[k] = out.get(k, 0) + v
        return out

    @property
    def bad(self) -> list[str]:
        return [b for f in self.files for b in f.bad]

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [asdict(f) for f in self.files],
            "totals": {k: self.total(k) for k in ("read", "new", "updated", "unchanged", "duplicates")}
            | {"bad": len(self.bad), "unknown_categories": self.unknown_categories},
        }

    def table(self) -> str:
        head = f"{'file':<40} {'format':<16} {'source':<12} {'version':<12} read    new  updated unchanged  dup  bad"
        lines = [head]
        for f in self.files:
            lines.append(
                f"{Path(f.file).name[:40]:<40} {f.format:<16} {f.source[:12]:<12} {(f.source_version or '-')[:12]:<12} "
                f"{f.read:>4} {f.new:>6} {f.updated:>8} {f.unchanged:>9} {f.duplicates:>4} {len(f.bad):>4}"
            )
        for cat, n in sorted(self.unknown_categories.items()):
            lines.append(f"unknown category kept as written: {cat!r} ({n} labels)")
        for b in self.bad[:50]:
            lines.append(f"bad row: {b}")
        if len(self.bad) > 50:
            lines.append(f"… and {len(self.bad) - 50} more bad rows")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_RAW = {
    "line": "BIGINT", "chain": "VARCHAR", "address": "VARCHAR", "label": "VARCHAR", "entity": "VARCHAR",
    "source_category": "VARCHAR", "source": "VARCHAR", "valid_from": "VARCHAR", "valid_to": "VARCHAR",
    "program": "VARCHAR", "asset": "VARCHAR", "confidence": "VARCHAR", "abuse": "VARCHAR", "overrides": "BOOLEAN",
    "file": "VARCHAR", "format": "VARCHAR", "source_version": "VARCHAR", "added_by": "VARCHAR", "ord": "BIGINT",
    "addr_col": "VARCHAR", "chain_col": "VARCHAR",
}  # fmt: skip
_STRIDE = 1 << 40  # ord = file number * _STRIDE + row: rows keep their file's order


def _meta(b: Batch, i: int, as_of: str | None, added_by: str | None) -> dict[str, Any]:
    return {"file": b.file, "format": b.format, "source_version": as_of or b.source_version, "added_by": added_by,
            "addr_col": b.addr_column, "chain_col": b.chain_column, "base": i * _STRIDE, "source": b.source}  # fmt: skip


def _stage_batch(cur: Any, b: Batch, meta: dict[str, Any]) -> None:
    """A batch the Python readers read, into ``_lab_raw``."""
    n = len(b)
    if not n:
        return
    cols: dict[str, list[Any]] = {f: b.cols[f] for f in FIELDS}
    for k in ("file", "format", "source_version", "added_by", "addr_col", "chain_col"):
        cols[k] = [meta[k]] * n
    cols["source"] = [x or meta["source"] for x in b.cols["source"]]
    cols["ord"] = list(range(meta["base"], meta["base"] + n))
    frame = pd.DataFrame(cols)
    cur.register("_lab_frame", frame)
    try:
        cur.execute(
            f"INSERT INTO _lab_raw SELECT {', '.join(f'CAST({c} AS {t})' for c, t in _RAW.items())} FROM _lab_frame"
        )
    finally:
        cur.unregister("_lab_frame")


# Columns a plain label CSV may name each field by (lower case, spaces as underscores).
_OWN_COLS = {
    "address": ("address",), "chain": ("chain", "network"), "label": ("name", "label", "name_tag", "nametag"),
    "entity": ("entity",), "source_category": ("category",), "source": ("source",), "valid_from": ("valid_from",),
    "valid_to": ("valid_to",), "confidence": ("confidence",), "abuse": ("abuse",),
    "overrides": ("overrides", "override"),
}  # fmt: skip


def _stage_csv(cur: Any, path: Path, meta: dict[str, Any], chain: str | None) -> int | None:
    """A big CSV format (own label CSV, eth-labels CSV) read by DuckDB into ``_lab_raw``: a million
    rows in seconds. None when DuckDB cannot read it so (the Python reader then does)."""
    fmt = meta["format"]
    with path.open("rb") as fh:
        first = fh.readline().decode("utf-8-sig", errors="replace")
    delim = ";" if first.count(";") > first.count(",") else ","
    src = f"read_csv({lit(str(path))}, header = true, all_varchar = true, delim = {lit(delim)}, quote = '\"')"
    try:
        names = [r[0] for r in cur.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
    except duckdb.Error:
        return None
    by = {n.strip().lower().replace(" ", "_"): n for n in names}

    def col(*keys: str) -> str:
        for k in keys:
            if k in by:
                return f"nullif(trim({q(by[k])}), '')"
        return "NULL"

    if fmt == "eth-labels-csv":
        ids = " ".join(f"WHEN '{cid}' THEN '{name}'" for cid, name in EVM_IDS.items())
        cid = col("chainid")
        fields = {"chain": lit(chain) if chain else f"CASE {cid} {ids} ELSE coalesce({cid}, 'ethereum') END",
                  "address": col("address"), "label": col("nametag"), "source_category": col("label")}  # fmt: skip
        meta = {**meta, "chain_col": "chainId"}
    else:
        fields = {f: col(*keys) for f, keys in _OWN_COLS.items()}
        if chain:
            fields["chain"] = f"coalesce({fields['chain']}, {lit(chain)})"
        fields["overrides"] = f"lower(coalesce({fields['overrides']}, '')) IN ('1', 'true', 'yes', 'y', 't')"
    consts = {k: lit(meta[k]) if meta[k] is not None else "NULL"
              for k in ("file", "format", "source_version", "added_by", "addr_col", "chain_col")}  # fmt: skip
    exprs = []
    for c, t in _RAW.items():
        if c == "line":
            e = "row_number() OVER () + 1"
        elif c == "ord":
            e = f"{meta['base']} + row_number() OVER ()"
        elif c == "source":
            e = f"coalesce({fields.get('source', 'NULL')}, {lit(meta['source'])})"
        elif c in consts:
            e = consts[c]
        else:
            e = fields.get(c, "NULL")
        exprs.append(f"CAST({e} AS {t})")
    try:
        cur.execute(f"INSERT INTO _lab_raw SELECT {', '.join(exprs)} FROM {src}")
    except duckdb.Error:
        cur.execute("DELETE FROM _lab_raw WHERE file = ?", [meta["file"]])
        return None
    return int(cur.execute("SELECT count(*) FROM _lab_raw WHERE file = ?", [meta["file"]]).fetchall()[0][0])


def _derive(cur: Any, reports: dict[str, FileLabels]) -> None:
    """``_lab_all``: the raw rows with the normalised category (an OFAC list's is ``sanction``), the
    abuse it implies, and the confidence (the format's unless the row names one) with its level."""
    raws = [r[0] for r in cur.execute(
        "SELECT DISTINCT source_category FROM _lab_raw WHERE source_category IS NOT NULL").fetchall()]  # fmt: skip
    mapped = [normalise_category(r) for r in raws]
    cur.execute("CREATE OR REPLACE TEMP TABLE _lab_cat (raw VARCHAR, category VARCHAR, known BOOLEAN)")
    if raws:
        cur.execute("INSERT INTO _lab_cat SELECT unnest($r), unnest($c), unnest($k)",
                    {"r": raws, "c": [m[0] for m in mapped], "k": [m[1] for m in mapped]})  # fmt: skip
    fmt_conf = " ".join(f"WHEN {lit(f)} THEN {lit(c)}" for f, (c, _) in CONFIDENCE.items())
    level = " ".join(f"WHEN {lit(c)} THEN {n}" for c, n in LEVELS.items())
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _lab_all AS
        SELECT r.* REPLACE (coalesce(r.confidence, CASE r.format {fmt_conf} ELSE 'unknown' END) AS confidence),
               CASE WHEN list_contains($ofac, r.format) THEN 'sanction' ELSE c.category END AS category,
               NOT list_contains($ofac, r.format) AND c.known IS FALSE AS unknown_cat
        FROM _lab_raw r LEFT JOIN _lab_cat c ON c.raw = r.source_category""",
        {"ofac": sorted(OFAC_FORMATS)},
    )
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _lab_all AS
        SELECT * REPLACE (coalesce(abuse, CASE WHEN list_contains($abuse, category) THEN category END) AS abuse,
                          coalesce(overrides, FALSE) AS overrides),
               CASE confidence {level} END AS confidence_level
        FROM _lab_all""",
        {"abuse": sorted(ABUSE_CATEGORIES)},
    )
    for file, cat, n in cur.execute(
        "SELECT file, category, count(*) FROM _lab_all WHERE unknown_cat GROUP BY ALL ORDER BY 1, 2"
    ).fetchall():
        reports[file].unknown_categories[cat] = int(n)


def load_labels(
    db: CaseDB,
    paths: Iterable[str | os.PathLike[str]],
    *,
    source: str | None = None,
    as_of: str | None = None,
    chain: str | None = None,
    asset: str | None = None,
    added_by: str | None = None,
) -> LabelLoadReport:
    """Load label files (any format ``formats`` knows) into the workspace's label library.

    ``source`` names the list (default per format: ``eth-labels``, ``etherscan``,
    ``ofac-sdn``, ``own``); ``as_of`` is its version or date when the file does not say;
    ``chain``/``asset`` fix what a file name or row does not. Bad rows are named in the
    report and skipped; everything else is stored."""
    files = [Path(p) for p in paths]
    for p in files:
        if not p.is_file():
            raise UserFacingError(f"No label file {str(p)!r}.")
    fixed_chain = resolve_chain(chain) if chain else None
    now = utcnow_naive()
    reports: dict[str, FileLabels] = {}
    with db.write_lock:  # staged outside the transaction: a CSV DuckDB cannot read falls back to Python
        cur = db.cursor()
        cur.execute(
            f"CREATE OR REPLACE TEMP TABLE _lab_raw ({', '.join(f'{c} {t}' for c, t in _RAW.items())})"
        )
        for i, p in enumerate(files):
            fmt = sniff(p)
            head = Batch(file=str(p), format=fmt, source=source or DEFAULT_SOURCES.get(fmt, "unknown"))
            n = None
            if fmt in ("labels-csv", "eth-labels-csv"):
                n = _stage_csv(cur, p, _meta(head, i, as_of, added_by), fixed_chain)
            if n is None:
                head = read_file(p, chain=fixed_chain, asset=asset, source=source)
                _stage_batch(cur, head, _meta(head, i, as_of, added_by))
                n = head.read
            reports[str(p)] = FileLabels(str(p), head.format, head.source, as_of or head.source_version, read=n,
                                         bad=[str(x) for x in head.bad])  # fmt: skip
        with db.write() as cur:
            _derive(cur, reports)
            _merge(cur, reports, now)
            for p in files:
                digest = _sha256(p)
                rep = reports[str(p)]
                seen = cur.execute(
                    "SELECT count(*) FROM label_sources WHERE source = ? AND sha256 = ? "
                    "AND source_version IS NOT DISTINCT FROM ?",
                    [rep.source, digest, rep.source_version],
                ).fetchall()[0][0]
                if not seen:  # a reload of the same file as the same version leaves no second entry
                    cur.execute(
                        "INSERT INTO label_sources VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [rep.source, rep.source_version, rep.format, str(p), digest, now, added_by,
                         json.dumps(asdict(rep))],
                    )  # fmt: skip
    return LabelLoadReport(list(reports.values()))


_EVM_SQL = "'^0x[0-9a-fA-F]{40}$'"
_TRON_SQL = "'^T[1-9A-HJ-NP-Za-km-z]{33}$'"


def _chain_names() -> dict[str, str]:
    """Every spelling of a chain (``chains.CHAINS`` aliases) and the chains OFAC lists name."""
    names = {a: c.name for c in CHAINS.values() for a in (c.name, *c.aliases)}
    names.update({c: c for c in OFAC_ASSETS.values() if c})
    return names


def _merge(cur: Any, reports: dict[str, FileLabels], now: Any) -> None:
    key = (
        "'LIB-' || substr(md5(concat_ws('|', source, chain, address, coalesce(source_category, ''), "
        "coalesce(entity, ''))), 1, 16)"
    )
    names = _chain_names()
    cur.execute("CREATE OR REPLACE TEMP TABLE _lab_chains (k VARCHAR, chain VARCHAR)")
    cur.execute(
        "INSERT INTO _lab_chains SELECT unnest($k), unnest($v)", {"k": list(names), "v": list(names.values())}
    )
    key_of = "trim(regexp_replace(lower(trim(r.chain_raw)), '[\\s\\-./]+', '_', 'g'), '_')"
    # the chain: as the file names it, else from the address's form (EVM hex is read as Ethereum)
    infer = (f"CASE WHEN regexp_matches(a, {_EVM_SQL}) THEN 'ethereum' WHEN regexp_matches(a, {_TRON_SQL}) "
             "THEN 'tron' WHEN regexp_matches(a, '^(bc1|1|3)[0-9A-Za-z]{24,88}$') THEN 'bitcoin' END")  # fmt: skip
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _lab_chk AS
        SELECT r.* EXCLUDE (chain_raw), CASE WHEN r.chain_raw IS NULL THEN {infer} ELSE m.chain END AS chain,
               r.chain_raw, m.chain IS NULL AND r.chain_raw IS NOT NULL AS chain_unknown
        FROM (SELECT * EXCLUDE (chain, address, unknown_cat), chain AS chain_raw, nullif(trim(address), '') AS a
              FROM _lab_all) r
        LEFT JOIN _lab_chains m ON m.k = {key_of}"""
    )
    evm = "list_contains($evm, chain)"
    reasons = (
        ("addr_col", "a IS NULL", "'no address'"),
        ("chain_col", "chain_unknown", "'unknown chain ' || chr(39) || chain_raw || chr(39)"),
        ("addr_col", "chain IS NULL", "'cannot tell the chain of ' || chr(39) || left(a, 60) || chr(39)"),
        ("addr_col", f"{evm} AND NOT regexp_matches(a, {_EVM_SQL})",
         "'not an EVM address: ' || chr(39) || left(a, 60) || chr(39)"),
        ("addr_col", f"chain = 'tron' AND NOT regexp_matches(a, {_TRON_SQL})",
         "'not a Tron address: ' || chr(39) || left(a, 60) || chr(39)"),
        ("'valid_from'", "valid_from IS NOT NULL AND TRY_CAST(valid_from AS TIMESTAMP) IS NULL", "'not a date'"),
        ("'valid_to'", "valid_to IS NOT NULL AND TRY_CAST(valid_to AS TIMESTAMP) IS NULL", "'not a date'"),
    )  # fmt: skip
    why = " ".join(f"WHEN {cond} THEN struct_pack(c := {col}, r := {msg})" for col, cond, msg in reasons)
    cur.execute(f"CREATE OR REPLACE TEMP TABLE _lab_bad AS SELECT ord, file, line, CASE {why} END AS why "
                "FROM _lab_chk", {"evm": list(EVM_CHAINS)})  # fmt: skip
    cur.execute("DELETE FROM _lab_bad WHERE why IS NULL")
    for file, line, col, reason in cur.execute(
        "SELECT file, line, why.c, why.r FROM _lab_bad ORDER BY ord"
    ).fetchall():
        reports[file].bad.append(str(Bad(file, line, col, reason)))
    cur.execute(
        """CREATE OR REPLACE TEMP TABLE _lab_in AS
        SELECT * EXCLUDE (a), CASE WHEN list_contains($evm, chain) THEN lower(a) ELSE a END AS address,
               TRY_CAST(valid_from AS TIMESTAMP) AS vf, TRY_CAST(valid_to AS TIMESTAMP) AS vt
        FROM _lab_chk ANTI JOIN _lab_bad USING (ord)""",
        {"evm": list(EVM_CHAINS)},
    )
    # an entity the label names ("Binance: Hot Wallet 6" → Binance), where the list gives none
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _lab_in AS SELECT * REPLACE (
              coalesce(entity, CASE WHEN NOT list_contains($ofac, format) AND position(':' IN label) > 1
                                    THEN nullif(trim(split_part(label, ':', 1)), '') END) AS entity),
              {key} AS label_id FROM _lab_in""",
        {"ofac": sorted(OFAC_FORMATS)},
    )
    cur.execute(
        """CREATE OR REPLACE TEMP TABLE _lab_one AS
        SELECT * EXCLUDE (rn) FROM (
          SELECT *, row_number() OVER (PARTITION BY label_id ORDER BY ord) AS rn FROM _lab_in)
        WHERE rn = 1"""
    )
    for file, n in cur.execute(
        "SELECT file, count(*) - count(DISTINCT label_id) FROM _lab_in GROUP BY file"
    ).fetchall():
        reports[file].duplicates = int(n)
    same = " AND ".join(
        f"o.{c} IS NOT DISTINCT FROM n.{'vf' if c == 'valid_from' else 'vt' if c == 'valid_to' else c}"
        for c in COMPARED
    )
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _lab_st AS
        SELECT n.*, o.loaded_at AS old_loaded,
               CASE WHEN o.label_id IS NULL THEN 'new' WHEN {same} THEN 'unchanged' ELSE 'updated' END AS st
        FROM _lab_one n LEFT JOIN label_library o ON o.label_id = n.label_id"""
    )
    for file, st, n in cur.execute("SELECT file, st, count(*) FROM _lab_st GROUP BY ALL").fetchall():
        setattr(reports[file], st, int(n))
    cur.execute(
        "DELETE FROM label_library WHERE label_id IN (SELECT label_id FROM _lab_st WHERE st = 'updated')"
    )
    cur.execute(
        """INSERT INTO label_library (label_id, chain, address, label, entity, category, source_category, abuse,
             source, source_version, confidence, confidence_level, valid_from, valid_to, program, asset, added_by,
             overrides, file, line, loaded_at, updated_at)
        SELECT label_id, chain, address, label, entity, category, source_category, abuse, source, source_version,
               confidence, confidence_level, vf, vt, program, asset, added_by, overrides, file, line,
               coalesce(old_loaded, $now), $now
        FROM _lab_st WHERE st <> 'unchanged'""",
        {"now": now},
    )
    for t in (
        "_lab_raw",
        "_lab_cat",
        "_lab_all",
        "_lab_chains",
        "_lab_chk",
        "_lab_bad",
        "_lab_in",
        "_lab_one",
        "_lab_st",
    ):
        cur.execute(f"DROP TABLE IF EXISTS {t}")
