"""Shared fixtures for the lab tests: a store and a scripted original session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# the loopback wire servers live in tests/wire, the shared helpers here (lab_helpers)
for _path in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from lab_helpers import QUESTIONS, run  # noqa: E402

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore  # noqa: E402
from tahrix_lab.agent.backends.fake import reasoning, text, tool_call  # noqa: E402
from tahrix_lab.agent.transcript import Session  # noqa: E402

# a real PostgreSQL server for the tests that run on both engines (costs, moving a workspace)
from tests.agent.storage.conftest import pg_server, pg_url, store_target  # noqa: E402, F401


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TranscriptStore]:
    s = TranscriptStore(tmp_path / "lab.duckdb")
    yield s
    s.close()


@pytest.fixture
def registry() -> ToolRegistry:
    """Two tools that count how often they really ran (a recorded replay must not run them)."""
    reg = ToolRegistry()
    reg.runs = []  # type: ignore[attr-defined]
    schema = {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}

    @reg.register(parameters=schema, purposes=("investigation",))
    def lookup_address(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Label of an address."""
        reg.runs.append(("lookup_address", args))  # type: ignore[attr-defined]
        return {"address": args["address"], "label": "exchange hot wallet", "risk": 0.2}

    @reg.register(parameters=schema, purposes=("investigation",))
    def trace_funds(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Where funds went."""
        reg.runs.append(("trace_funds", args))  # type: ignore[attr-defined]
        return {"hops": [{"to": "0xdef", "value": 12.5}]}

    return reg


@pytest.fixture
def original(store: TranscriptStore, registry: ToolRegistry) -> Session:
    """An investigation on "openai"/gpt-4o: two user turns, three tool calls."""
    session = store.create_session(
        user="ana", purpose="investigation", title="case 7", system_prompt="Be precise."
    )
    backend = FakeBackend(
        [
            [reasoning("Look the address up first."), tool_call("lookup_address", {"address": "0xabc"})],
            [text("0xabc is an exchange hot wallet.")],
            [tool_call("trace_funds", {"address": "0xabc"})],
            [tool_call("lookup_address", {"address": "0xdef"})],
            [text("The funds moved to 0xdef, also an exchange.")],
        ],
        name="openai",
    )
    for q in QUESTIONS:
        run(store, session, q, backend, "gpt-4o", registry)
    registry.runs.clear()  # type: ignore[attr-defined]
    return session
