"""Bounded tool results: one cap in bytes, applied where a result leaves the tool.

A tool result is stored in the transcript and sent to the model; one careless
call (``SELECT repeat('a', 100000000)``) must not put 100 MB in either. So the
result is bounded once, at the tool boundary, before anything keeps it:

- a long string keeps its head and ends with ``…[truncated: N characters]``;
- a long list keeps its first items and ends with ``…[N more items left out]``;
- the limits shrink until the whole result, serialised as JSON (UTF-8,
  ``ensure_ascii=False``), fits ``max_bytes``; a result that still does not
  fit (very deep or very wide) becomes a note with an excerpt of its JSON.

A bounded result says so: ``truncated: true`` and a ``bounded`` note with the
original size. A result already under the cap is returned unchanged (the same
object), so replays send the same bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

_MARK = re.compile(r"…\[truncated: ([\d,]+) characters\]$")
# Per-string (characters) and per-list (items) limits tried in turn, loosest first.
_LIMITS = ((4096, 200), (1024, 50), (256, 20), (64, 5), (16, 2))


def json_size(value: Any) -> int:
    """The bytes of ``value`` as JSON (UTF-8); raises ``TypeError``/``ValueError`` if it is not JSON."""
    return len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))


def bound(result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``result`` cut to at most ``max_bytes`` of JSON, with explicit markers where it was cut.

    Raises ``TypeError``/``ValueError`` when the result is not JSON (as ``json.dumps``).
    """
    # No string longer than the cap can fit whole: cut those first, so a 100 MB cell is never
    # serialised. A result under the cap has none, so it is untouched by this pass.
    pre: dict[str, Any] = _shrink(result, max_bytes + 1, None)
    size = json_size(pre)
    if pre is result and size <= max_bytes:
        return result
    original = size if pre is result else _estimate(result)
    for str_limit, list_limit in _LIMITS:
        out = _shrink(pre, str_limit, list_limit)
        assert isinstance(out, dict)
        out = _marked(out, original, max_bytes)
        if json_size(out) <= max_bytes:
            return out
    return _excerpt(pre, original, max_bytes)


def _shrink(value: Any, str_limit: int, list_limit: int | None) -> Any:
    """``value`` with strings over ``str_limit`` characters and lists over ``list_limit`` items cut.

    Returns ``value`` itself when nothing was cut (so callers can tell by identity)."""
    if isinstance(value, str):
        if len(value) <= str_limit:
            return value
        cut = _MARK.search(value)  # cut before (the first pass): keep the original size
        head, total = (value[: cut.start()], cut.group(1)) if cut else (value, f"{len(value):,}")
        return f"{head[:str_limit]}…[truncated: {total} characters]"
    if isinstance(value, dict):
        items = {k: _shrink(v, str_limit, list_limit) for k, v in value.items()}
        changed = any(items[k] is not v for k, v in value.items())
        return items if changed else value
    if isinstance(value, list | tuple):
        shown = list(value) if list_limit is None else list(value[:list_limit])
        kept = [_shrink(v, str_limit, list_limit) for v in shown]
        left = len(value) - len(shown)
        if left:
            kept.append(f"…[{left:,} more items left out]")
        changed = left > 0 or any(a is not b for a, b in zip(kept, shown, strict=False))
        return kept if changed else value
    return value


def _estimate(value: Any) -> int:
    """The JSON size of ``value`` without serialising its long strings (they count by length)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", errors="replace")) + 2 if len(value) < 1 << 20 else len(value) + 2
    if isinstance(value, dict):
        return 2 + sum(_estimate(str(k)) + 2 + _estimate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 2 + sum(_estimate(v) + 2 for v in value)
    return len(json.dumps(value, allow_nan=False))


def _note(original: int, max_bytes: int) -> str:
    return (
        f"[result bounded to {max_bytes:,} bytes from about {original:,}: long text and long lists are cut "
        "where marked; ask for fewer rows, narrower filters or a smaller page]"
    )


def _marked(out: dict[str, Any], original: int, max_bytes: int) -> dict[str, Any]:
    marked = dict(out)
    if isinstance(marked.get("truncated", False), bool):  # a tool's own flag means the same thing
        marked["truncated"] = True
    marked["bounded"] = _note(original, max_bytes)
    return marked


def _excerpt(value: Any, original: int, max_bytes: int) -> dict[str, Any]:
    """The last resort: a note and as much of the JSON text as fits."""
    out: dict[str, Any] = {"truncated": True, "bounded": _note(original, max_bytes), "excerpt": ""}
    if json_size(out) > max_bytes:
        out = {"truncated": True}
        return out if json_size(out) <= max_bytes else {}
    text = json.dumps(value, ensure_ascii=False)
    room = max_bytes - json_size(out)
    take = room
    while take > 0:  # escaping can grow the excerpt: shrink until it fits
        out["excerpt"] = text[:take]
        over = json_size(out) - max_bytes
        if over <= 0:
            return out
        take -= max(over, 1)
    out["excerpt"] = ""
    return out
