from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# pytest runs with --import-mode=importlib: make the loopback wire servers
# (tests/wire) and this folder's helpers importable by name.
_HERE = Path(__file__).resolve().parent
for _path in (_HERE, _HERE.parents[1]):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from harness import HARNESSES, Harness  # noqa: E402

from tahrix_lab.agent.storage import TranscriptStore  # noqa: E402


@pytest.fixture(params=sorted(HARNESSES))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    with HARNESSES[request.param]() as h:
        yield h


@pytest.fixture
def store() -> Iterator[TranscriptStore]:
    s = TranscriptStore(":memory:")
    try:
        yield s
    finally:
        s.close()
