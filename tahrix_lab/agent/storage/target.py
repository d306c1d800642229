"""Where the record lives: a DuckDB path or a PostgreSQL URL, told apart in one place.

``TAHRIX_DB``, ``--db``, ``TranscriptStore(...)`` and ``Workspace(...)`` all take the same
*target*: a file path (the DuckDB default), ``":memory:"``, or a libpq URL
(``postgresql://user:pw@host:5432/db?sslmode=require``; the password may also come from
``PGPASSWORD`` or ``~/.pgpass``). Anything else that looks like a URL is a mistake, never a
path: ``mysql://…`` or ``postgres:/x`` raise ``ConfigurationError`` instead of quietly making a
directory named ``mysql:``.

A URL's password is never printed or logged: show ``redacted(url)``.
"""

from __future__ import annotations

import os
import re
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tahrix_lab.agent.errors import ConfigurationError

DEFAULT_DB = "tahrix.duckdb"
PG_SCHEMES = ("postgresql", "postgres")
# A scheme of two letters or more then a colon: one letter is a Windows drive ("C:\\…").
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
_SECRET_PARAMS = frozenset({"password", "sslpassword"})

Engine = Literal["duckdb", "postgresql"]


def default_target() -> str:
    """``$TAHRIX_DB``, else ``tahrix.duckdb`` in the working directory."""
    return os.environ.get("TAHRIX_DB") or DEFAULT_DB


def engine_of(target: str | os.PathLike[str]) -> Engine:
    """Which engine a target names; an unknown or malformed URL is a ``ConfigurationError``."""
    text = os.fspath(target)
    match = _SCHEME.match(text)
    if match is None:
        return "duckdb"
    scheme = match.group(1).lower()
    if scheme in PG_SCHEMES and text[match.end() :].startswith("//"):
        return "postgresql"
    if scheme in PG_SCHEMES:
        raise ConfigurationError(
            f"{redacted(text)!r} is not a PostgreSQL URL: write postgresql://user@host:5432/dbname."
        )
    raise ConfigurationError(
        f"Unknown database URL scheme {scheme!r} in {redacted(text)!r}: give a DuckDB file path "
        "or a postgresql://… URL."
    )


def redacted(target: str | os.PathLike[str]) -> str:
    """The target with any password replaced by ``***`` (safe to print and log)."""
    text = os.fspath(target)
    if _SCHEME.match(text) is None:
        return text
    try:
        parts = urlsplit(text)
    except ValueError:
        return "<unparsable database URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hosts = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hosts}" if ":" in userinfo else f"{user}@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if k in _SECRET_PARAMS else v) for k, v in pairs], safe="*/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def server_of(url: str) -> str:
    """``host:port/dbname`` of a PostgreSQL URL, for calm messages (no user, no password)."""
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    host = parts.hostname or params.get("host") or os.environ.get("PGHOST") or "localhost"
    try:
        port = parts.port or params.get("port") or os.environ.get("PGPORT") or 5432
    except ValueError:
        port = "?"
    name = parts.path.lstrip("/") or params.get("dbname") or ""
    return f"{host}:{port}" + (f"/{name}" if name else "")
