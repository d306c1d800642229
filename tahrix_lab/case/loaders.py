"""Loaders: case folders (CSV or Parquet), Etherscan exports, ethereum-etl / BigQuery CSV.

Every loader is all-or-nothing: files are staged and checked first, then
written in one transaction; a bad file loads nothing and ``LoadError`` names
the file, line and column. Loading the same rows twice adds nothing (rows are
de-duplicated on their natural key). EVM addresses and hashes are lower-cased.
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.db import EVM_CHAINS, CaseDB, norm_address
from tahrix_lab.case.schema import FOLDER_TABLES, GLOBAL_TABLES


class LoadError(UserFacingError):
    """A file could not be loaded; nothing from it was written."""

    def __init__(
        self,
        file: str | os.PathLike[str],
        message: str,
        *,
        line: int | None = None,
        column: str | None = None,
    ):
        where = str(file)
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column!r}"
        super().__init__(f"{where}: {message}")
        self.file = str(file)
        self.line = line
        self.column = column


# column -> (SQL type, required, kind) ; kind: "addr" | "hash" | "" (how to normalise)
C = tuple[str, bool, str]
TABLE_COLUMNS: dict[str, dict[str, C]] = {
    "assets": {
        "asset_key": ("VARCHAR", True, "key"), "chain": ("VARCHAR", True, ""),
        "token_address": ("VARCHAR", False, "addr"), "symbol": ("VARCHAR", False, ""),
        "name": ("VARCHAR", False, ""), "decimals": ("INTEGER", False, ""), "standard": ("VARCHAR", False, ""),
        "canonical_asset": ("VARCHAR", False, ""), "is_spam": ("BOOLEAN", False, ""),
    },
    "prices": {
        "canonical_asset": ("VARCHAR", True, ""), "ts_hour": ("TIMESTAMP", True, ""),
        "usd": ("DOUBLE", True, ""), "source": ("VARCHAR", False, ""),
    },
    "transactions": {
        "chain": ("VARCHAR", True, ""), "tx_hash": ("VARCHAR", True, "hash"), "block_number": ("BIGINT", False, ""),
        "block_time": ("TIMESTAMP", True, ""), "tx_index": ("INTEGER", False, ""),
        "from_address": ("VARCHAR", False, "addr"), "to_address": ("VARCHAR", False, "addr"),
        "nonce": ("BIGINT", False, ""), "value_raw": ("VARCHAR", False, ""), "value": ("DECIMAL(38,18)", False, ""),
        "fee_raw": ("VARCHAR", False, ""), "fee": ("DECIMAL(38,18)", False, ""), "fee_usd": ("DOUBLE", False, ""),
        "status": ("BOOLEAN", False, ""), "method_selector": ("VARCHAR", False, ""),
        "method_name": ("VARCHAR", False, ""), "memo": ("VARCHAR", False, ""), "source": ("VARCHAR", False, ""),
    },
    "transfers": {
        "transfer_id": ("VARCHAR", True, "key"), "chain": ("VARCHAR", True, ""), "tx_hash": ("VARCHAR", True, "hash"),
        "block_time": ("TIMESTAMP", True, ""), "kind": ("VARCHAR", True, ""), "log_index": ("INTEGER", False, ""),
        "trace_address": ("VARCHAR", False, ""), "from_address": ("VARCHAR", False, "addr"),
        "to_address": ("VARCHAR", False, "addr"), "asset_key": ("VARCHAR", True, "key"),
        "amount_raw": ("VARCHAR", True, ""), "amount": ("DECIMAL(38,18)", True, ""),
        "usd_value": ("DOUBLE", False, ""), "status": ("BOOLEAN", False, ""),
    },
    "utxo_io": {
        "chain": ("VARCHAR", True, ""), "tx_hash": ("VARCHAR", True, "hash"), "direction": ("VARCHAR", True, ""),
        "idx": ("INTEGER", True, ""), "address": ("VARCHAR", False, "addr"), "amount_sats": ("BIGINT", True, ""),
        "script_type": ("VARCHAR", False, ""), "prev_tx_hash": ("VARCHAR", False, "hash"),
        "prev_vout": ("INTEGER", False, ""), "spent_by_tx": ("VARCHAR", False, "hash"),
    },
    "bridge_events": {
        "bridge_event_id": ("VARCHAR", True, ""), "bridge_name": ("VARCHAR", True, ""),
        "bridge_version": ("VARCHAR", False, ""), "protocol_msg_id": ("VARCHAR", False, ""),
        "msg_id_kind": ("VARCHAR", False, ""), "src_chain": ("VARCHAR", True, ""),
        "src_tx_hash": ("VARCHAR", True, "hash:src_chain"), "src_log_index": ("INTEGER", False, ""),
        "src_time": ("TIMESTAMP", True, ""), "src_address": ("VARCHAR", False, "addr:src_chain"),
        "src_contract": ("VARCHAR", False, "addr:src_chain"), "src_asset_key": ("VARCHAR", False, ""),
        "src_amount": ("DECIMAL(38,18)", False, ""), "src_usd": ("DOUBLE", False, ""),
        "declared_dst_chain": ("VARCHAR", False, ""), "declared_recipient": ("VARCHAR", False, "addr:declared_dst_chain"),
        "dst_chain": ("VARCHAR", False, ""), "dst_tx_hash": ("VARCHAR", False, "hash:dst_chain"),
        "dst_log_index": ("INTEGER", False, ""), "dst_time": ("TIMESTAMP", False, ""),
        "dst_address": ("VARCHAR", False, "addr:dst_chain"), "dst_asset_key": ("VARCHAR", False, ""),
        "dst_amount": ("DECIMAL(38,18)", False, ""), "dst_usd": ("DOUBLE", False, ""),
        "relayer": ("VARCHAR", False, ""), "match_method": ("VARCHAR", False, ""),
        "match_confidence": ("DOUBLE", False, ""), "status": ("VARCHAR", False, ""),
    },
    "labels": {
        "label_id": ("VARCHAR", True, ""), "chain": ("VARCHAR", True, ""), "address": ("VARCHAR", True, "addr"),
        "label": ("VARCHAR", True, ""), "entity": ("VARCHAR", False, ""), "category": ("VARCHAR", True, ""),
        "abuse": ("VARCHAR", False, ""), "tag_type": ("VARCHAR", False, ""), "source": ("VARCHAR", True, ""),
        "confidence": ("VARCHAR", False, ""), "confidence_level": ("INTEGER", False, ""),
        "is_cluster_definer": ("BOOLEAN", False, ""), "valid_from": ("TIMESTAMP", False, ""),
        "valid_to": ("TIMESTAMP", False, ""), "created_by": ("VARCHAR", False, ""),
    },
}  # fmt: skip

log = logging.getLogger(__name__)

_EVM_IN = "(" + ", ".join(f"'{c}'" for c in EVM_CHAINS) + ")"
_LINE_RE = re.compile(r"[Ll]ine:?\s*(\d+)")


@dataclass
class LoadReport:
    case_id: str
    inserted: dict[str, int] = field(default_factory=dict)
    skipped_duplicates: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    derived_utxo_transfers: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "derived_utxo_transfers": self.derived_utxo_transfers,"case_id": self.case_id, "inserted": self.inserted, "skipped_duplicates": self.skipped_duplicates,
                "files": self.files}  # fmt: skip


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _normalised(col: str, sqltype: str, kind: str, plan: dict[str, bool] | None = None) -> str:
    """SQL that casts a staged VARCHAR column to its type and normal form.

    ``plan`` (from ``_plan``) says which clean-ups the data needs; skipping the
    ones it does not need keeps million-row loads fast.
    """
    plan = plan or {"trim": True, "lower": True, "tz": True}
    q = _q(col)
    v = f"nullif(trim({q}), '')" if plan["trim"] else f"nullif({q}, '')"
    if sqltype == "TIMESTAMP":
        if not plan["tz"]:
            return f"CAST({v} AS TIMESTAMP)"
        return f"CASE WHEN length({v}) = 19 THEN CAST({v} AS TIMESTAMP) ELSE CAST(CAST({v} AS TIMESTAMPTZ) AS TIMESTAMP) END"
    if kind.startswith(("addr", "hash")) and plan["lower"]:
        chain_col = kind.split(":", 1)[1] if ":" in kind else "chain"
        return f"CASE WHEN {_q(chain_col)} IN {_EVM_IN} THEN lower({v}) ELSE {v} END"
    if kind == "key" and plan["lower"]:
        return f"CASE WHEN split_part({v}, ':', 1) IN {_EVM_IN} THEN lower({v}) ELSE {v} END"
    if sqltype == "VARCHAR":
        return v
    return f"CAST({v} AS {sqltype})"


def _plan_probes(table: str, cols: list[str]) -> list[tuple[str, str, str]]:
    spec = TABLE_COLUMNS[table]
    probes: list[tuple[str, str, str]] = []
    for c in cols:
        sqltype, _, kind = spec[c]
        q = _q(c)
        probes.append((c, "trim", f"coalesce(bool_or({q} <> trim({q})), FALSE)"))
        if kind.startswith(("addr", "hash")) or kind == "key":
            probes.append((c, "lower", f"coalesce(bool_or({q} <> lower({q})), FALSE)"))
        if sqltype == "TIMESTAMP":
            probes.append((c, "tz", f"coalesce(bool_or(length(trim({q})) <> 19), FALSE)"))
    return probes


def _plan_from(
    cols: list[str], probes: list[tuple[str, str, str]], values: Any
) -> dict[str, dict[str, bool]]:
    plan = {c: {"trim": False, "lower": False, "tz": False} for c in cols}
    for (c, what, _), value in zip(probes, values, strict=True):
        plan[c][what] = bool(value)
    return plan


def _plan(
    cur: duckdb.DuckDBPyConnection, stage: str, table: str, cols: list[str]
) -> dict[str, dict[str, bool]]:
    """One scan: which columns need trimming, lower-casing or time-zone parsing."""
    probes = _plan_probes(table, cols)
    row = cur.execute(f"SELECT {', '.join(p[2] for p in probes)} FROM {stage}").fetchone() or ()
    return _plan_from(cols, probes, row)


def _bad_value(col: str, sqltype: str) -> str:
    v = f"nullif(trim({_q(col)}), '')"
    if sqltype == "TIMESTAMP":
        # plain 'YYYY-MM-DD HH:MM:SS' parses as TIMESTAMP; anything else must carry an offset we honour
        return (
            f"({v} IS NOT NULL AND CASE WHEN length({v}) = 19 THEN TRY_CAST({v} AS TIMESTAMP) "
            f"ELSE TRY_CAST({v} AS TIMESTAMPTZ)::TIMESTAMP END IS NULL)"
        )
    return f"({v} IS NOT NULL AND TRY_CAST({v} AS {sqltype}) IS NULL)"


def _check(
    cur: duckdb.DuckDBPyConnection, stage: str, file: Path, table: str, first_line: int
) -> dict[str, dict[str, bool]]:
    """Find the first bad value of every column and report it with its line; in the
    same scan, work out the clean-up plan for the insert (see ``_plan``)."""
    cols = [r[0] for r in cur.execute(f"DESCRIBE {stage}").fetchall()]
    spec = TABLE_COLUMNS[table]
    probes: list[tuple[str, str, str]] = []  # (column, problem, SQL that is true on a bad row)
    for col, (sqltype, required, _) in spec.items():
        if col not in cols:
            if required:
                raise LoadError(file, f"the required column {col!r} is missing", line=1, column=col)
            continue
        if required:
            probes.append((col, "missing", f"nullif(trim({_q(col)}), '') IS NULL"))
        if sqltype != "VARCHAR":
            probes.append((col, sqltype, _bad_value(col, sqltype)))
    present = [c for c in spec if c in cols]
    plan_probes = _plan_probes(table, present)
    select = ", ".join(
        [f"min(rowid) FILTER (WHERE {cond})" for _, _, cond in probes] + [p[2] for p in plan_probes]
    )
    found = cur.execute(f"SELECT {select} FROM {stage}").fetchone() or ()
    plan = _plan_from(present, plan_probes, found[len(probes) :])
    hits = [(row, probe) for row, probe in zip(found[: len(probes)], probes, strict=True) if row is not None]
    if not hits:
        return plan
    row, (col, problem, _) = min(hits, key=lambda h: (h[0], list(spec).index(h[1][0])))
    line = int(row) + first_line
    if problem == "missing":
        raise LoadError(file, "a value is required here", line=line, column=col)
    value = cur.execute(f"SELECT {_q(col)} FROM {stage} WHERE rowid = ?", [row]).fetchone()
    shown = str(value[0] if value else "")[:60]
    raise LoadError(file, f"{shown!r} is not a valid {problem.lower()}", line=line, column=col)


def _stage(cur: duckdb.DuckDBPyConnection, file: Path, stage: str) -> int:
    """Stage a CSV/Parquet file as all-VARCHAR; return the line of its first data row."""
    try:
        if file.suffix.lower() == ".parquet":
            cur.execute(
                f"CREATE OR REPLACE TEMP TABLE {stage} AS SELECT COLUMNS(*)::VARCHAR FROM read_parquet(?)",
                [str(file)],
            )
            return 1
        cur.execute(
            f"CREATE OR REPLACE TEMP TABLE {stage} AS SELECT * FROM read_csv(?, header = true, all_varchar = true, "
            "auto_detect = true, delim = ',', quote = '\"', escape = '\"', strict_mode = true, null_padding = false)",
            [str(file)],
        )
        return 2
    except duckdb.Error as exc:
        text = str(exc)
        m = _LINE_RE.search(text)
        first = text.splitlines()[0][:300]
        raise LoadError(
            file, f"the file could not be read: {first}", line=int(m.group(1)) if m else None
        ) from None


def _insert_staged(
    cur: duckdb.DuckDBPyConnection,
    stage: str,
    table: str,
    case_id: str | None,
    plan: dict[str, dict[str, bool]] | None = None,
) -> tuple[int, int]:
    """Insert staged rows not already present (natural key); return (inserted, duplicates)."""
    cols_present = {r[0] for r in cur.execute(f"DESCRIBE {stage}").fetchall()}
    spec = TABLE_COLUMNS[table]
    cols = [c for c in spec if c in cols_present]
    plan = plan or _plan(cur, stage, table, cols)
    exprs = [f"{_normalised(c, spec[c][0], spec[c][2], plan[c])} AS {_q(c)}" for c in cols]
    keys = FOLDER_TABLES[table]
    total = int(cur.execute(f"SELECT count(*) FROM {stage}").fetchone()[0])  # type: ignore[index]
    scoped = table not in GLOBAL_TABLES
    key_join = " AND ".join(f"t.{_q(k)} = d.{_q(k)}" for k in keys)
    case_cond = "t.case_id = $case AND " if scoped else ""
    insert_cols = (["case_id"] if scoped else []) + cols
    select_cols = (["$case"] if scoped else []) + [f"d.{_q(c)}" for c in cols]
    key_list = ", ".join(_q(k) for k in keys)
    # fast paths: no duplicate keys in the file -> no DISTINCT ON; nothing of this case yet -> no anti-join
    key_hash = ", ".join(f"lower({_q(k)})" if plan[k]["lower"] or plan[k]["trim"] else _q(k) for k in keys)
    dup_row = cur.execute(f"SELECT count(*) - count(DISTINCT hash({key_hash})) FROM {stage}").fetchone()
    has_dups = bool(dup_row and dup_row[0])
    empty_row = cur.execute(
        f"SELECT NOT EXISTS (SELECT 1 FROM {table} t {'WHERE t.case_id = $case' if scoped else ''})",
        {"case": case_id} if scoped else {},
    ).fetchone()
    empty = bool(empty_row and empty_row[0])
    source = f"(SELECT {', '.join(exprs)} FROM {stage})"
    if has_dups:
        source = f"(SELECT DISTINCT ON ({key_list}) * FROM {source})"
    where = "" if empty else f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {case_cond}{key_join})"
    sql = f"INSERT INTO {table} ({', '.join(_q(c) for c in insert_cols)}) SELECT {', '.join(select_cols)} FROM {source} d {where}"
    params = {"case": case_id} if scoped else {}
    before = int(cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
    cur.execute(sql, params)
    after = int(cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
    return after - before, total - (after - before)


def derive_utxo_transfers(cur: duckdb.DuckDBPyConnection, case_id: str) -> int:
    """Address-to-address ``utxo`` transfers for UTXO transactions that have inputs/outputs but none yet.

    Each output is split over the input addresses in proportion to what they put in
    (integer satoshis, floor); change back to an input address is not a transfer.
    USD comes from the nearest earlier price of the chain's native asset.
    """
    before = int(cur.execute("SELECT count(*) FROM transfers WHERE case_id = ?", [case_id]).fetchone()[0])  # type: ignore[index]
    cur.execute(
        """
        INSERT INTO transfers (case_id, transfer_id, chain, tx_hash, block_time, kind, from_address, to_address,
                               asset_key, amount_raw, amount, usd_value, status)
        WITH todo AS (
          SELECT DISTINCT u.chain, u.tx_hash FROM utxo_io u JOIN chains c ON c.chain = u.chain AND c.family = 'utxo'
          WHERE u.case_id = $case
          EXCEPT SELECT chain, tx_hash FROM transfers WHERE case_id = $case AND kind = 'utxo'),
        ins AS (SELECT u.chain, u.tx_hash, u.address, sum(u.amount_sats) AS sats, min(u.idx) AS first_idx
                FROM utxo_io u SEMI JOIN todo USING (chain, tx_hash)
                WHERE u.case_id = $case AND u.direction = 'in' AND u.address IS NOT NULL GROUP BY ALL),
        tot AS (SELECT chain, tx_hash, sum(sats) AS total FROM ins GROUP BY ALL),
        outs AS (SELECT u.chain, u.tx_hash, u.address, u.amount_sats, u.idx FROM utxo_io u SEMI JOIN todo USING (chain, tx_hash)
                 WHERE u.case_id = $case AND u.direction = 'out' AND u.address IS NOT NULL AND u.amount_sats > 0),
        edges AS (
          SELECT o.chain, o.tx_hash, i.address AS src, o.address AS dst, o.amount_sats * i.sats // t.total AS part,
                 row_number() OVER (PARTITION BY o.chain, o.tx_hash ORDER BY o.idx, i.first_idx) - 1 AS k
          FROM outs o JOIN ins i USING (chain, tx_hash) JOIN tot t USING (chain, tx_hash)
          WHERE i.address <> o.address AND t.total > 0),
        timed AS (
          SELECT e.*, x.block_time, ch.native_decimals AS dec, ch.native_symbol AS sym FROM edges e
          JOIN transactions x ON x.case_id = $case AND x.chain = e.chain AND x.tx_hash = e.tx_hash
          JOIN chains ch ON ch.chain = e.chain),
        priced AS (
          SELECT timed.*, p.usd FROM timed ASOF LEFT JOIN prices p
            ON p.canonical_asset = timed.sym AND p.ts_hour <= timed.block_time)
        SELECT $case, chain || ':' || tx_hash || ':utxo:' || k, chain, tx_hash, block_time, 'utxo', src, dst,
               chain || ':native', CAST(part AS VARCHAR), CAST(part AS DECIMAL(38,18)) / 10 ** dec,
               round(part / 10 ** dec * usd, 2), TRUE
        FROM priced
        """,
        {"case": case_id},
    )
    after = cur.execute("SELECT count(*) FROM transfers WHERE case_id = ?", [case_id]).fetchone()
    return int(after[0] if after else before) - before


def _find(folder: Path, table: str) -> Path | None:
    for ext in (".csv", ".parquet"):
        p = folder / f"{table}{ext}"
        if p.exists():
            return p
    return None


def read_case_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LoadError(path, "case.json is missing: a case folder needs it") from None
    except json.JSONDecodeError as exc:
        raise LoadError(
            path, f"not valid JSON: {exc.msg}", line=exc.lineno, column=f"char {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise LoadError(path, "must hold one JSON object", line=1)
    for key in ("case_id", "title"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise LoadError(path, f"{key!r} is required (a non-empty string)", column=key)
    for i, a in enumerate(data.get("addresses") or []):
        if not isinstance(a, dict) or not all(
            isinstance(a.get(k), str) and a[k] for k in ("chain", "address", "role")
        ):
            raise LoadError(path, f"addresses[{i}] needs chain, address and role", column=f"addresses[{i}]")
    return data


def load_case_folder(db: CaseDB, folder: str | os.PathLike[str], *, loaded_by: str = "loader") -> LoadReport:
    """Load ``case.json`` plus one CSV/Parquet per table (see ``FOLDER_TABLES``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise LoadError(folder, "not a folder")
    meta = read_case_json(folder / "case.json")
    files = {t: _find(folder, t) for t in FOLDER_TABLES}
    if files["transfers"] is None:
        raise LoadError(folder / "transfers.csv", "a case folder needs transfers.csv or transfers.parquet")
    with db.write_lock:
        fast = _fast_load(db, meta, files, loaded_by)
        if fast is not None:
            return fast
        return _checked_load(db, folder, meta, files, loaded_by)


class _FastPathMiss(Exception):
    """The fast path does not apply or met a problem; the checked path will run (and explain)."""


def _fast_load(
    db: CaseDB, meta: dict[str, Any], files: dict[str, Path | None], loaded_by: str
) -> LoadReport | None:
    """A fresh case from clean CSVs: typed parallel CSV reads straight into the tables.

    Any error (a bad value, a duplicate key, a dirty field) rolls everything back and
    returns ``None``: the checked path then loads the folder or names the bad line.
    """
    case_id = meta["case_id"].strip()
    present = {t: f for t, f in files.items() if f is not None}
    if any(f.suffix.lower() != ".csv" for f in present.values()):
        return None
    cur = db.cursor()
    for table in present:
        if table in GLOBAL_TABLES:
            continue
        if cur.execute(f"SELECT count(*) FROM {table} WHERE case_id = ?", [case_id]).fetchone() != (0,):
            return None
    report = LoadReport(case_id, files=[str(f) for f in present.values()])
    staged: list[str] = []
    cur.execute("BEGIN")
    try:
        _upsert_case(cur, meta, loaded_by)
        for table, file in present.items():
            if table in GLOBAL_TABLES:  # small: the checked staging with de-duplication
                stage = f"_stage_{table}"
                staged.append(stage)
                plan = _check(cur, stage, file, table, _stage(cur, file, stage))
                report.inserted[table], report.skipped_duplicates[table] = _insert_staged(
                    cur, stage, table, case_id, plan
                )
                continue
            report.inserted[table] = _fast_insert(cur, file, table, case_id)
            report.skipped_duplicates[table] = 0
        report.derived_utxo_transfers = derive_utxo_transfers(cur, case_id)
        db.refresh_addresses(cur, case_id)
    except (duckdb.Error, LoadError, _FastPathMiss) as exc:
        cur.execute("ROLLBACK")
        log.info(
            "fast load of %s not used (%s); running the checked load", case_id, str(exc).splitlines()[0][:200]
        )
        return None
    finally:
        for stage in staged:
            cur.execute(f"DROP TABLE IF EXISTS {stage}")
    cur.execute("COMMIT")
    return report


def _fast_insert(cur: duckdb.DuckDBPyConnection, file: Path, table: str, case_id: str) -> int:
    with file.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), [])
    spec = TABLE_COLUMNS[table]
    if len(set(header)) != len(header):
        raise _FastPathMiss("repeated column names")
    types = {
        h: ("TIMESTAMPTZ" if spec[h][0] == "TIMESTAMP" else spec[h][0]) if h in spec else "VARCHAR"
        for h in header
    }
    cols = [c for c in spec if c in types]
    exprs = []
    for c in cols:
        sqltype, _, kind = spec[c]
        q = _q(c)
        if sqltype == "TIMESTAMP":
            exprs.append(f"CAST({q} AS TIMESTAMP)")
        elif kind.startswith(("addr", "hash")):
            chain_col = kind.split(":", 1)[1] if ":" in kind else "chain"
            exprs.append(f"CASE WHEN {_q(chain_col)} IN {_EVM_IN} THEN lower(trim({q})) ELSE trim({q}) END")
        elif kind == "key":
            exprs.append(
                f"CASE WHEN split_part({q}, ':', 1) IN {_EVM_IN} THEN lower(trim({q})) ELSE trim({q}) END"
            )
        else:
            exprs.append(q)
    before = int(cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
    cur.execute(
        f"INSERT INTO {table} (case_id, {', '.join(_q(c) for c in cols)}) SELECT $case, {', '.join(exprs)} "
        "FROM read_csv($file, header = true, auto_detect = false, delim = ',', quote = '\"', escape = '\"', "
        "strict_mode = true, columns = $types)",
        {"case": case_id, "file": str(file), "types": types},
    )
    inserted = int(cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) - before  # type: ignore[index]
    keys = FOLDER_TABLES[table]
    dups = cur.execute(
        f"SELECT count(*) - count(DISTINCT hash({', '.join(_q(k) for k in keys)})) FROM {table} WHERE case_id = ?",
        [case_id],
    ).fetchone()
    if dups and dups[0]:
        raise _FastPathMiss(f"{dups[0]} repeated keys in {file.name}")
    return inserted


def _checked_load(
    db: CaseDB, folder: Path, meta: dict[str, Any], files: dict[str, Path | None], loaded_by: str
) -> LoadReport:
    case_id = meta["case_id"].strip()
    report = LoadReport(case_id)
    cur = db.cursor()
    staged: dict[str, str] = {}
    plans: dict[str, dict[str, dict[str, bool]]] = {}
    try:
        for table, file in files.items():
            if file is None:
                continue
            stage = f"_stage_{table}"
            first = _stage(cur, file, stage)
            plans[table] = _check(cur, stage, file, table, first)
            staged[table] = stage
            report.files.append(str(file))
        cur.execute("BEGIN")
        try:
            _upsert_case(cur, meta, loaded_by)
            for table, stage in staged.items():
                ins, dup = _insert_staged(cur, stage, table, case_id, plans[table])
                report.inserted[table] = ins
                report.skipped_duplicates[table] = dup
            report.derived_utxo_transfers = derive_utxo_transfers(cur, case_id)
            db.refresh_addresses(cur, case_id)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
    except duckdb.Error as exc:
        raise LoadError(folder, f"the case could not be written: {str(exc).splitlines()[0][:300]}") from None
    finally:
        for stage in staged.values():
            cur.execute(f"DROP TABLE IF EXISTS {stage}")
    return report


def _upsert_case(cur: duckdb.DuckDBPyConnection, meta: dict[str, Any], loaded_by: str) -> None:
    case_id = meta["case_id"].strip()
    cur.execute(
        """
        INSERT INTO cases (case_id, title, incident_type, incident_time, reported_loss_usd, status, summary, updated_at)
        VALUES (?, ?, ?, CAST(CAST(? AS TIMESTAMPTZ) AS TIMESTAMP), ?, coalesce(?, 'open'), ?, current_timestamp)
        ON CONFLICT (case_id) DO UPDATE SET title = excluded.title, incident_type = excluded.incident_type,
          incident_time = excluded.incident_time, reported_loss_usd = excluded.reported_loss_usd,
          summary = excluded.summary, updated_at = excluded.updated_at
        """,
        [case_id, meta["title"], meta.get("incident_type"), meta.get("incident_time"),
         meta.get("reported_loss_usd"), meta.get("status"), meta.get("summary")],
    )  # fmt: skip
    for a in meta.get("addresses") or []:
        cur.execute(
            "INSERT INTO case_addresses (case_id, chain, address, role, added_by, note) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [
                case_id,
                a["chain"],
                norm_address(a["chain"], a["address"]),
                a["role"],
                loaded_by,
                a.get("note"),
            ],
        )


