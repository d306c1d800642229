"""A case's load manifest in the record (issue 26 item 2; docs/workspace.md "Sharing a case's evidence").

Every load and every detector run appends one step to the case's manifest in the record
(``TranscriptStore.add_manifest_step``): the files as given with their size and SHA-256,
the format and counts of each file's load report, the load's options, the detectors' full
parameters, and the evidence's ``fingerprint`` after the step. Evidence is made from
files by content identity, so replaying the steps over the same bytes makes the same
evidence on any host (``case.manifest_open``), and the fingerprint proves it.

A step is only recorded on a copy that is up to date: ``guard`` runs before every load and
detector run. A host whose copy lacks steps of the manifest (it never ran ``tahrix case
open``) would record a step over partial evidence that no later host can replay, so its load
is refused, naming the case and who recorded the last step. The check and the work run in
the host's turn at the case (``guarded``), held until the step is recorded, so two hosts
never record steps over the same copy; the step's number is checked too, in case the turn was
lost with its connection. One exception keeps teams simple:
work that repeats the manifest's next step on a copy at the step before it (the same files by
SHA-256, the same detectors with the same parameters; a fresh copy is before step 0) is the
same evidence, so it is done, checked against that step's fingerprint, and not recorded again.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.report import FileReport, LoadReport
from tahrix_lab.case.record_sync import ANALYSTS

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
# Analysts' labels (``LBL-A-`` ids) are annotations: they live in the record and reach every
# host through it, so they are not evidence a load or detector run made.
FINGERPRINT_WHERE = {"labels": f"NOT ({ANALYSTS})"}
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
        only = f" AND {FINGERPRINT_WHERE[table]}" if table in FINGERPRINT_WHERE else ""
        row = f"list_value({', '.join(f'{c}::VARCHAR' for c in cols)})::VARCHAR"
        n, hi, lo = (
            db.cursor()
            .execute(
                f"SELECT count(*), coalesce(sum(('0x' || h[1:16])::UBIGINT::HUGEINT), 0), "
                f"coalesce(sum(('0x' || h[17:32])::UBIGINT::HUGEINT), 0) "
                f"FROM (SELECT md5({row}) AS h FROM {table} WHERE case_id = ?{only})",
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


Step = dict[str, Any]  # a manifest step as ``case_manifest`` returns it


class StaleCopy(UserFacingError):
    """This host's copy of a case lacks steps of its manifest: nothing was loaded or run."""


def _work(kind: str, entry: dict[str, Any]) -> str:
    """What a step did, to compare (not its counts or paths): the files' bytes and the load's
    options, or the detectors and their parameters (not the flags it kept); JSON with sorted keys."""
    if kind == "load":
        entry = {k: v for k, v in entry.items() if k in ("source", "chain", "token", "force")} | {
            "files": [f["sha256"] for f in entry["files"]]
        }
    else:
        entry = {k: v for k, v in entry.items() if k in ("detectors", "params")}
    return kind + json.dumps(entry, sort_keys=True, default=str)


@dataclass
class Turn:
    """A load's or detector run's turn at the case's manifest, from ``guarded`` to ``record_step``."""

    number: int  # the steps in the manifest when the work began: the number its step gets
    replayed: Step | None = None  # the work repeats this step: check it, record nothing


@contextmanager
def guarded(
    db: CaseDB, case_id: str, kind: str, work: Callable[[], dict[str, Any]], *, manifest: bool = True
) -> Iterator[Turn | None]:
    """Around a load or detector run: this host's turn at the case (``case_turn``: another
    host's work in progress raises ``CaseBusy``) and ``guard``; ``None`` when the work is no
    step of the manifest (``manifest=False``: a rebuild from it)."""
    if not manifest:
        yield None
        return
    with db.record.case_turn(case_id.strip()):
        yield guard(db, case_id, kind, work)


