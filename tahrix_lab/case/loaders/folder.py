"""Case folders (CSV or Parquet): ``case.json`` plus one file per table.

All-or-nothing: files are staged and checked first, then written in one
transaction; a bad file loads nothing and ``LoadError`` names the file, line
and column. Loading the same rows twice adds nothing (rows are de-duplicated on
their natural key; ``transfer_id`` is content-derived, ``<chain>:<tx>:<kind>:<index>``).
EVM addresses and hashes are lower-cased; label categories are normalised to
the taxonomy (unknown ones kept as written and counted in the report).

The fast path (``folder_fast``) loads a fresh case from clean CSVs; anything
else, and anything the fast path meets, goes through the checked path
(``folder_checked``), which checks every value first.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.folder_checked import checked_load
from tahrix_lab.case.loaders.folder_fast import fast_load
from tahrix_lab.case.loaders.manifest import files_work, guarded, record_folder_load
from tahrix_lab.case.loaders.report import LoadError, LoadReport
from tahrix_lab.case.schema import FOLDER_TABLES


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


def load_case_folder(
    db: CaseDB, folder: str | os.PathLike[str], *, loaded_by: str = "loader", manifest: bool = True
) -> LoadReport:
    """Load ``case.json`` plus one CSV/Parquet per table (see ``FOLDER_TABLES``); the load is a
    step of the case's manifest in the record unless ``manifest=False`` (a rebuild from it)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise LoadError(folder, "not a folder")
    meta = read_case_json(folder / "case.json")
    files = {t: _find(folder, t) for t in FOLDER_TABLES}
    if files["transfers"] is None:
        raise LoadError(folder / "transfers.csv", "a case folder needs transfers.csv or transfers.parquet")
    present = [folder / "case.json", *(f for f in files.values() if f is not None)]
    work = lambda: files_work(present, source="folder")  # noqa: E731
    with guarded(db, meta["case_id"], "load", work, manifest=manifest) as turn:
        record = (
            None
            if turn is None
            else partial(record_folder_load, db, folder, present, loaded_by=loaded_by, turn=turn)
        )
        with db.write_lock:
            report = fast_load(db, meta, files, loaded_by, record) or checked_load(
                db, folder, meta, files, loaded_by, record
            )
    return report