def export_case(db: CaseDB, case_id: str, folder: str | os.PathLike[str]) -> Path:
    """Write a case back as a case folder (the format ``load_case_folder`` reads)."""
    if not db.case_exists(case_id):
        raise UserFacingError(f"No case named {case_id!r}.")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    case = db.one("SELECT * FROM cases WHERE case_id = ?", [case_id]) or {}
    addresses = db.rows(
        "SELECT chain, address, role, note FROM case_addresses WHERE case_id = ? ORDER BY chain, address",
        [case_id],
    )
    meta = {
        "case_id": case_id,
        "title": case["title"],
        "incident_type": case.get("incident_type"),
        "incident_time": case["incident_time"].strftime("%Y-%m-%d %H:%M:%S")
        if case.get("incident_time")
        else None,
        "reported_loss_usd": str(case["reported_loss_usd"])
        if case.get("reported_loss_usd") is not None
        else None,
        "summary": case.get("summary"),
        "addresses": [{k: v for k, v in a.items() if v is not None} for a in addresses],
    }
    (folder / "case.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    cur = db.cursor()
    for table, keys in FOLDER_TABLES.items():
        cols = ", ".join(_q(c) for c in TABLE_COLUMNS[table])
        order = ", ".join(_q(k) for k in keys)
        if table == "assets":
            where = "WHERE asset_key IN (SELECT asset_key FROM transfers WHERE case_id = $case)"
        elif table == "prices":
            where = "WHERE TRUE"
        else:
            where = "WHERE case_id = $case"
        params = {"case": case_id} if "$case" in where else {}
        path = str(folder / f"{table}.csv")
        cur.execute(
            f"COPY (SELECT {cols} FROM {table} {where} ORDER BY {order}) TO '{path.replace(chr(39), chr(39) * 2)}' "
            "(HEADER, DELIMITER ',', TIMESTAMPFORMAT '%Y-%m-%d %H:%M:%S')",
            params,
        )
    return folder


# -- row-oriented loaders (exports): parse in Python for precise line/column errors ----


def _dec(file: Path, line: int, col: str, text: str | None, *, required: bool = False) -> Decimal | None:
    raw = (text or "").strip().replace(",", "").replace("$", "")
    if not raw:
        if required:
            raise LoadError(file, "a number is required here", line=line, column=col)
        return None
    try:
        return Decimal(raw)
    except InvalidOperation:
        raise LoadError(file, f"{text!r} is not a number", line=line, column=col) from None


def _time(file: Path, line: int, col: str, text: str | None) -> datetime:
    raw = (text or "").strip()
    try:
        if raw.isdigit():
            return datetime.fromtimestamp(int(raw), UTC).replace(tzinfo=None)
        raw = raw.replace(" UTC", "+00:00").replace("Z", "+00:00")
        t = datetime.fromisoformat(raw)
        return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t
    except ValueError:
        raise LoadError(file, f"{text!r} is not a time", line=line, column=col) from None


def _read_rows(file: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    try:
        fh = file.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise LoadError(file, f"cannot open: {exc.strerror}") from None
    with fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        rows = []
        for row in reader:
            if None in row:
                raise LoadError(file, "this row has more fields than the header", line=reader.line_num)
            if any(v is None for v in row.values()):
                raise LoadError(file, "this row has fewer fields than the header", line=reader.line_num)
            rows.append((reader.line_num, row))
    if not header:
        raise LoadError(file, "the file is empty", line=1)
    return header, rows


def _need(file: Path, header: list[str], *names: str) -> str:
    for n in names:
        if n in header:
            return n
    raise LoadError(file, f"none of the columns {list(names)} is present", line=1, column=names[0])


def _text(value: Any) -> str | None:
    """Python values as the text the staging step casts back."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _write_frames(
    db: CaseDB, case_id: str, frames: dict[str, list[dict[str, Any]]], file: Path
) -> LoadReport:
    import pandas as pd  # only the export loaders need it; keeps `tahrix` start-up light

    report = LoadReport(case_id, files=[str(file)])
    with db.write_lock:
        cur = db.cursor()
        try:
            for table, rows in frames.items():
                if rows:
                    cur.register(
                        f"_df_{table}",
                        pd.DataFrame([{k: _text(v) for k, v in r.items()} for r in rows], dtype=object),
                    )
            cur.execute("BEGIN")
            try:
                cur.execute(
                    "INSERT INTO cases (case_id, title) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    [case_id, case_id],
                )
                for table, rows in frames.items():
                    if not rows:
                        report.inserted[table] = 0
                        continue
                    cur.execute(
                        f"CREATE OR REPLACE TEMP TABLE _stage_{table} AS SELECT COLUMNS(*)::VARCHAR FROM _df_{table}"
                    )
                    ins, dup = _insert_staged(cur, f"_stage_{table}", table, case_id)
                    report.inserted[table] = ins
                    report.skipped_duplicates[table] = dup
                db.refresh_addresses(cur, case_id)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
        except duckdb.Error as exc:
            raise LoadError(file, f"could not be written: {str(exc).splitlines()[0][:300]}") from None
        finally:
            for table in frames:
                cur.execute(f"DROP TABLE IF EXISTS _stage_{table}")
                with contextlib.suppress(duckdb.Error):
                    cur.unregister(f"_df_{table}")
    return report


def load_etherscan_csv(
    db: CaseDB, case_id: str, path: str | os.PathLike[str], *, chain: str = "ethereum"
) -> LoadReport:
    """An Etherscan-style export: normal, internal or ERC-20 token transfers (detected from the header)."""
    file = Path(path)
    header, rows = _read_rows(file)
    hcol = _need(file, header, "Txhash", "Transaction Hash")
    native_col = next((h for h in header if h.startswith("Value_IN(")), None)
    symbol = native_col[9:-1] if native_col else "ETH"
    if "TokenValue" in header or "TokenSymbol" in header:
        kind = "token"
    elif "ParentTxFrom" in header or "TxTo" in header:
        kind = "internal"
    else:
        kind = "normal"
    txs: list[dict[str, Any]] = []
    transfers: list[dict[str, Any]] = []
    assets: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    for line, r in rows:
        h = (r[hcol] or "").strip().lower()
        if not re.fullmatch(r"0x[0-9a-f]{64}", h):
            raise LoadError(file, f"{r[hcol]!r} is not a transaction hash", line=line, column=hcol)
        tcol = "UnixTimestamp" if "UnixTimestamp" in header else _need(file, header, "DateTime (UTC)")
        t = _time(file, line, tcol, r[tcol])
        status_text = (r.get("Status") or "").strip()
        ok = not status_text.lower().startswith("error(0)") and (r.get("isError", "0") or "0") == "0"
        block = (r.get("Blockno") or "").strip() or None
        if kind == "token":
            frm = norm_address(chain, r[_need(file, header, "From")])
            to = norm_address(chain, r[_need(file, header, "To")])
            contract = norm_address(chain, r[_need(file, header, "ContractAddress")]) or ""
            amount = _dec(file, line, "TokenValue", r.get("TokenValue"), required=True)
            usd = _dec(file, line, "USDValueDayOfTx", r.get("USDValueDayOfTx"))
            i = counters[h] = counters.get(h, -1) + 1
            key = f"{chain}:{contract}"
            assets.append({"asset_key": key, "chain": chain, "token_address": contract, "symbol": r.get("TokenSymbol"),
                           "name": r.get("TokenName"), "standard": "erc20"})  # fmt: skip
            transfers.append({"transfer_id": f"{chain}:{h}:token:{i}", "chain": chain, "tx_hash": h, "block_time": t,
                              "kind": "token", "log_index": None, "from_address": frm, "to_address": to, "asset_key": key,
                              "amount_raw": str(amount), "amount": amount, "usd_value": usd, "status": ok})  # fmt: skip
            txs.append({"chain": chain, "tx_hash": h, "block_number": block, "block_time": t, "status": ok,
                        "source": "etherscan-token"})  # fmt: skip
            continue
        frm = norm_address(chain, r[_need(file, header, "From")])
        to_col = "TxTo" if kind == "internal" else _need(file, header, "To")
        to = norm_address(chain, r[to_col]) or norm_address(chain, r.get("ContractAddress"))
        vin = _dec(file, line, f"Value_IN({symbol})", r.get(f"Value_IN({symbol})")) or Decimal(0)
        vout = _dec(file, line, f"Value_OUT({symbol})", r.get(f"Value_OUT({symbol})")) or Decimal(0)
        value = max(vin, vout)
        native = f"{chain}:native"
        if kind == "internal":
            i = counters[h] = counters.get(h, -1) + 1
            if value > 0:
                transfers.append({"transfer_id": f"{chain}:{h}:internal:{i}", "chain": chain, "tx_hash": h,
                                  "block_time": t, "kind": "internal", "trace_address": str(i), "from_address": frm,
                                  "to_address": to, "asset_key": native, "amount_raw": str(int(value.scaleb(18))),
                                  "amount": value, "status": ok})  # fmt: skip
            txs.append({"chain": chain, "tx_hash": h, "block_number": block, "block_time": t,
                        "from_address": norm_address(chain, r.get("ParentTxFrom")),
                        "to_address": norm_address(chain, r.get("ParentTxTo")), "status": ok,
                        "source": "etherscan-internal"})  # fmt: skip
            continue
        fee = _dec(file, line, f"TxnFee({symbol})", r.get(f"TxnFee({symbol})"))
        fee_usd = _dec(file, line, "TxnFee(USD)", r.get("TxnFee(USD)"))
        price = _dec(
            file,
            line,
            f"Historical $Price/{symbol.capitalize()}",
            r.get(f"Historical $Price/{symbol.capitalize()}"),
        )
        txs.append({"chain": chain, "tx_hash": h, "block_number": block, "block_time": t, "from_address": frm,
                    "to_address": to, "value_raw": str(int(value.scaleb(18))), "value": value,
                    "fee_raw": str(int(fee.scaleb(18))) if fee is not None else None, "fee": fee,
                    "fee_usd": fee_usd, "status": ok, "method_name": r.get("Method") or None, "source": "etherscan"})  # fmt: skip
        if value > 0:
            transfers.append({"transfer_id": f"{chain}:{h}:native:0", "chain": chain, "tx_hash": h, "block_time": t,
                              "kind": "native", "from_address": frm, "to_address": to, "asset_key": native,
                              "amount_raw": str(int(value.scaleb(18))), "amount": value,
                              "usd_value": float(value * price) if price is not None else None, "status": ok})  # fmt: skip
    return _write_frames(db, case_id, {"assets": assets, "transactions": txs, "transfers": transfers}, file)


def load_etl_csv(
    db: CaseDB, case_id: str, path: str | os.PathLike[str], *, chain: str = "ethereum"
) -> LoadReport:
    """An ethereum-etl / BigQuery ``crypto_ethereum`` CSV: ``transactions`` or ``token_transfers``."""
    file = Path(path)
    header, rows = _read_rows(file)
    txs: list[dict[str, Any]] = []
    transfers: list[dict[str, Any]] = []
    assets: list[dict[str, Any]] = []
    decimals = {
        r["asset_key"]: r["decimals"]
        for r in db.rows("SELECT asset_key, decimals FROM assets WHERE chain = ?", [chain])
        if r["decimals"] is not None
    }
    if "token_address" in header:
        for col in (
            "token_address",
            "from_address",
            "to_address",
            "value",
            "transaction_hash",
            "log_index",
            "block_timestamp",
        ):
            _need(file, header, col)
        for line, r in rows:
            h = r["transaction_hash"].strip().lower()
            t = _time(file, line, "block_timestamp", r["block_timestamp"])
            raw = _dec(file, line, "value", r["value"], required=True)
            li = _dec(file, line, "log_index", r["log_index"], required=True)
            token = norm_address(chain, r["token_address"]) or ""
            key = f"{chain}:{token}"
            dec = decimals.get(key, 18)
            assets.append({"asset_key": key, "chain": chain, "token_address": token, "standard": "erc20"})
            transfers.append({"transfer_id": f"{chain}:{h}:token:{int(li or 0)}", "chain": chain, "tx_hash": h,
                              "block_time": t, "kind": "token", "log_index": int(li or 0),
                              "from_address": norm_address(chain, r["from_address"]),
                              "to_address": norm_address(chain, r["to_address"]), "asset_key": key,
                              "amount_raw": str(int(raw or 0)), "amount": Decimal(int(raw or 0)).scaleb(-dec),
                              "status": True})  # fmt: skip
            txs.append({"chain": chain, "tx_hash": h, "block_number": r.get("block_number") or None, "block_time": t,
                        "source": "ethereum-etl-token"})  # fmt: skip
    elif "hash" in header and "from_address" in header:
        for col in ("hash", "from_address", "to_address", "value", "block_timestamp"):
            _need(file, header, col)
        for line, r in rows:
            h = r["hash"].strip().lower()
            t = _time(file, line, "block_timestamp", r["block_timestamp"])
            wei = _dec(file, line, "value", r["value"], required=True) or Decimal(0)
            gas_used = _dec(file, line, "receipt_gas_used", r.get("receipt_gas_used"))
            price = _dec(file, line, "gas_price", r.get("gas_price"))
            eff = _dec(file, line, "receipt_effective_gas_price", r.get("receipt_effective_gas_price"))
            unit = eff if eff is not None else price
            fee_wei = gas_used * unit if gas_used is not None and unit is not None else None
            status_raw = (r.get("receipt_status") or "").strip()
            ok = status_raw != "0"
            frm = norm_address(chain, r["from_address"])
            to = norm_address(chain, r["to_address"]) or norm_address(
                chain, r.get("receipt_contract_address")
            )
            inp = (r.get("input") or "").strip()
            txs.append({"chain": chain, "tx_hash": h, "block_number": r.get("block_number") or None, "block_time": t,
                        "tx_index": r.get("transaction_index") or None, "from_address": frm, "to_address": to,
                        "nonce": r.get("nonce") or None, "value_raw": str(int(wei)), "value": wei.scaleb(-18),
                        "fee_raw": str(int(fee_wei)) if fee_wei is not None else None,
                        "fee": fee_wei.scaleb(-18) if fee_wei is not None else None, "status": ok,
                        "method_selector": inp[:10] if len(inp) >= 10 else None, "source": "ethereum-etl"})  # fmt: skip
            if wei > 0:
                transfers.append({"transfer_id": f"{chain}:{h}:native:0", "chain": chain, "tx_hash": h, "block_time": t,
                                  "kind": "native", "from_address": frm, "to_address": to, "asset_key": f"{chain}:native",
                                  "amount_raw": str(int(wei)), "amount": wei.scaleb(-18), "status": ok})  # fmt: skip
    else:
        raise LoadError(
            file,
            "not an ethereum-etl transactions or token_transfers file (no 'hash' or 'token_address' column)",
            line=1,
        )
    return _write_frames(db, case_id, {"assets": assets, "transactions": txs, "transfers": transfers}, file)
