"""What the `tahrix` transcript commands share: the record, a session id from a prefix, and output.

Only the standard library at import: ``tahrix --help`` loads none of the rest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tahrix_lab.agent.storage import TranscriptStore


def open_store() -> TranscriptStore:
    from tahrix_lab.agent.storage import TranscriptStore

    return TranscriptStore()


def resolve_id(store: TranscriptStore, given: str) -> str:
    """A full session id from an id or a unique prefix of one."""
    from tahrix_lab.agent.errors import ConfigurationError

    ids = store.session_ids_starting(given, limit=3)
    if not ids:
        raise ConfigurationError(f"No session id starts with {given!r} in {store.path!r}.")
    if len(ids) > 1 and given not in ids:
        raise ConfigurationError(f"{given!r} matches several sessions; give more of the id.")
    return ids[0] if len(ids) == 1 else given


def new_console() -> Any:
    from tahrix_lab.flow.terminal import terminal_console

    return terminal_console()


def print_json_lines(rows: Sequence[dict[str, Any]]) -> None:
    """JSON Lines on stdout; ASCII only, so no stored control character reaches a terminal."""
    for row in rows:
        print(json.dumps(row, ensure_ascii=True, default=_json_default, allow_nan=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars from DataFrames
        return value.item()
    return str(value)


def plain(value: Any) -> Any:
    """A DataFrame cell as JSON: NaN and NaT are unknown (null), never 0."""
    if value is None:
        return None
    try:
        if value != value:  # NaN
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "to_pydatetime"):
        return value.to_pydatetime().isoformat()
    return value.item() if hasattr(value, "item") else value


def usd(value: Any) -> str:
    return "unknown" if value is None or value != value else f"${value:.4f}"  # NaN is unknown too
