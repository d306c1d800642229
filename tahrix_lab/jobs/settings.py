"""Configuration of ``tahrix serve``: flags first, then environment, then defaults.

Environment variables: ``TAHRIX_REDIS_URL``, ``TAHRIX_TOKENS_FILE``,
``TAHRIX_BACKEND``, ``TAHRIX_MODEL``, ``TAHRIX_FAKE_SCRIPT``, ``TAHRIX_DB``.

The tokens file is a JSON object mapping bearer tokens to user names::

    {"s3cret-token-of-alice": "alice", "another-token": "bob"}
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tahrix_lab.agent.errors import ConfigurationError

Role = Literal["all", "api", "worker"]


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 4
    role: Role = "all"
    api_processes: int = 1  # role api: processes sharing the port (api_processes.py)
    redis_url: str | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    backend: str | None = None
    model: str | None = None
    fake_script: str | None = None
    db: str | None = None
    max_body_bytes: int = 64 * 1024
    max_wait_s: float = 25.0
    job_ttl_s: float = 180.0
    max_running_per_user: int | None = 8  # answers running or queued per user; more get 429
    lease_s: float = 6.0  # a job whose worker stops renewing for this long ends (or moves)
    budget_minute_tokens: int | None = None
    budget_hour_tokens: int | None = None
    budget_monthly_usd: float | None = None
    budget_global_monthly_usd: float | None = None

    @property
    def backend_name(self) -> str:
        return self.backend or os.environ.get("TAHRIX_BACKEND") or "fake"

    @property
    def model_name(self) -> str:
        model = self.model or os.environ.get("TAHRIX_MODEL")
        if model:
            return model
        if self.backend_name == "fake":
            return "fake-model"
        raise ConfigurationError("Set the model id with --model or TAHRIX_MODEL for this backend.")

    def has_budget(self) -> bool:
        return any(
            v is not None
            for v in (
                self.budget_minute_tokens,
                self.budget_hour_tokens,
                self.budget_monthly_usd,
                self.budget_global_monthly_usd,
            )
        )


def load_tokens(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a tokens file (see the module docstring), naming what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigurationError(f"Could not read the tokens file {str(path)!r}: {exc.strerror}.") from None
    except ValueError as exc:
        raise ConfigurationError(f"The tokens file {str(path)!r} is not valid JSON: {exc}.") from None
    if not isinstance(data, dict) or not data:
        raise ConfigurationError(
            f'The tokens file {str(path)!r} must be a JSON object like {{"<token>": "<user>"}}.'
        )
    for token, user in data.items():
        if not isinstance(user, str) or not user or len(token) < 8:
            raise ConfigurationError(
                f"The tokens file {str(path)!r} maps each token (8 characters or more) to a user name; "
                f"check the entry for user {user!r}."
            )
    return {str(k): str(v) for k, v in data.items()}


def dev_token() -> str:
    """A throw-away token for a server started without a tokens file."""
    return secrets.token_urlsafe(18)
