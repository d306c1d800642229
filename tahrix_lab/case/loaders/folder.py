"""Case folders (CSV or Parquet): ``case.json`` plus one file per table.

All-or-nothing: files are staged and checked first, then written in one
transaction; a bad file loads nothing and ``LoadError`` names the file, line
and column. Loading the same rows twice adds nothing (rows are de-duplicated on
their natural key; ``transfer_id`` is content-derived, ``<chain>:<tx>:<kind>:<index>``).
EVM addresses and hashes are lower-cased; label categories are normalised to
the taxonomy (unknown ones kept as written and counted in the report).
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.case.db import CaseDB, norm_address
from tahrix_lab.case.loaders.columns import TABLE_COLUMNS
from tahrix_lab.case.loaders.labels import normalise_labels
from tahrix_lab.case.loaders.report import FileReport, LoadError, LoadReport
from tahrix_lab.case.loaders.sqlparts import EVM_IN as _EVM_IN
from tahrix_lab.case.loaders.sqlparts import fetch_one, fetch_value
from tahrix_lab.case.loaders.sqlparts import q as _q
from tahrix_lab.case.loaders.utxo import derive_utxo_transfers
from tahrix_lab.case.schema import FOLDER_TABLES, GLOBAL_TABLES

log = logging.getLogger(__name__)

_LINE_RE = re.compile(r"[Ll]ine:?\s*(\d+)")


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
    row = fetch_one(cur, f"SELECT {', '.join(p[2] for p in probes)} FROM {stage}")
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
    found = fetch_one(cur, f"SELECT {select} FROM {stage}")
    plan = _plan_from(present, plan_probes, found[len(probes) :])
    hits = [(row, probe) for row, probe in zip(found[: len(probes)], probes, strict=True) if row is not None]
    if not hits:
        return plan
    row, (col, problem, _) = min(hits, key=lambda h: (h[0], list(spec).index(h[1][0])))
    line = int(row) + first_line
    # a CSV's record number becomes its line (blank lines, quoted line breaks); Parquet has rows
    where = {"line": line} if file.suffix.lower() == ".parquet" else {"record": line}
    if problem == "missing":
        raise LoadError(file, "a value is required here", column=col, **where)
    value = fetch_one(cur, f"SELECT {_q(col)} FROM {stage} WHERE rowid = ?", [row])
    shown = str(value[0] if value else "")[:60]
    raise LoadError(file, f"{shown!r} is not a valid {problem.lower()}", column=col, **where)


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
    total = int(fetch_value(cur, f"SELECT count(*) FROM {stage}"))
    scoped = table not in GLOBAL_TABLES
    key_join = " AND ".join(f"t.{_q(k)} = d.{_q(k)}" for k in keys)
    case_cond = "t.case_id = $case AND " if scoped else ""
    insert_cols = (["case_id"] if scoped else []) + cols
    select_cols = (["$case"] if scoped else []) + [f"d.{_q(c)}" for c in cols]
    key_list = ", ".join(_q(k) for k in keys)
    # fast paths: no duplicate keys in the file -> no DISTINCT ON; nothing of this case yet -> no anti-join
    key_hash = ", ".join(f"lower({_q(k)})" if plan[k]["lower"] or plan[k]["trim"] else _q(k) for k in keys)
    dup_row = fetch_one(cur, f"SELECT count(*) - count(DISTINCT hash({key_hash})) FROM {stage}")
    has_dups = bool(dup_row and dup_row[0])
    empty_row = fetch_one(
        cur,
        f"SELECT NOT EXISTS (SELECT 1 FROM {table} t {'WHERE t.case_id = $case' if scoped else ''})",
        {"case": case_id} if scoped else {},
    )
    empty = bool(empty_row and empty_row[0])
    source = f"(SELECT {', '.join(exprs)} FROM {stage})"
    if has_dups:
        source = f"(SELECT DISTINCT ON ({key_list}) * FROM {source})"
    where = "" if empty else f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {case_cond}{key_join})"
    sql = f"INSERT INTO {table} ({', '.join(_q(c) for c in insert_cols)}) SELECT {', '.join(select_cols)} FROM {source} d {where}"
    params = {"case": case_id} if scoped else {}
    before = int(fetch_value(cur, f"SELECT count(*) FROM {table}"))
    cur.execute(sql, params)
    after = int(fetch_value(cur, f"SELECT count(*) FROM {table}"))
    return after - before, total - (after - before)


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
        if fetch_one(cur, f"SELECT count(*) FROM {table} WHERE case_id = ?", [case_id]) != (0,):
            return None
    report = LoadReport(case_id)
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
        _finish(db, cur, case_id, report, present)
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
    required = [c for c, (_, req, _) in spec.items() if req]
    if any(c not in types for c in required):
        raise _FastPathMiss("a required column is missing")
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
    before = int(fetch_value(cur, f"SELECT count(*) FROM {table}"))
    cur.execute(
        f"INSERT INTO {table} (case_id, {', '.join(_q(c) for c in cols)}) SELECT $case, {', '.join(exprs)} "
        "FROM read_csv($file, header = true, auto_detect = false, delim = ',', quote = '\"', escape = '\"', "
        "strict_mode = true, columns = $types)",
        {"case": case_id, "file": str(file), "types": types},
    )
    inserted = int(fetch_value(cur, f"SELECT count(*) FROM {table}")) - before
    keys = FOLDER_TABLES[table]
    dups = fetch_one(
        cur,
        f"SELECT count(*) - count(DISTINCT hash({', '.join(_q(k) for k in keys)})) FROM {table} WHERE case_id = ?",
        [case_id],
    )
    if dups and dups[0]:
        raise _FastPathMiss(f"{dups[0]} repeated keys in {file.name}")
    # the schema lets exports leave an amount unknown; a case folder must give both
    if table == "transfers" and fetch_value(
        cur,
        "SELECT count(*) FROM transfers WHERE case_id = ? AND (amount_raw IS NULL OR amount IS NULL)",
        [case_id],
    ):
        raise _FastPathMiss("a required amount is empty")
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
        cur.execute("BEGIN")
        try:
            _upsert_case(cur, meta, loaded_by)
            for table, stage in staged.items():
                ins, dup = _insert_staged(cur, stage, table, case_id, plans[table])
                report.inserted[table] = ins
                report.skipped_duplicates[table] = dup
            _finish(db, cur, case_id, report, {t: f for t, f in files.items() if f is not None})
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


def _finish(
    db: CaseDB, cur: duckdb.DuckDBPyConnection, case_id: str, report: LoadReport, files: dict[str, Path]
) -> None:
    """After the tables: derived UTXO transfers, label categories, address profiles, the per-file report."""
    from tahrix_lab.case.loaders.merge import store_report

    report.derived_utxo_transfers = derive_utxo_transfers(cur, case_id)
    report.unknown_categories = normalise_labels(cur, case_id)
    db.refresh_addresses(cur, case_id)
    for table, file in files.items():
        ins, dup = report.inserted.get(table, 0), report.skipped_duplicates.get(table, 0)
        fr = FileReport(str(file), f"case folder: {table}", rows_read=ins + dup)
        if table == "transfers":
            fr.inserted, fr.merged = ins + report.derived_utxo_transfers, dup
            unpriced, unknown = fetch_one(
                cur,
                "SELECT count(*) FILTER (WHERE usd_value IS NULL AND status IS NOT FALSE), "
                "count(*) FILTER (WHERE amount IS NULL) FROM transfers WHERE case_id = ?",
                [case_id],
            )
            fr.unpriced, fr.unknown_decimals = int(unpriced), int(unknown)
        else:
            fr.tables[table] = ins
            fr.skip("already in the case", dup)
        if table == "labels" and report.unknown_categories:
            fr.notes.append(
                "label categories kept as written (no alias knows them): "
                + ", ".join(f"{k!r} ({v})" for k, v in report.unknown_categories.items())
            )
        report.files.append(fr)
        store_report(cur, case_id, fr)


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
