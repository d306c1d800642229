"""Recognise export files by their header and load them: one file, several, or a folder.

``load_path`` takes what an analyst has: a case folder (``case.json``), a
folder of exports (ethereum-etl outputs load as one set, Etherscan exports one
by one, all in one transaction), or one file. A file no loader knows is
refused with what it looks like and the formats that are accepted.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from tahrix_lab.case.chains import resolve_chain
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders.csvfile import header_key, read_header, stage_csv
from tahrix_lab.case.loaders.etherscan import export_kind, stage_etherscan
from tahrix_lab.case.loaders.etl import EtlSet, etl_kind
from tahrix_lab.case.loaders.folder import load_case_folder
from tahrix_lab.case.loaders.manifest import files_work, guarded, record_files_load
from tahrix_lab.case.loaders.report import FileReport, LoadError, LoadReport
from tahrix_lab.case.loaders.run import LoadStep, Recorder, run_load
from tahrix_lab.case.schema import FOLDER_TABLES

ACCEPTED = (
    "Etherscan-family exports (Etherscan, BscScan, PolygonScan, Arbiscan, Optimism, Basescan, Snowtrace): "
    "normal, internal, ERC-20, ERC-721, ERC-1155 and token-page CSVs; "
    "ethereum-etl / BigQuery CSVs: transactions, blocks, token_transfers, traces, receipts, logs, tokens, contracts; "
    "a case folder (case.json plus transfers.csv …)"
)


def recognise(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(family, kind)``: ``("etherscan", "erc20")``, ``("etl", "traces")``…, or a ``LoadError``."""
    file = Path(path)
    if file.suffix.lower() == ".parquet":
        raise LoadError(
            file, f"Parquet is read only inside a case folder. Accepted files: {ACCEPTED}", line=1
        )
    header = read_header(file)
    keys = {header_key(h) for h in header}
    if kind := export_kind(keys):
        return "etherscan", kind
    if kind := etl_kind(keys):
        return "etl", kind
    raise LoadError(file, f"{_looks_like(header, keys)}; no loader knows it. Accepted: {ACCEPTED}", line=1)


def _looks_like(header: list[str], keys: set[str]) -> str:
    shown = ", ".join(header[:8]) + (", …" if len(header) > 8 else "")
    for table in FOLDER_TABLES:
        if {"transferid", "assetkey"} <= keys or ({"labelid", "category"} <= keys and table == "labels"):
            return f"it looks like a case-folder table ({shown}): load its folder, with case.json"
    if keys & {"txhash", "transactionhash"}:
        return f"it looks like an explorer export, but not one of the known layouts (columns: {shown})"
    if len(header) == 1 and (header[0].startswith("{") or header[0].startswith("[")):
        return "it looks like JSON, not CSV"
    return f"its columns are {shown}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _unchanged(db: CaseDB, case_id: str, path: Path, sha: str) -> FileReport | None:
    """An Etherscan export with the same bytes as one already loaded into the case adds nothing:
    its rows were identified and merged then. Say so instead of reading it again."""
    rows = db.rows(
        "SELECT file, report FROM load_reports WHERE case_id = ? AND sha256 = ? ORDER BY loaded_at DESC LIMIT 1",
        [case_id.strip(), sha],
    )
    if not rows:
        return None
    before = json.loads(rows[0]["report"])
    fr = FileReport(str(path), "unchanged: " + str(before.get("format", "")), sha256=sha)
    fr.skip("already loaded into this case with the same content (SHA-256); use force=True to merge again",
            int(before.get("rows read", 0)))  # fmt: skip
    fr.notes.append(f"same bytes as {rows[0]['file']}")
    return fr


def _etherscan_step(paths: list[tuple[Path, str]], chain: str | None, token: str | None, n: int) -> LoadStep:
    """One step for Etherscan exports of one header layout: staged with one read, checked and
    identified with one query each (per-file work would cost a statement per file and step)."""
    frs = [FileReport(str(p), "etherscan", sha256=sha) for p, sha in paths]
    step = LoadStep(frs[0], lambda cur, fr: None, batch="etherscan", more=frs[1:])

    def stage(cur, fr: FileReport) -> None:  # type: ignore[no-untyped-def]
        st = stage_csv(cur, [p for p, _ in paths], f"_es_file{n}")
        for r, rows in zip(frs, st.file_rows, strict=True):
            r.rows_read = rows
        stage_etherscan(cur, st, frs, chain=chain, token=token, base=step.base)
        st.drop(cur)

    step.stage = stage
    return step


def load_files(
    db: CaseDB,
    case_id: str,
    paths: Iterable[str | os.PathLike[str]],
    *,
    chain: str | None = None,
    token: str | None = None,
    force: bool = False,
    manifest: bool = True,
) -> LoadReport:
    """Several export files into one case, in one transaction (ethereum-etl files as one set).

    An Etherscan export whose bytes were already loaded into the case is reported as unchanged and
    not read again, unless ``force``. The load is a step of the case's manifest in the record
    unless ``manifest=False`` (a rebuild from it)."""
    files = [Path(p) for p in paths]
    if chain is not None:
        chain = resolve_chain(chain)
    work = lambda: files_work(files, source="files", chain=chain, token=token, force=force)  # noqa: E731
    with guarded(db, case_id, "load", work, manifest=manifest) as turn:
        record = (
            None
            if turn is None
            else partial(record_files_load, db, files, chain=chain, token=token, force=force, turn=turn)
        )
        return _load(db, case_id, files, chain=chain, token=token, force=force, record=record)


