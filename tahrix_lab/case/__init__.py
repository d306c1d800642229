"""The investigation domain: case database, loaders, sample case, tools, detectors, demo.

Imports only the engine (``tahrix_lab.agent``); see docs/case.md.
"""

from tahrix_lab.case.context import CaseContextProvider, Grant, ToolContext
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors import DETECTORS, run_detectors
from tahrix_lab.case.generator import generate_case
from tahrix_lab.case.loaders import (
    LoadError,
    LoadReport,
    export_case,
    load_case_folder,
    load_etherscan_csv,
    load_etl_csv,
    load_file,
    load_path,
)
from tahrix_lab.case.prompts import INVESTIGATION_PROMPT
from tahrix_lab.case.tools import CASE_TOOLS, register_case_tools
from tahrix_lab.case.tracing import TraceParams, trace_funds
from tahrix_lab.case.workspace import SAMPLE_CASE_ID, Workspace

__all__ = [
    "CASE_TOOLS",
    "DETECTORS",
    "INVESTIGATION_PROMPT",
    "SAMPLE_CASE_ID",
    "CaseContextProvider",
    "CaseDB",
    "Grant",
    "LoadError",
    "LoadReport",
    "ToolContext",
    "TraceParams",
    "Workspace",
    "export_case",
    "generate_case",
    "load_case_folder",
    "load_etherscan_csv",
    "load_etl_csv",
    "load_file",
    "load_path",
    "register_case_tools",
    "run_detectors",
    "trace_funds",
]
