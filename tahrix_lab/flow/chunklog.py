"""The chunk log: one answer's chunks in order, and what they fold into.

Every surface that keeps chunks keeps them this way: the notebook widget (its
live run and snapshot), the job service's memory store, its Redis writer and
the API's long-poll tail.

* ``ChunkLog`` numbers chunks from ``base``: chunk n keeps index n for good,
  so a reader that passes ``since`` never misses one and never sees one twice.
  ``append`` adds, ``since`` reads from an index, ``trim`` forgets what every
  reader already has.
* ``merge`` is the one merge rule: a ``content`` (or ``reasoning``) chunk
  extends the one before it when it is of the same kind with the same flags.
  ``compact`` applies it to a run of chunks; the text is the same, in order, and
  draws exactly like the tokens it came from.
* ``Fold`` folds chunks into an answer's summary: the text, the reasoning, the
  tool calls and their status, the usage summed (the seed's ``prompt_tokens`` /
  ``completion_tokens`` beside the neutral names; unknown stays ``None``, never
  0) and how it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Chunk = dict[str, Any]

_STREAMING = frozenset({"content", "reasoning"})


def merge(prev: Chunk, chunk: Chunk) -> Chunk | None:
    """``prev`` extended by ``chunk`` when the rule allows it (same streaming kind, same flags), else None."""
    if chunk["type"] not in _STREAMING or prev["type"] != chunk["type"] or len(prev) != len(chunk):
        return None
    if any(k != "text" and prev.get(k, chunk) != v for k, v in chunk.items()):
        return None
    return {**prev, "text": (prev.get("text") or "") + (chunk.get("text") or "")}


def mergeable(prev: Chunk, chunk: Chunk) -> bool:
    return merge(prev, chunk) is not None


def compact(chunks: Iterable[Chunk], into: list[Chunk] | None = None) -> list[Chunk]:
    """Merge runs of token chunks into one chunk each (onto the end of ``into`` when given)."""
    out: list[Chunk] = [] if into is None else into
    for chunk in chunks:
        merged = merge(out[-1], chunk) if out else None
        if merged is not None:
            out[-1] = merged
        else:
            out.append(chunk)
    return out


@dataclass
class ChunkLog:
    """Chunks numbered from ``base`` (those before it were trimmed, or never held here)."""

    chunks: list[Chunk] = field(default_factory=list)
    base: int = 0

    @property
    def next(self) -> int:
        """The index the next chunk gets."""
        return self.base + len(self.chunks)

    def append(self, chunks: Iterable[Chunk]) -> None:
        self.chunks.extend(chunks)

    def holds(self, since: int) -> bool:
        return self.base <= since <= self.next

    def since(self, n: int) -> list[Chunk]:
        """The chunks from index ``n`` (all of those held when ``n`` is older than ``base``)."""
        return self.chunks[max(n - self.base, 0) :]

    def trim(self, n: int) -> None:
        """Forget the chunks before index ``n`` (every reader has them)."""
        n = min(n, self.next)
        if n > self.base:
            del self.chunks[: n - self.base]
            self.base = n


@dataclass
class Fold:
    """The summary folded from chunks. ``encoded`` keeps the JSON fields as last encoded: a
    writer sends them with every append, and encoding them per append cost more than the append."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    encoded: dict[str, str] = field(
        default_factory=lambda: {"tool_calls": "[]", "usage": "{}", "stop_reason": "null"}
    )

    @classmethod
    def of(cls, summary: dict[str, Any]) -> Fold:
        """Go on folding from a summary read back (``summary()``'s shape). Encoded on demand."""
        calls = [dict(c) for c in summary.get("tool_calls") or []]
        return cls(summary.get("content") or "", summary.get("reasoning") or "", calls,
                   dict(summary.get("usage") or {}), summary.get("stop_reason"), encoded={})  # fmt: skip

    def extend(self, chunks: Iterable[Chunk]) -> Fold:
        for chunk in chunks:
            self.apply(chunk)
        return self

    def apply(self, chunk: Chunk) -> tuple[str, str, dict[str, str]]:
        """Fold one chunk; returns (text added, reasoning added, the JSON fields it changed)."""
        kind = chunk.get("type")
        changed: dict[str, str] = {}
        if kind == "content":
            text = chunk.get("text") or ""
            self.content += text
            return text, "", changed
        if kind == "reasoning":
            text = chunk.get("text") or ""
            self.reasoning += text
            return "", text, changed
        if kind == "tool_call":
            self.tool_calls.append({"id": chunk.get("id"), "name": chunk.get("name"), "status": "running"})
            changed["tool_calls"] = json.dumps(self.tool_calls)
        elif kind == "tool_result":
            for call in self.tool_calls:
                if call["id"] == chunk.get("id"):
                    call["status"] = chunk.get("status", "ok")
            changed["tool_calls"] = json.dumps(self.tool_calls)
        elif kind == "usage":
            self._add_usage(chunk)
            changed["usage"] = json.dumps(self.usage)
        elif kind == "done":
            self.stop_reason = chunk.get("stop_reason")
            changed["stop_reason"] = json.dumps(self.stop_reason)
        elif kind == "error":
            self.stop_reason = "error"
            changed["stop_reason"] = json.dumps("error")
        self.encoded.update(changed)
        return "", "", changed

    def end(self, cancelled: bool) -> dict[str, str]:
        """Tool calls still running when the answer ends were cancelled, or failed with it."""
        if not any(c["status"] == "running" for c in self.tool_calls):
            return {}
        for call in self.tool_calls:
            if call["status"] == "running":
                call["status"] = "cancelled" if cancelled else "error"
        changed = {"tool_calls": json.dumps(self.tool_calls)}
        self.encoded.update(changed)
        return changed

    def summary(self) -> dict[str, Any]:
        """The folded fields as a service answers them (copies)."""
        return {"stop_reason": self.stop_reason, "content": self.content, "reasoning": self.reasoning,
                "tool_calls": [dict(c) for c in self.tool_calls], "usage": dict(self.usage)}  # fmt: skip

    def fields(self) -> dict[str, str]:
        """Every folded field as strings (a Redis hash's values)."""
        enc = self.encoded
        return {"content": self.content, "reasoning": self.reasoning,
                "tool_calls": enc.get("tool_calls") or json.dumps(self.tool_calls),
                "usage": enc.get("usage") or json.dumps(self.usage),
                "stop_reason": enc.get("stop_reason") or json.dumps(self.stop_reason)}  # fmt: skip

    def _add_usage(self, chunk: Chunk) -> None:
        u = self.usage
        for k, v in (chunk.get("usage") or {}).items():
            if isinstance(v, int) and k not in ("prompt_tokens", "completion_tokens"):
                u[k] = u.get(k, 0) + v
        u["prompt_tokens"] = u.get("input_tokens")
        u["completion_tokens"] = u.get("output_tokens")
        u["calls"] = u.get("calls", 0) + 1
        cost = chunk.get("cost_usd")
        if "cost_usd" not in u:
            u["cost_usd"] = cost
        elif u["cost_usd"] is not None:
            u["cost_usd"] = None if cost is None else u["cost_usd"] + cost  # unknown stays unknown
        u["model"] = chunk.get("model")
        u["backend"] = chunk.get("backend")


def in_flight(chunks: list[Chunk]) -> Fold:
    """What streamed after the last stored model call (the last ``usage`` chunk): the text a
    transcript does not hold yet when the process running the answer dies."""
    last = max((i for i, c in enumerate(chunks) if c.get("type") == "usage"), default=-1)
    return Fold().extend(c for c in chunks[last + 1 :] if c.get("type") in _STREAMING)
