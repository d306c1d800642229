from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tahrix_lab.agent.storage.duck import connect
from tahrix_lab.case.db import CaseDB

_path = Path(__file__).parent
if str(_path) not in sys.path:
    sys.path.insert(0, str(_path))


@pytest.fixture
def db() -> CaseDB:
    return CaseDB(connect(":memory:"))
