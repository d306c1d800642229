"""`pip install .` (not only editable) must carry the front end and the sample case."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("tahrix_lab-*.whl")
    return built


def test_wheel_ships_widgets_and_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (REPO / "widgets").glob("*.*"):
        assert f"tahrix_lab/widgets/{path.name}" in names
    shipped_data = [p for p in (REPO / "data").rglob("*") if p.is_file()]
    assert shipped_data, "data/ should hold the sample case"
    for path in shipped_data:
        assert f"tahrix_lab/data/{path.relative_to(REPO / 'data').as_posix()}" in names
    assert "tahrix_lab/py.typed" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "tahrix = tahrix_lab.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_wheel_ships_every_module(wheel: Path) -> None:
    """Every module of the package is in the wheel (a sub-package missing from pyproject's list is not)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tahrix_lab").rglob("*.py"))
    assert modules
    assert [m for m in modules if m not in names] == []


def test_resources_resolve_inside_an_installed_package(wheel: Path, tmp_path: Path) -> None:
    """Unpack the wheel and resolve widgets and data from it, with the checkout out of reach."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tahrix_lab.flow.resources import widget_file;"
        "from tahrix_lab.case.workspace import sample_case_dir;"
        "print(widget_file('flow.js').is_file(), (sample_case_dir() / 'case.json').is_file(),"
        " widget_file('flow.js').is_relative_to(sys.argv[1]))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, str(site)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert out.stdout.split() == ["True", "True", "True"]
