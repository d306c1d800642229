"""Where the front end's files are: ``widgets/`` (flow.js, the panels, the service page).

In a wheel they are installed inside the package (``tahrix_lab/widgets``); in a
source checkout they are the top-level folder. (The sample case's ``data/`` is the
case package's: ``tahrix_lab.case.workspace.sample_case_dir``.)
"""

from __future__ import annotations

import re
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def widgets_dir() -> Path:
    installed = _PACKAGE / "widgets"
    return installed if installed.is_dir() else _PACKAGE.parent / "widgets"


def widget_file(name: str) -> Path:
    return widgets_dir() / name


_LOCAL_IMPORT = re.compile(r'^import \{[^}]*\} from "\./[\w.-]+";\n', re.MULTILINE)


def widget_bundle(*names: str) -> str:
    """The named modules of ``widgets/`` as one, in the order given (each after what it imports).

    anywidget serves ``_esm`` as one module from a blob URL, where a relative import cannot
    resolve: the files are joined and their imports of each other dropped. The service page
    loads the same files as modules, imports and all."""
    return "\n".join(_LOCAL_IMPORT.sub("", widget_file(name).read_text(encoding="utf-8")) for name in names)
