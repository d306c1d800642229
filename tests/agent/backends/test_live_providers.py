"""The same checks against real providers. Marked ``live``: they run only with
``TAHRIX_LIVE=1`` and real credentials, and spend a few hundred tokens each.

    TAHRIX_LIVE=1 OPENAI_API_KEY=… .venv/bin/pytest -m live tests/agent/backends
    TAHRIX_LIVE=1 AWS_PROFILE=… AWS_REGION=us-east-1 TAHRIX_LIVE_BEDROCK_MODEL=us.anthropic.claude-3-5-haiku-20241022-v1:0 …
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from backend_conformance import REGISTRY, SPECS

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message

pytestmark = pytest.mark.live


def _require(*names: str) -> None:
    if os.environ.get("TAHRIX_LIVE") != "1":
        pytest.skip("live provider tests run only with TAHRIX_LIVE=1")
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.skip(f"live provider test needs {', '.join(missing)}")


def _tool_round_trip(backend: Backend, model: str) -> list[tuple[str, dict[str, Any]]]:
    store = TranscriptStore(":memory:")
    session = store.create_session(
        system_prompt="Use the lookup_address tool before answering. Answer in one sentence."
    )
    store.append_message(session.id, Message.user("Who owns 0xabc?"))
    events = list(
        run_agent(
            session,
            store=store,
            backend=backend,
            model=model,
            tools=SPECS,
            registry=REGISTRY,
            inference={"max_tokens": 300},
        )
    )
    store.close()
    assert not [p for k, p in events if k == "error"], events
    assert any(k == "tool_result" for k, _ in events)
    usage = [p["usage"] for k, p in events if k == "usage"]
    assert usage and all(u["input_tokens"] and u["output_tokens"] for u in usage)
    return events


def test_openai_live() -> None:
    _require("OPENAI_API_KEY")
    from tahrix_lab.agent.backends.openai import OpenAIBackend

    backend = OpenAIBackend()
    try:
        _tool_round_trip(backend, os.environ.get("TAHRIX_LIVE_OPENAI_MODEL", "gpt-4o-mini"))
    finally:
        backend.client.close()


def test_bedrock_live() -> None:
    _require("TAHRIX_LIVE_BEDROCK_MODEL")
    from tahrix_lab.agent.backends.bedrock import BedrockBackend

    backend = BedrockBackend()
    try:
        _tool_round_trip(backend, os.environ["TAHRIX_LIVE_BEDROCK_MODEL"])
    finally:
        backend.client.close()
