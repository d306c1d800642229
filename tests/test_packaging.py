"""`pip install .` (not only editable) must carry the front end and the sample case."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_ships_widgets_and_data(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("tahrix_lab-*.whl")
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
