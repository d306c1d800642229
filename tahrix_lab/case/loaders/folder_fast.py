"""The fast load of a case folder: a fresh case from clean CSVs, typed parallel reads straight into the tables.

It applies only when nothing of the case is loaded yet and every file is CSV;
anything unexpected (a bad value, a repeated key, a dirty field) rolls it back
and ``fast_load`` returns ``None``, so ``load_case_folder`` runs the checked
load, which loads the folder or names the bad line.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.columns import TABLE_COLUMNS
from tahrix_lab.case.loaders.folder_checked import (
    check_staged,
    finish_load,
    insert_staged,
    stage_file,
    upsert_case,
)
from tahrix_lab.case.loaders.report import LoadError, LoadReport
from tahrix_lab.case.loaders.run import Recorder, transaction
from tahrix_lab.case.loaders.sqlparts import EVM_IN as _EVM_IN
from tahrix_lab.case.loaders.sqlparts import fetch_one, fetch_value
from tahrix_lab.case.loaders.sqlparts import q as _q
from tahrix_lab.case.schema import FOLDER_TABLES, GLOBAL_TABLES

log = logging.getLogger(__name__)


class _FastPathMiss(Exception):
    """The fast path does not apply or met a problem; the checked path will run (and explain)."""


def fast_load(
    db: CaseDB,
    meta: dict[str, Any],
    files: dict[str, Path | None],
    loaded_by: str,
    record: Recorder | None = None,
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
    try:
        with transaction(cur, None if record is None else lambda: record(report)):
            upsert_case(cur, meta, loaded_by)
            for table, file in present.items():
                if table in GLOBAL_TABLES:  # small: the checked staging with de-duplication
                    stage = f"_stage_{table}"
                    staged.append(stage)
                    plan = check_staged(cur, stage, file, table, stage_file(cur, file, stage))
                    report.inserted[table], report.skipped_duplicates[table] = insert_staged(
                        cur, stage, table, case_id, plan
                    )
                    continue
                report.inserted[table] = _fast_insert(cur, file, table, case_id)
                report.skipped_duplicates[table] = 0
            finish_load(db, cur, case_id, report, present)
    except (duckdb.Error, LoadError, _FastPathMiss) as exc:
        log.info(
            "fast load of %s not used (%s); running the checked load", case_id, str(exc).splitlines()[0][:200]
        )
        return None
    finally:
        for stage in staged:
            cur.execute(f"DROP TABLE IF EXISTS {stage}")
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