def _load(db: CaseDB, case_id: str, files: list[Path], *, chain: str | None, token: str | None,
          force: bool, record: Recorder | None) -> LoadReport:  # fmt: skip
    unchanged: list[FileReport] = []
    etl: dict[str, Path] = {}
    # Etherscan exports grouped by header layout, in the order first met (a token-page export
    # names its token in its file name: each is its own group)
    layouts: dict[object, list[tuple[Path, str]]] = {}
    seen: dict[Path, int] = {}
    for f in files:
        family, kind = recognise(f)
        if family == "etherscan":
            sha = _sha256(f)
            same = None if force else _unchanged(db, case_id, f, sha)
            if same is not None:
                unchanged.append(same)
            else:
                layout = f if kind == "token-page" else tuple(read_header(f))
                # the same file named twice is read twice, as a second group (one read holds it once)
                seen[f] = seen.get(f, -1) + 1
                layouts.setdefault((layout, seen[f]), []).append((f, sha))
        elif kind in etl:
            raise LoadError(
                f,
                f"a second ethereum-etl {kind} file in one set (the other: {etl[kind]}): load them one at a time",
            )
        else:
            etl[kind] = f
    steps = [_etherscan_step(group, chain, token, i) for i, group in enumerate(layouts.values())]

    def recorded(report: LoadReport) -> None:  # the step names every file given, the unchanged ones too
        if record is not None:
            record(replace(report, files=[*report.files, *unchanged]))

    recorder: Recorder | None = None if record is None else recorded
    if not etl:
        report = run_load(db, case_id, steps, record=recorder)
    else:
        s = EtlSet(etl, chain or "ethereum", case_id.strip())

        def prelude(cur) -> None:  # type: ignore[no-untyped-def]
            s.prelude(cur)

        try:
            report = run_load(db, case_id, [*s.steps(), *steps], prelude=prelude, record=recorder)
        finally:
            with db.write_lock:
                s.drop(db.cursor())
    report.files += unchanged
    # in the order the files were given (they were staged grouped by layout)
    # (a file named twice: its reports in turn take its places)
    places: dict[str, list[int]] = {}
    for i, f in enumerate(files):
        places.setdefault(str(f), []).append(i)
    keyed = [(places[fr.file].pop(0) if places.get(fr.file) else len(files), fr) for fr in report.files]
    report.files = [fr for _, fr in sorted(keyed, key=lambda kf: kf[0])]
    return report


def load_file(
    db: CaseDB,
    case_id: str,
    path: str | os.PathLike[str],
    *,
    chain: str | None = None,
    token: str | None = None,
    force: bool = False,
) -> LoadReport:
    """One export file, recognised by its header."""
    return load_files(db, case_id, [path], chain=chain, token=token, force=force)


def load_path(
    db: CaseDB,
    path: str | os.PathLike[str],
    *,
    case_id: str | None = None,
    chain: str | None = None,
    token: str | None = None,
    force: bool = False,
) -> LoadReport:
    """A case folder, a folder of exports, or one export file."""
    p = Path(path)
    if p.is_dir() and (p / "case.json").exists():
        return load_case_folder(db, p)
    if not p.exists():
        raise LoadError(p, "no such file or folder")
    if not case_id:
        raise LoadError(p, "loading exports needs a case id (the case they belong to)")
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".csv")
        if not files:
            raise LoadError(p, f"no case.json and no CSV files in this folder. Accepted: {ACCEPTED}")
        return load_files(db, case_id, files, chain=chain, token=token, force=force)
    return load_file(db, case_id, p, chain=chain, token=token, force=force)


def _load_one_family(
    db: CaseDB, case_id: str, path: str | os.PathLike[str], family: str, **options: Any
) -> LoadReport:
    found, kind = recognise(path)
    if found != family:
        wanted = {"etherscan": "an Etherscan export", "etl": "an ethereum-etl file"}
        other = {"etherscan": "load_etherscan_csv", "etl": "load_etl_csv"}[found]
        raise LoadError(
            path, f"this is a {found} {kind} file, not {wanted[family]}: use {other} or load_file", line=1
        )
    return load_files(db, case_id, [path], **options)


def load_etherscan_csv(
    db: CaseDB,
    case_id: str,
    path: str | os.PathLike[str],
    *,
    chain: str | None = None,
    token: str | None = None,
) -> LoadReport:
    """An Etherscan-family export (normal, internal, ERC-20/721/1155 or token page)."""
    return _load_one_family(db, case_id, path, "etherscan", chain=chain, token=token)


def load_etl_csv(
    db: CaseDB, case_id: str, path: str | os.PathLike[str], *, chain: str = "ethereum"
) -> LoadReport:
    """One ethereum-etl / BigQuery CSV; its block times may come from the case's transactions."""
    return _load_one_family(db, case_id, path, "etl", chain=chain)
