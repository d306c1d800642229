"""Results the model reads whole: summary first, then detail pages sized to a byte budget.

``fit(result, detail, budget, cursor, fingerprint)`` keeps every key not named
in ``detail`` (the summary: counts, totals, top endpoints…) and fills the
remaining budget with items of the ``detail`` lists in that order. What did
not fit is named in ``page`` with a ``next_cursor``: the same call with
``cursor`` set returns the next items. Nothing is cut mid-item, so the agent
loop's 32 KB backstop never has to cut a case tool's result.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from tahrix_lab.agent.errors import ToolRetry

DEFAULT_BUDGET = 8_000
MIN_BUDGET = 2_000
MAX_BUDGET = 30_000  # under the loop's 32 KB backstop
PAGE_ARGS = ("cursor", "budget_bytes")
PAGE_PROPERTIES: dict[str, Any] = {
    "cursor": {"type": "string", "description": "next_cursor from a previous call with the same arguments."},
    "budget_bytes": {"type": "integer", "minimum": MIN_BUDGET, "maximum": MAX_BUDGET,
                     "description": "Size of the answer in bytes (default about 8 KB); the rest is paged."},
}  # fmt: skip


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


def fingerprint(args: dict[str, Any]) -> str:
    rest = {k: v for k, v in args.items() if k not in PAGE_ARGS}
    return hashlib.sha1(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _decode(cursor: str, fp: str) -> dict[str, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode() + b"==").decode())
        offsets = {str(k): int(v) for k, v in data["o"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ToolRetry("The cursor is not one this tool returned; call again without it.") from None
    if data.get("f") != fp:
        raise ToolRetry("The cursor belongs to a call with other arguments; repeat those arguments with it.")
    return offsets


def _encode(offsets: dict[str, int], fp: str) -> str:
    raw = json.dumps({"o": offsets, "f": fp}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def fit(
    result: dict[str, Any],
    detail: tuple[str, ...],
    *,
    budget: int = DEFAULT_BUDGET,
    cursor: str | None = None,
    fp: str = "",
) -> dict[str, Any]:
    """``result`` with its ``detail`` lists paged to ``budget`` bytes (see the module doc)."""
    offsets = _decode(cursor, fp) if cursor else {}
    lists = {k: result[k] for k in detail if isinstance(result.get(k), list)}
    out = {k: v for k, v in result.items() if k not in lists}
    room = budget - size(out) - 400  # the page block
    shown: dict[str, list[int]] = {}
    nxt: dict[str, int] = {}
    for key, items in lists.items():
        start = min(offsets.get(key, 0), len(items))
        taken: list[Any] = []
        for item in items[start:]:
            s = size(item) + 2
            if s > room and (taken or room < budget // 4):
                break
            taken.append(item)  # a first item bigger than the room still goes: never an empty page
            room -= s
        out[key] = taken
        shown[key] = [start, start + len(taken), len(items)]
        if start + len(taken) < len(items):
            nxt[key] = start + len(taken)
    if cursor or nxt:
        page: dict[str, Any] = {
            "budget_bytes": budget,
            "shown": {k: {"from": a, "to": b, "of": n} for k, (a, b, n) in shown.items()},
        }
        if nxt:
            # keys already done stay done: the next page starts past what was shown
            page["next_cursor"] = _encode({**{k: shown[k][1] for k in lists}, **nxt}, fp)
            page["note"] = "More detail than fits: call again with the same arguments and cursor=next_cursor."
        out["page"] = page
    return out
