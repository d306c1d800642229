"""Open a case on this host from its manifest in the record (docs/workspace.md "Sharing a
case's evidence"): rebuild its evidence in the local DuckDB file, or verify a local copy.

A rebuild replays the manifest's steps (loads, detector runs) over the same files. Every
file is found and its SHA-256 checked before anything is written: a file whose bytes
differ is refused, by name, and nothing is loaded. After each step the evidence's
fingerprint must equal the one recorded on the host that made it, so a rebuild that
succeeds is the same evidence (same movement ids, amounts, flags). A local copy that
matches an earlier step is caught up with the steps after it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors import run_detectors
from tahrix_lab.case.loaders import LoadError, load_case_folder, load_files
from tahrix_lab.case.loaders.manifest import fingerprint, sha256_file
from tahrix_lab.case.schema import FOLDER_TABLES

Files = str | os.PathLike[str] | None


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Each table whose rows or content differ, in words."""
    out = []
    for table, want in expected.items():
        got = actual.get(table, {"rows": 0, "hash": None})
        if got != want:
            same = "same count, other content" if got["rows"] == want["rows"] else f"{got['rows']:,} here"
            out.append(f"{table}: {want['rows']:,} rows expected, {same}")
    return out


def open_case(db: CaseDB, case_id: str, *, files: Files = None, verify: bool = False) -> dict[str, Any]:
    """Rebuild (or catch up) the case's evidence here from its manifest; with ``verify``, only
    compare the local copy with the manifest's last fingerprint. ``files``: a folder where the
    manifest's files are now (by file name, or by their case folder's name), when not at
    their paths as given. Returns ``{case_id, status, steps, replayed, differences}``:
    status ``rebuilt``, ``caught up``, ``identical`` or (verify only) ``differs``."""
    steps = db.record.case_manifest(case_id)
    if not steps:
        known = ", ".join(db.record.manifest_cases()) or "none"
        raise UserFacingError(f"The record has no manifest for case {case_id!r} (cases with one: {known}).")
    last = steps[-1]["fingerprint"]
    here = fingerprint(db, case_id) if db.case_exists(case_id) else None
    if verify:
        if here is None:
            raise UserFacingError(f"Case {case_id!r} has no copy here to verify: open it first.")
        diff = differences(last, here)
        return {"case_id": case_id, "status": "differs" if diff else "identical", "steps": len(steps),
                "replayed": 0, "differences": diff}  # fmt: skip
    start = 0
    if here is not None:
        matched = [i for i, s in enumerate(steps) if s["fingerprint"] == here]
        if not matched:
            raise UserFacingError(
                f"The copy of case {case_id!r} here differs from every step of its manifest "
                f"({'; '.join(differences(last, here))}): open it into a fresh evidence file "
                "($TAHRIX_EVIDENCE_DB), or keep this one and compare."
            )
        start = matched[-1] + 1
    todo = steps[start:]
    located = [_locate(s["entry"], files) if s["kind"] == "load" else [] for s in todo]
    for step, paths in zip(todo, located, strict=True):
        if step["kind"] == "load":
            _check(step["entry"], paths)
    for step, paths in zip(todo, located, strict=True):
        _replay(db, case_id, step, paths)
        diff = differences(step["fingerprint"], fingerprint(db, case_id))
        if diff:
            raise UserFacingError(
                f"Case {case_id!r}: after step {step['step']} ({_what(step)}, recorded by "
                f"{step['recorded_by'] or 'an unnamed user'}) the evidence here differs from the manifest's: "
                f"{'; '.join(diff)}. Was the step made on a host whose copy was not up to date, by another "
                "version of Tahrix Lab, or with another label library or prices?"
            )
    status = "rebuilt" if here is None else "caught up" if todo else "identical"
    return {
        "case_id": case_id,
        "status": status,
        "steps": len(steps),
        "replayed": len(todo),
        "differences": [],
    }


def _what(step: dict[str, Any]) -> str:
    if step["kind"] == "detect":
        return "detectors " + ", ".join(step["entry"]["detectors"])
    names = [os.path.basename(f["path"]) for f in step["entry"]["files"]]
    return "load of " + ", ".join(names[:3]) + (" …" if len(names) > 3 else "")


def _locate(entry: dict[str, Any], files: Files) -> list[Path]:
    """Where each of a load's files is on this host: at its path as given, else under ``files``."""
    given = [Path(f["path"]) for f in entry["files"]]
    if entry["source"] == "folder":  # a case folder moves as a whole
        folder = Path(entry["folder"])
        places = [folder] + ([Path(files) / folder.name, Path(files)] if files is not None else [])
        for place in places:
            if all((place / p.name).is_file() for p in given):
                return [place / p.name for p in given]
        missing = next(p for p in given if not (folder / p.name).is_file())
        raise LoadError(missing, _not_found(places))
    out = []
    for p in given:
        places = [p] + ([Path(files) / p.name] if files is not None else [])
        found = next((q for q in places if q.is_file()), None)
        if found is None:
            raise LoadError(p, _not_found(places))
        out.append(found)
    return out


def _not_found(places: list[Path]) -> str:
    where = ", ".join(str(p) for p in places)
    return f"a file of the case's manifest is not here (looked in {where}); give --files DIR where it is"


def _check(entry: dict[str, Any], paths: list[Path]) -> None:
    """Refuse, by name, a file whose bytes are not those the manifest recorded."""
    for f, path in zip(entry["files"], paths, strict=True):
        sha = sha256_file(path)
        if sha != f["sha256"]:
            raise LoadError(
                path,
                f"its SHA-256 ({sha[:12]}…) differs from the manifest's ({f['sha256'][:12]}…): "
                "not the file the case was loaded from; nothing was loaded",
            )
    if entry["source"] == "folder":
        known = {p.name for p in paths}
        for table in FOLDER_TABLES:  # a table file the load did not have would load too
            for ext in (".csv", ".parquet"):
                extra = paths[0].parent / f"{table}{ext}"
                if extra.is_file() and extra.name not in known:
                    raise LoadError(extra, "this case folder has a file its manifest does not: remove it")


def _replay(db: CaseDB, case_id: str, step: dict[str, Any], paths: list[Path]) -> None:
    entry = step["entry"]
    if step["kind"] == "detect":
        run_detectors(db, case_id, entry["detectors"], entry["params"], manifest=False, replay=entry)
    elif entry["source"] == "folder":
        load_case_folder(db, paths[0].parent, loaded_by=entry.get("loaded_by") or "loader", manifest=False)
    else:
        load_files(db, case_id, paths, chain=entry["chain"], token=entry["token"], force=entry["force"],
                   manifest=False)  # fmt: skip
