"""Choose a backend from configuration, importing its SDK only when chosen.

The OpenAI and Bedrock adapters fill in their own factories in their modules;
this file only knows the names.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.errors import ConfigurationError

# name -> "module:factory"; the factory takes keyword configuration.
BACKENDS: dict[str, str] = {
    "fake": "tahrix_lab.agent.backends.fake:FakeBackend",
    "openai": "tahrix_lab.agent.backends.openai:OpenAIBackend",
    "bedrock": "tahrix_lab.agent.backends.bedrock:BedrockBackend",
}


def get_backend(name_or_url: str | None = None, **config: Any) -> Backend:
    """A backend by name (``fake``, ``openai``, ``bedrock``) or by an
    OpenAI-compatible base URL; ``None`` reads ``TAHRIX_BACKEND``."""
    choice = name_or_url or os.environ.get("TAHRIX_BACKEND") or "fake"
    if choice.startswith(("http://", "https://")):
        config.setdefault("base_url", choice)
        choice = "openai"
    target = BACKENDS.get(choice)
    if target is None:
        raise ConfigurationError(
            f"Unknown backend {choice!r}. Set TAHRIX_BACKEND to one of: {', '.join(sorted(BACKENDS))}, "
            "or to an OpenAI-compatible base URL."
        )
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    backend: Backend = factory(**config)
    return backend
