"""The checked load of a case folder: every file staged as text, every column checked, then written.

Each table file is staged all-VARCHAR (``stage_file``); one scan per file finds
the first bad value of every column and names its line (``check_staged``) and
works out which clean-ups the data needs; ``insert_staged`` then casts and
inserts the rows not already in the case (natural key). ``checked_load`` does
this for a whole folder in one transaction; ``upsert_case`` and ``finish_load``
are what every folder load writes around the tables (the fast path's too).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.case.db import CaseDB, norm_address
from tahrix_lab.case.loaders.columns import TABLE_COLUMNS
from tahrix_lab.case.loaders.labels import normalise_labels
from tahrix_lab.case.loaders.merge import store_report
from tahrix_lab.case.loaders.report import FileReport, LoadError, LoadReport
from tahrix_lab.case.loaders.run import Recorder, transaction
from tahrix_lab.case.loaders.sqlparts import EVM_IN as _EVM_IN
from tahrix_lab.case.loaders.sqlparts import fetch_one, fetch_value
from tahrix_lab.case.loaders.sqlparts import q as _q
from tahrix_lab.case.loaders.utxo import derive_utxo_transfers
from tahrix_lab.case.schema import FOLDER_TABLES, GLOBAL_TABLES

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


def check_staged(
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


def stage_file(cur: duckdb.DuckDBPyConnection, file: Path, stage: str) -> int:
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


def insert_staged(
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


def checked_load(
    db: CaseDB,
    folder: Path,
    meta: dict[str, Any],
    files: dict[str, Path | None],
    loaded_by: str,
    record: Recorder | None = None,
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
            first = stage_file(cur, file, stage)
            plans[table] = check_staged(cur, stage, file, table, first)
            staged[table] = stage
        with transaction(cur, None if record is None else lambda: record(report)):
            upsert_case(cur, meta, loaded_by)
            for table, stage in staged.items():
                ins, dup = insert_staged(cur, stage, table, case_id, plans[table])
                report.inserted[table] = ins
                report.skipped_duplicates[table] = dup
            finish_load(db, cur, case_id, report, {t: f for t, f in files.items() if f is not None})
    except duckdb.Error as exc:
        raise LoadError(folder, f"the case could not be written: {str(exc).splitlines()[0][:300]}") from None
    finally:
        for stage in staged.values():
            cur.execute(f"DROP TABLE IF EXISTS {stage}")
    return report


def finish_load(
    db: CaseDB, cur: duckdb.DuckDBPyConnection, case_id: str, report: LoadReport, files: dict[str, Path]
) -> None:
    """After the tables: derived UTXO transfers, label categories, address profiles, the per-file report."""
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


def upsert_case(cur: duckdb.DuckDBPyConnection, meta: dict[str, Any], loaded_by: str) -> None:
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
