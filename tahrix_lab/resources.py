"""Where the shipped files are: ``widgets/`` (front end) and ``data/`` (sample case).

In a wheel they are installed inside the package (``tahrix_lab/widgets``,
``tahrix_lab/data``); in a source checkout they are the top-level folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parent


def resource_dir(kind: Literal["widgets", "data"]) -> Path:
    installed = _PACKAGE / kind
    return installed if installed.is_dir() else _REPO / kind


def widget_file(name: str) -> Path:
    return resource_dir("widgets") / name


def data_path(*parts: str) -> Path:
    return resource_dir("data").joinpath(*parts)
