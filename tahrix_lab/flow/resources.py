"""Where the front end's files are: ``widgets/`` (flow.js, the panels, the service page).

In a wheel they are installed inside the package (``tahrix_lab/widgets``); in a
source checkout they are the top-level folder. (The sample case's ``data/`` is the
case package's: ``tahrix_lab.case.workspace.sample_case_dir``.)
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def widgets_dir() -> Path:
    installed = _PACKAGE / "widgets"
    return installed if installed.is_dir() else _PACKAGE.parent / "widgets"


def widget_file(name: str) -> Path:
    return widgets_dir() / name
