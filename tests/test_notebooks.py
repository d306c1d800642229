"""Every notebook runs top to bottom, offline, on the project's kernel; outputs are stripped in git."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tahrix_lab.app.commands.notebook import KERNEL_NAME, install_kernelspec

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_there() -> None:
    names = [p.name for p in NOTEBOOKS]
    assert {"01_investigate_case.ipynb", "02_replay_and_diff.ipynb", "03_costs.ipynb"} <= set(names), names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_outputs_are_stripped(path: Path) -> None:
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == KERNEL_NAME
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, cell["source"][:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the project's kernel: this venv's python, found through a private JUPYTER_PATH
    spec_dir = install_kernelspec(tmp_path / "jupyter", sys.executable)
    monkeypatch.setenv("JUPYTER_PATH", str(spec_dir.parents[1]))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("TAHRIX_BACKEND", "fake")  # offline whatever the environment says
    monkeypatch.setenv("TAHRIX_DB", str(tmp_path / "never-used.duckdb"))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        timeout=300,
        resources={"metadata": {"path": str(tmp_path)}},  # run in a scratch folder
        allow_errors=False,
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert errors == []
    assert any(cell.outputs for cell in nb.cells if cell.cell_type == "code")
