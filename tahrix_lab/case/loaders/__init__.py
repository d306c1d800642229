"""Loaders: case folders and the world's exports, as they are.

One module per source family around one shared core:

* ``folder`` — case folders (CSV or Parquet; ``export`` writes them back): a
  fast path for a fresh case from clean CSVs (``folder_fast``) and the checked
  path that names the bad line (``folder_checked``);
* ``etherscan`` — Etherscan-family CSV exports;
* ``etl`` — ethereum-etl / BigQuery CSVs, loaded as one set;
* ``csvfile`` reads an export CSV as it comes; ``merge`` identifies movements
  by content and merges them; ``run`` makes one load one transaction;
  ``report`` is the per-file load report; ``files`` recognises files by header.

A new format is one new module that stages rows for ``merge``.
"""

from tahrix_lab.case.loaders.columns import TABLE_COLUMNS
from tahrix_lab.case.loaders.export import export_case
from tahrix_lab.case.loaders.files import (
    ACCEPTED,
    load_etherscan_csv,
    load_etl_csv,
    load_file,
    load_files,
    load_path,
    recognise,
)
from tahrix_lab.case.loaders.folder import load_case_folder, read_case_json
from tahrix_lab.case.loaders.report import Conflict, FileReport, LoadError, LoadReport
from tahrix_lab.case.loaders.utxo import derive_utxo_transfers

__all__ = [
    "ACCEPTED",
    "TABLE_COLUMNS",
    "Conflict",
    "FileReport",
    "LoadError",
    "LoadReport",
    "derive_utxo_transfers",
    "export_case",
    "load_case_folder",
    "load_etherscan_csv",
    "load_etl_csv",
    "load_file",
    "load_files",
    "load_path",
    "read_case_json",
    "recognise",
]
