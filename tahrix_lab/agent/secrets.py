"""Secrets hygiene any server can reuse: a tokens file nobody else can read, tokens strong
enough to guess at no rate, and URLs printed without their passwords."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tahrix_lab.agent.errors import ConfigurationError

MIN_TOKEN_CHARS = 32  # e.g. ``secrets.token_urlsafe(32)`` gives 43


def check_tokens_file(path: str | os.PathLike[str]) -> None:
    """Refuse a tokens file that group or others may read or write, or that holds a short token.

    Raises ``ConfigurationError`` with what to do (``chmod 600``, a longer token)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except OSError as exc:
        raise ConfigurationError(f"Could not read the tokens file {str(path)!r}: {exc.strerror}.") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(
            f"The tokens file {str(path)!r} is readable or writable by others (mode {stat.S_IMODE(mode):04o}); "
            f"anyone who reads it can act as its users. Run: chmod 600 {str(path)!r}"
        )
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return  # the loader names what is wrong with its contents
    if isinstance(data, dict):
        short = [user for token, user in data.items() if len(str(token)) < MIN_TOKEN_CHARS]
        if short:
            raise ConfigurationError(
                f"The tokens file {str(path)!r} has tokens shorter than {MIN_TOKEN_CHARS} characters "
                f"(users {', '.join(map(str, short))}); make them with: "
                'python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``redis://:pw@host`` → ``redis://:***@host``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
