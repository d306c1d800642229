"""The bearer tokens file both servers read (``{"<token>": "<user>"}``), and the throw-away token
a server started without one prints."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.secrets import check_tokens_file


def load_tokens(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a tokens file, naming what is wrong with it: mode 0600 and strong tokens first
    (``agent.secrets.check_tokens_file``)."""
    check_tokens_file(path)
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
    for user in data.values():
        if not isinstance(user, str) or not user:
            raise ConfigurationError(
                f"The tokens file {str(path)!r} maps each token to a user name; check the entry for user {user!r}."
            )
    return {str(k): str(v) for k, v in data.items()}


def dev_token() -> str:
    """A throw-away token for a server started without a tokens file."""
    return secrets.token_urlsafe(32)  # as strong as the tokens file must hold
