"""Where the shipped files are: ``widgets/`` (front end) and ``data/`` (sample case).

In a wheel they are the packages ``tahrix_lab.widgets`` and ``tahrix_lab.data``;
in a source checkout (editable install) they are the top-level folders.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

_REPO = Path(__file__).resolve().parent.parent


def resource_dir(kind: Literal["widgets", "data"]) -> Path:
    try:
        found = Path(str(resources.files(f"tahrix_lab.{kind}")))
        if found.is_dir():
            return found
    except ModuleNotFoundError:
        pass
    return _REPO / kind


def widget_file(name: str) -> Path:
    return resource_dir("widgets") / name


def data_path(*parts: str) -> Path:
    return resource_dir("data").joinpath(*parts)
