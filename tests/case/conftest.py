from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.case.workspace import Workspace, sample_case_dir


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return sample_case_dir()


@pytest.fixture(scope="session")
def ground_truth(sample_dir: Path) -> dict[str, Any]:
    return json.loads((sample_dir / "ground_truth.json").read_text())


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A workspace with the sample case loaded and detected, shared by read-only tests."""
    ws = Workspace(tmp_path_factory.mktemp("ws") / "shared.duckdb")
    ws.load_sample_case()
    yield ws
    ws.close()


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """A fresh workspace with the sample case, for tests that write."""
    w = Workspace(tmp_path / "t.duckdb")
    w.load_sample_case()
    yield w
    w.close()
