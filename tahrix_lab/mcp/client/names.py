"""Tool names: the neutral ``server.tool`` and the wire-safe ``server__tool``.

MCP tool names may hold dots and slashes and run to 128 characters; OpenAI
and Bedrock accept only ``^[a-zA-Z0-9_-]{1,64}$``. The registry (and so the
model and the transcript's ``tool_name``) uses the wire-safe name; the
neutral one is kept in ``Tool.source`` as ``mcp:server.tool``. Server names
never contain ``__`` (see ``config.SERVER_NAME``), so the prefix is unambiguous.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

WIRE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SEPARATOR = "__"
MAX_WIRE = 64


def neutral_name(server: str, tool: str) -> str:
    return f"{server}.{tool}"


def wire_name(server: str, tool: str, taken: Container[str] = ()) -> str:
    """A provider-safe name for ``server.tool``; stable, and distinct from every name in ``taken``."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", tool) or "tool"
    name = f"{server}{SEPARATOR}{safe}"
    if len(name) <= MAX_WIRE and name not in taken and safe == tool:
        return name
    # Cut (or disambiguate a lossy rewrite) with a short digest of the exact neutral name.
    digest = hashlib.sha256(neutral_name(server, tool).encode()).hexdigest()
    for width in (8, 12, 16, 64):
        suffix = f"_{digest[:width]}"
        candidate = name[: MAX_WIRE - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    raise ValueError(f"no free wire name for {neutral_name(server, tool)!r}")