def guard(db: CaseDB, case_id: str, kind: str, work: Callable[[], dict[str, Any]]) -> Turn:
    """Before a load or detector run (``work()``: its entry as far as known beforehand: the
    files' SHA-256, options; detectors and parameters). The copy here is up to date (or the
    case has no manifest): record the step after it; the work repeats the next step
    (``replayed``): replay it without recording. Else ``StaleCopy``."""
    case_id = case_id.strip()
    steps = db.record.case_manifest(case_id)
    turn = Turn(len(steps))
    if not steps:
        return turn
    here = fingerprint(db, case_id) if db.case_exists(case_id) else None
    if here == steps[-1]["fingerprint"]:
        return turn
    # the steps the copy here is at (a fresh copy: before step 0); the latest is where it stands
    at = [-1] if here is None else [i for i, s in enumerate(steps) if s["fingerprint"] == here]
    if at and _work(kind, work()) == _work(steps[at[-1] + 1]["kind"], steps[at[-1] + 1]["entry"]):
        turn.replayed = steps[at[-1] + 1]
        return turn
    last = steps[-1]
    state = f"the copy here is at step {at[-1]}" if at else "the copy here matches no step of it"
    if here is None:
        state = "there is no copy of it here"
    raise StaleCopy(
        f"Case {case_id!r} has {len(steps)} steps in the record's manifest (the last, step {last['step']}, "
        f"recorded by {last['recorded_by'] or 'an unnamed user'}); {state}, so a {kind} here "
        "would record a step over partial evidence that no other host could replay. Nothing was "
        f"loaded or run: bring the copy up to date with `tahrix case open {case_id}` (--files DIR "
        "where the files are), then try again."
    )


def record_step(db: CaseDB, case_id: str, kind: str, entry: dict[str, Any], turn: Turn) -> None:
    """Append a step, with the evidence's fingerprint after it, to the case's manifest, as
    number ``turn.number``; for a step ``guard`` found repeated, check the evidence is that
    step's instead."""
    after = fingerprint(db, case_id)
    replayed = turn.replayed
    if replayed is None:
        steps = db.record.case_manifest(case_id)
        last = steps[-1] if len(steps) == turn.number and steps else None
        if last and last["fingerprint"] == after and _work(kind, entry) == _work(last["kind"], last["entry"]):
            return  # the same work again on the same evidence (a notebook run twice): nothing to replay
        db.record.add_manifest_step(case_id, kind, entry, after, step_id=str(uuid.uuid4()),
                                    recorded_by=os.environ.get("TAHRIX_USER"), number=turn.number)  # fmt: skip
    elif after != replayed["fingerprint"]:
        raise UserFacingError(
            f"Case {case_id!r}: this {kind} repeats step {replayed['step']} of the manifest (recorded by "
            f"{replayed['recorded_by'] or 'an unnamed user'}) but the evidence here differs from it: was it "
            "made by another version of Tahrix Lab, or with another label library or prices?"
        )


def files_work(paths: Iterable[Path], **options: Any) -> dict[str, Any]:
    """A load's entry as known before it runs, for ``guard``."""
    return {**options, "files": [{"sha256": sha256_file(p)} for p in paths]}


def record_folder_load(
    db: CaseDB,
    folder: Path,
    files: Iterable[Path],
    report: LoadReport,
    loaded_by: str,
    turn: Turn,
) -> None:
    by_file = {fr.file: fr for fr in report.files}
    entry = {
        "source": "folder",
        "folder": os.fspath(folder),
        "loaded_by": loaded_by,
        "files": [file_entry(f, **report_counts(by_file.get(str(f)))) for f in files],
        "inserted": report.inserted,
    }
    record_step(db, report.case_id, "load", entry, turn)


def record_files_load(
    db: CaseDB,
    paths: Sequence[Path],
    report: LoadReport,
    *,
    chain: str | None,
    token: str | None,
    force: bool,
    turn: Turn,
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
    record_step(db, report.case_id, "load", entry, turn)


def record_detect(
    db: CaseDB,
    case_id: str,
    params: dict[str, dict[str, Any]],
    kept: list[str],
    inputs: dict[str, Any],
    turn: Turn,
) -> None:
    """A detector run: the detectors in order with every parameter used (defaults included,
    so a rebuild by a later version with other defaults uses these thresholds), the flags it
    kept that no longer held because analysts had decided on them, and the roles and analysts'
    labels it read."""
    entry = {"detectors": list(params), "params": params, "kept": sorted(kept), "inputs": inputs}
    record_step(db, case_id, "detect", entry, turn)
