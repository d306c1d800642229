"""Choose a backend from configuration, importing its SDK only when chosen.

    TAHRIX_BACKEND          fake | openai | bedrock | an OpenAI-compatible base URL
    TAHRIX_MODEL            the model id to use (``default_model()``)
    TAHRIX_MODEL_ALIASES    Bedrock application-inference-profile ARNs -> model ids,
                            as JSON ``{"arn:…": "anthropic.claude-…"}`` or
                            ``arn:…=anthropic.claude-…,arn:…=…`` (for quirks and prices)
    OPENAI_API_KEY, OPENAI_BASE_URL                      read by the openai backend
    AWS_REGION, AWS_PROFILE, AWS_ACCESS_KEY_ID, …        read by boto3 for bedrock
    AWS_ENDPOINT_URL_BEDROCK_RUNTIME                     boto3's own endpoint override

Missing credentials raise ``ConfigurationError`` naming the variable to set.
"""

from __future__ import annotations

import importlib
import json
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

# a model to start with when TAHRIX_MODEL is not set
DEFAULT_MODELS: dict[str, str] = {
    "fake": "fake-model",
    "openai": "gpt-4o-mini",
    "bedrock": "us.anthropic.claude-sonnet-4-20250514-v1:0",
}


def get_backend(name_or_url: str | None = None, **config: Any) -> Backend:
    """A backend by name (``fake``, ``openai``, ``bedrock``) or by an
    OpenAI-compatible base URL; ``None`` reads ``TAHRIX_BACKEND``."""
    choice = backend_name(name_or_url)
    if choice.startswith(("http://", "https://")):
        config.setdefault("base_url", choice)
        choice = "openai"
    target = BACKENDS.get(choice)
    if target is None:
        raise ConfigurationError(
            f"Unknown backend {choice!r}. Set TAHRIX_BACKEND to one of: {', '.join(sorted(BACKENDS))}, "
            "or to an OpenAI-compatible base URL."
        )
    if choice == "bedrock":
        config.setdefault("model_aliases", model_aliases())
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    backend: Backend = factory(**config)
    return backend


def backend_name(name_or_url: str | None = None) -> str:
    return name_or_url or os.environ.get("TAHRIX_BACKEND") or "fake"


def default_model(backend: str | None = None) -> str:
    """``TAHRIX_MODEL``, else a sensible model for the chosen backend family."""
    model = os.environ.get("TAHRIX_MODEL")
    if model:
        return model
    name = backend_name(backend)
    family = "openai" if name.startswith(("http://", "https://")) else name
    return DEFAULT_MODELS.get(family, DEFAULT_MODELS["fake"])


def model_aliases(raw: str | None = None) -> dict[str, str]:
    """``TAHRIX_MODEL_ALIASES`` parsed: profile ARN (or any id) -> model id.

    Pass the result to ``Pricer(aliases=...)`` so calls on an application
    inference profile are priced as the model behind it."""
    text = (raw if raw is not None else os.environ.get("TAHRIX_MODEL_ALIASES", "")).strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"TAHRIX_MODEL_ALIASES is not valid JSON: {exc}") from exc
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ConfigurationError("TAHRIX_MODEL_ALIASES must map strings to strings.")
        return dict(value)
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        # ARNs contain ':' but never '=': split on the last '='
        key, sep, value = item.strip().rpartition("=")
        if not sep or not key or not value:
            raise ConfigurationError(
                f"TAHRIX_MODEL_ALIASES entry {item.strip()!r} is not of the form ARN=model-id."
            )
        out[key.strip()] = value.strip()
    return out
