"""Write a case back as a case folder (the format ``load_case_folder`` reads)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.agent.storage.file_locks import private_files
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.columns import TABLE_COLUMNS
from tahrix_lab.case.loaders.sqlparts import q
from tahrix_lab.case.schema import FOLDER_TABLES


def export_case(db: CaseDB, case_id: str, folder: str | os.PathLike[str]) -> Path:
    """Write a case back as a case folder (the format ``load_case_folder`` reads); the copy of the
    evidence is readable by its owner only (0600 files, a 0700 folder) whatever the umask."""
    if not db.case_exists(case_id):
        raise UserFacingError(f"No case named {case_id!r}.")
    with private_files():
        return _export(db, case_id, Path(folder))


def _export(db: CaseDB, case_id: str, folder: Path) -> Path:
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
        cols = ", ".join(q(c) for c in TABLE_COLUMNS[table])
        order = ", ".join(q(k) for k in keys)
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
