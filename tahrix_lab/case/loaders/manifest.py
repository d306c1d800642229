"""A case's load manifest in the record (issue 26 item 2; docs/workspace.md "Sharing a case's evidence").

Every load and every detector run appends one step to the case's manifest in the record
(``TranscriptStore.add_manifest_step``): the files as given with their size and SHA-256,
the format and counts of each file's load report, the load's options, the detectors' full
parameters, and the evidence's ``fingerprint`` after the step. Evidence is made from
files by content identity, so replaying the steps over the same bytes makes the same
evidence on any host (``case.manifest_open``), and the fingerprint proves it.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.report import FileReport, LoadReport

# What the fingerprint covers, per table: the columns that are evidence (not when it was
# loaded, not what analysts decided on it: flag status and notes live in the record).
FINGERPRINT_COLUMNS: dict[str, tuple[str, ...]] = {
    "transfers": ("transfer_id", "chain", "tx_hash", "block_time", "kind", "log_index", "trace_address",
                  "from_address", "to_address", "asset_key", "amount_raw", "amount", "usd_value", "status",
                  "token_id", "occurrence"),
    "transactions": ("chain", "tx_hash", "block_number", "block_time", "tx_index", "from_address",
                     "to_address", "nonce", "value_raw", "value", "fee_raw", "fee", "fee_usd", "status",
                     "method_selector"),
    "bridge_events": ("bridge_event_id", "src_chain", "src_tx_hash", "src_amount", "dst_chain", "dst_tx_hash",
                      "dst_amount", "match_method", "match_confidence", "status"),
    "labels": ("label_id", "chain", "address", "label", "entity", "category", "source", "confidence"),
    "anomaly_flags": ("flag_id", "flag_type", "severity", "score", "subject_kind", "chain", "address",
                      "tx_hash", "window_start", "window_end", "evidence", "params", "detector_version"),
}  # fmt: skip
_COUNTS = ("rows_read", "inserted", "merged", "filled", "conflicting", "unpriced", "unknown_decimals")


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(db: CaseDB, case_id: str) -> dict[str, Any]:
    """The case's evidence in a few numbers: per table, its rows and a hash of their content.

    The hash is a sum of each row's MD5 (two 64-bit halves, summed apart), so it needs no
    sort: order-free, one parallel pass, and any changed, missing or extra row changes it."""
    out: dict[str, Any] = {}
    for table, cols in FINGERPRINT_COLUMNS.items():
        row = f"list_value({', '.join(f'{c}::VARCHAR' for c in cols)})::VARCHAR"
        n, hi, lo = (
            db.cursor()
            .execute(
                f"SELECT count(*), coalesce(sum(('0x' || h[1:16])::UBIGINT::HUGEINT), 0), "
                f"coalesce(sum(('0x' || h[17:32])::UBIGINT::HUGEINT), 0) "
                f"FROM (SELECT md5({row}) AS h FROM {table} WHERE case_id = ?)",
                [case_id],
            )
            .fetchall()[0]
        )
        out[table] = {"rows": int(n), "hash": hashlib.sha256(f"{n}:{hi}:{lo}".encode()).hexdigest()[:32]}
    return out


def file_entry(path: str | os.PathLike[str], sha: str | None = None, **more: Any) -> dict[str, Any]:
    """One file as the manifest keeps it: the path as given, its size and SHA-256."""
    return {
        "path": os.fspath(path),
        "size": os.path.getsize(path),
        "sha256": sha or sha256_file(path),
        **more,
    }


def report_counts(fr: FileReport | None) -> dict[str, Any]:
    """A file report's counts (not its conflicts, which stay in the evidence's ``load_conflicts``)."""
    if fr is None:
        return {}
    return {"format": fr.format, **{k: getattr(fr, k) for k in _COUNTS},
            "skipped": sum(fr.skipped.values()), "tables": dict(fr.tables)}  # fmt: skip


def record_step(db: CaseDB, case_id: str, kind: str, entry: dict[str, Any]) -> None:
    """Append a step, with the evidence's fingerprint after it, to the case's manifest."""
    db.record.add_manifest_step(
        case_id, kind, entry, fingerprint(db, case_id),
        step_id=str(uuid.uuid4()), recorded_by=os.environ.get("TAHRIX_USER"),
    )  # fmt: skip


def record_folder_load(
    db: CaseDB, folder: Path, files: Iterable[Path], report: LoadReport, loaded_by: str
) -> None:
    by_file = {fr.file: fr for fr in report.files}
    entry = {
        "source": "folder",
        "folder": os.fspath(folder),
        "loaded_by": loaded_by,
        "files": [file_entry(f, **report_counts(by_file.get(str(f)))) for f in files],
        "inserted": report.inserted,
    }
    record_step(db, report.case_id, "load", entry)


def record_files_load(
    db: CaseDB,
    paths: Sequence[Path],
    report: LoadReport,
    *,
    chain: str | None,
    token: str | None,
    force: bool,
) -> None:
    by_file: dict[str, FileReport] = {}
    for fr in report.files:
        by_file.setdefault(fr.file, fr)
    files = []
    for p in paths:
        found = by_file.get(str(p))
        files.append(file_entry(p, found.sha256 if found else None, **report_counts(found)))
    entry = {"source": "files", "chain": chain, "token": token, "force": force, "files": files,
             "inserted": report.inserted}  # fmt: skip
    record_step(db, report.case_id, "load", entry)


def record_detect(db: CaseDB, case_id: str, params: dict[str, dict[str, Any]]) -> None:
    """A detector run: the detectors in order with every parameter used (defaults included,
    so a rebuild by a later version with other defaults uses these thresholds)."""
    record_step(db, case_id, "detect", {"detectors": list(params), "params": params})
