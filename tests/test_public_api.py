"""The curated public surface (STYLE.md habit 13) and the engine's independence."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

ENGINE_NAMES = {
    "MAX_TOOL_CYCLES", "REGISTRY", "Backend", "BackendError", "Budget", "BudgetExceeded", "ConfigurationError",
    "ContextProvider", "FakeBackend", "Message", "Part", "Pricer", "RetryPolicy", "Session", "StoreLockedError",
    "TahrixError", "Tool", "ToolDenied", "ToolOutcome", "ToolRegistry", "ToolRetry", "ToolSpec", "TranscriptStore",
    "Usage", "UserFacingError", "ask", "build_messages", "catalog_for", "get_backend", "price", "register",
    "run_agent", "run_tool",
}  # fmt: skip


def test_engine_exports_exactly_its_public_names() -> None:
    import tahrix_lab.agent as agent

    assert set(agent.__all__) == ENGINE_NAMES
    for name in agent.__all__:
        assert getattr(agent, name) is not None


@pytest.mark.parametrize(
    "package", ["tahrix_lab.agent", "tahrix_lab.case", "tahrix_lab.jobs", "tahrix_lab.lab"]
)
def test_every_exported_name_exists(package: str) -> None:
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", []):
        assert hasattr(module, name), f"{package}.__all__ names {name!r} which does not exist"


def test_the_engine_does_not_import_provider_sdks_until_chosen() -> None:
    code = (
        "import sys, tahrix_lab.agent as a; a.get_backend('fake');"
        "bad = [m for m in ('boto3', 'openai', 'tahrix_lab.case', 'tahrix_lab.jobs', 'tahrix_lab.lab') if m in sys.modules];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
