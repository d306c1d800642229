"""What a Workspace loads: case folders, export files and label lists, and what it exports back.

Each method hands the files to ``case.loaders`` or ``case.labels`` with the
workspace's case database; ``Workspace`` inherits them, so ``ws.load_path(...)``
and the rest stay where analysts call them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tahrix_lab.case import loaders
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.labels import LabelLoadReport, load_labels
from tahrix_lab.case.labels import find as find_labels
from tahrix_lab.case.labels import sources as label_sources


class WorkspaceFiles:
    """The loading half of ``Workspace``."""

    cases: CaseDB

    def load_case_folder(self, path: str | os.PathLike[str]) -> loaders.LoadReport:
        return loaders.load_case_folder(self.cases, path)

    def load_etherscan_csv(
        self,
        case_id: str,
        path: str | os.PathLike[str],
        *,
        chain: str | None = None,
        token: str | None = None,
    ) -> loaders.LoadReport:
        return loaders.load_etherscan_csv(self.cases, case_id, path, chain=chain, token=token)

    def load_etl_csv(
        self, case_id: str, path: str | os.PathLike[str], *, chain: str = "ethereum"
    ) -> loaders.LoadReport:
        return loaders.load_etl_csv(self.cases, case_id, path, chain=chain)

    def load_file(
        self,
        case_id: str,
        path: str | os.PathLike[str],
        *,
        chain: str | None = None,
        token: str | None = None,
        force: bool = False,
    ) -> loaders.LoadReport:
        """One export file, recognised by its header. The report shows as a table in a notebook."""
        return loaders.load_file(self.cases, case_id, path, chain=chain, token=token, force=force)

    def load_files(
        self,
        case_id: str,
        paths: Iterable[str | os.PathLike[str]],
        *,
        chain: str | None = None,
        token: str | None = None,
        force: bool = False,
    ) -> loaders.LoadReport:
        """Several export files in one transaction (ethereum-etl files as one set)."""
        return loaders.load_files(self.cases, case_id, paths, chain=chain, token=token, force=force)

    def load_path(
        self,
        path: str | os.PathLike[str],
        *,
        case_id: str | None = None,
        chain: str | None = None,
        token: str | None = None,
        force: bool = False,
    ) -> loaders.LoadReport:
        """A case folder, a folder of exports or one export file."""
        return loaders.load_path(self.cases, path, case_id=case_id, chain=chain, token=token, force=force)

    # -- the label library --------------------------------------------------------
    def load_labels(
        self,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
        *,
        source: str | None = None,
        as_of: str | None = None,
        chain: str | None = None,
        asset: str | None = None,
        added_by: str | None = None,
    ) -> LabelLoadReport:
        """Label files (eth-labels, Etherscan export, OFAC lists and SDN files, own CSV) into the
        workspace's label library, seen by every case; idempotent (docs/case.md "Label library")."""
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        return load_labels(self.cases, paths, source=source, as_of=as_of, chain=chain, asset=asset,
                           added_by=added_by)  # fmt: skip

    def find_labels(self, address: str, chain: str | None = None) -> list[dict[str, Any]]:
        """Every label of an address across the library, analysts' labels and cases, with its source."""
        return find_labels(self.cases, address, chain)

    def label_sources(self) -> list[dict[str, Any]]:
        return label_sources(self.cases)

    def load_reports(self, case_id: str) -> list[dict[str, Any]]:
        """The stored per-file reports of every load into the case, oldest first."""
        rows = self.cases.rows(
            "SELECT file, format, loaded_at, report FROM load_reports WHERE case_id = ? ORDER BY loaded_at, file",
            [case_id],
        )
        return [{**r, "report": json.loads(r["report"])} for r in rows]

    def open_case(
        self, case_id: str, *, files: str | os.PathLike[str] | None = None, verify: bool = False
    ) -> dict[str, Any]:
        """Rebuild (or with ``verify``, check) the case's evidence here from its manifest in the
        record; ``files``: where the manifest's files are now (docs/workspace.md)."""
        from tahrix_lab.case.manifest_open import open_case

        return open_case(self.cases, case_id, files=files, verify=verify)

    def export_case(self, case_id: str, folder: str | os.PathLike[str]) -> Path:
        return loaders.export_case(self.cases, case_id, folder)
