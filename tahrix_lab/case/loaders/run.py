"""One load of export files: staged, identified and merged in one transaction.

Every step stages one file's rows (``_mv``/``_tx``/``_as``) and the shared core
merges them; a refusal anywhere rolls the whole load back. Every query reads
its result to the end, so small reads on the same connection before or after
(``ws.require_case()``) never meet an unfinished result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.known_tokens import known_rows
from tahrix_lab.case.loaders.merge import create_stages, drop_stages, merge_all
from tahrix_lab.case.loaders.report import FileReport, LoadError, LoadReport

Stager = Callable[[duckdb.DuckDBPyConnection, FileReport], None]
# Called with the load's report inside its transaction, just before it commits: the manifest
# step is recorded there, so a step the record refuses or never gets leaves nothing loaded.
Recorder = Callable[[LoadReport], None]


@dataclass
class LoadStep:
    """One step of a load: stage ``report``'s file (and ``more``) into the shared staging tables."""

    report: FileReport
    stage: Stager
    # consecutive steps of one batch are merged together (one pass over the case per batch, not per
    # file); a batch never mixes sources whose ids differ in kind (positional vs canonical)
    batch: str = ""
    # further files one step stages together with ``report``'s (one read of all files of a layout);
    # such a step sets ``_file`` itself, from ``base``: the index of ``report`` in its batch
    more: list[FileReport] = field(default_factory=list)
    base: int = 0

    @property
    def reports(self) -> list[FileReport]:
        return [self.report, *self.more]


@contextmanager
def transaction(
    cur: duckdb.DuckDBPyConnection, before_commit: Callable[[], None] | None = None
) -> Iterator[None]:
    """BEGIN … COMMIT around one load; whatever is raised inside rolls all of it back first.

    Every load (exports here, case folders in ``folder_fast`` and ``folder_checked``) writes
    through this, so a load is all or nothing whichever path it takes. ``before_commit`` runs
    last inside it (the manifest step: ``Recorder``); if it raises, nothing is loaded."""
    cur.execute("BEGIN")
    try:
        yield
        if before_commit is not None:
            before_commit()
    except BaseException:
        cur.execute("ROLLBACK")
        raise
    cur.execute("COMMIT")


def make_decimals(cur: duckdb.DuckDBPyConnection) -> None:
    """``_decimals``: what the case knows (``assets``) first, then the shipped table."""
    known = known_rows()
    cur.execute(
        "CREATE OR REPLACE TEMP TABLE _known (asset_key VARCHAR, decimals INTEGER, canonical VARCHAR)"
    )
    cur.execute(
        "INSERT INTO _known SELECT unnest($k), unnest($d), unnest($c)",
        {"k": [r[0] for r in known], "d": [r[3] for r in known], "c": [r[4] for r in known]},
    )
    cur.execute(
        """CREATE OR REPLACE TEMP TABLE _decimals AS
        SELECT asset_key, decimals FROM assets WHERE decimals IS NOT NULL
        UNION ALL SELECT asset_key, decimals FROM _known ANTI JOIN (SELECT asset_key FROM assets WHERE decimals IS NOT NULL) USING (asset_key)"""
    )


def run_load(
    db: CaseDB,
    case_id: str,
    steps: Sequence[LoadStep],
    *,
    prelude: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    record: Recorder | None = None,
) -> LoadReport:
    case_id = case_id.strip()
    if not case_id:
        raise LoadError(steps[0].report.file if steps else "", "a case id is required")
    report = LoadReport(case_id)
    with db.write_lock:
        cur = db.cursor()
        current = steps[0].report.file if steps else ""
        try:
            with transaction(cur, None if record is None else lambda: record(report)):
                cur.execute(
                    "INSERT INTO cases (case_id, title) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    [case_id, case_id],
                )
                make_decimals(cur)
                if prelude is not None:
                    prelude(cur)
                batches: list[list[LoadStep]] = []
                for step in steps:
                    if not batches or batches[-1][0].batch != step.batch or not step.batch:
                        batches.append([])
                    batches[-1].append(step)
                for batch in batches:
                    create_stages(cur)
                    reports: list[FileReport] = []
                    for step in batch:
                        current = step.report.file
                        step.base = len(reports)
                        reports += step.reports
                        step.stage(cur, step.report)
                        for stage in ("_mv", "_tx", "_as"):
                            cur.execute(f"UPDATE {stage} SET _file = ? WHERE _file IS NULL", [step.base])
                    current = (
                        reports[-1].file
                        if len(reports) == 1
                        else f"{len(reports)} files ({reports[0].file} …)"
                    )
                    merge_all(cur, case_id, reports)
                    for fr in reports:
                        report.files.append(fr)
                        report.add_inserted("transfers", fr.inserted)
                        for table, n in fr.tables.items():
                            report.add_inserted(table, n)
                        report.skipped_duplicates["transfers"] = (
                            report.skipped_duplicates.get("transfers", 0) + fr.merged
                        )
                db.refresh_addresses(cur, case_id)
        except duckdb.Error as exc:
            raise LoadError(current, f"could not be written: {str(exc).splitlines()[0][:300]}") from None
        finally:
            drop_stages(cur)
    return report
