"""The alignment behind a transcript diff: turns, tool calls (arguments and results), words.

A turn is a user message and every assistant and tool message until the next
user message; the two transcripts' turns pair up by position. Within a turn
the tool calls are aligned: identical calls (name and arguments) anchor the
alignment, then calls of the same name pair up. A pair is ``same`` only when
its results are the same too: ``args_changed`` lists the argument paths that
differ, ``result_changed`` (same arguments) the result paths, so a replay on
another provider or on updated case data shows what the tools now answer.
Rendering is ``diff.TranscriptDiff``'s.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.agent.pricing import Pricer
from tahrix_lab.agent.transcript import Message, Part

ToolOp = Literal["same", "added", "removed", "args_changed", "result_changed"]
WordOp = Literal["equal", "insert", "delete"]
TOOL_OPS: tuple[ToolOp, ...] = ("same", "added", "removed", "args_changed", "result_changed")


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any] | None
    status: str | None = None
    result: dict[str, Any] | None = None


@dataclass
class ToolCallDiff:
    op: ToolOp
    name: str
    a: ToolCall | None
    b: ToolCall | None
    changed: list[str] = field(default_factory=list)  # paths of changed arguments
    result_changed: list[str] = field(default_factory=list)  # paths of changed results; "(status)"


@dataclass
class Side:
    """One transcript's half of a turn."""

    user_text: str
    text: str
    tool_calls: list[ToolCall]
    stop_reasons: list[str | None]
    calls: int
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cost_usd: float | None
    latency_ms: float | None
    ttft_ms: float | None
    models: list[str]

    @property
    def stop_reason(self) -> str | None:
        return self.stop_reasons[-1] if self.stop_reasons else None


@dataclass
class TurnDiff:
    index: int  # 1-based user turn
    a: Side | None
    b: Side | None
    similarity: float
    words: list[tuple[WordOp, str]]
    tools: list[ToolCallDiff]

    @property
    def user_text(self) -> str:
        side = self.a or self.b
        return side.user_text if side is not None else ""

    @property
    def same_user_text(self) -> bool:
        return self.a is not None and self.b is not None and self.a.user_text == self.b.user_text

    @property
    def identical(self) -> bool:
        a, b = self.a, self.b
        if a is None or b is None:
            return False
        return (
            a.user_text == b.user_text
            and a.text == b.text
            and all(t.op == "same" for t in self.tools)
            and a.stop_reasons == b.stop_reasons
            and (a.input_tokens, a.output_tokens, a.cache_read_tokens)
            == (b.input_tokens, b.output_tokens, b.cache_read_tokens)
        )

    def tool_counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(TOOL_OPS, 0)
        for t in self.tools:
            counts[t.op] += 1
        return counts


def align_turns(a: Sequence[Message], b: Sequence[Message], pricer: Pricer) -> list[TurnDiff]:
    """Both transcripts' turns, paired by position, with their text, tools and figures compared."""
    turns_a, turns_b = split_turns(a), split_turns(b)
    out: list[TurnDiff] = []
    for i in range(max(len(turns_a), len(turns_b))):
        sa = _side(turns_a[i], pricer) if i < len(turns_a) else None
        sb = _side(turns_b[i], pricer) if i < len(turns_b) else None
        ratio, words = word_diff(sa.text if sa else "", sb.text if sb else "")
        if sa is None or sb is None:
            ratio = 0.0
        tools = align_tools(sa.tool_calls if sa else [], sb.tool_calls if sb else [])
        out.append(TurnDiff(i + 1, sa, sb, ratio, words, tools))
    return out


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped by user turn (messages before the first user turn are dropped)."""
    turns: list[list[Message]] = []
    for m in messages:
        if m.role == "user":
            turns.append([m])
        elif turns:
            turns[-1].append(m)
    return turns


def _side(turn: list[Message], pricer: Pricer) -> Side:
    results: dict[str, Part] = {}
    for m in turn:
        if m.role == "tool":
            for p in m.parts:
                if p.type == "tool_result" and p.tool_use_id:
                    results[p.tool_use_id] = p
    calls = [m for m in turn if m.role == "assistant"]
    tool_calls = []
    for m in calls:
        for p in m.tool_uses():
            r = results.get(p.tool_use_id or "")
            tool_calls.append(
                ToolCall(
                    p.tool_name or "",
                    p.tool_input,
                    r.tool_status if r else None,
                    r.tool_result if r else None,
                )
            )
    # the pricer's rate rows: a diff prices hundreds of calls
    costs = [pricer.price_from_rates(m.model_id, m.usage, backend=m.backend, at=m.created_at) for m in calls]
    return Side(
        user_text=turn[0].text,
        text="\n".join(t for m in calls if (t := m.text)),
        tool_calls=tool_calls,
        stop_reasons=[m.stop_reason for m in calls],
        calls=len(calls),
        input_tokens=sum_known(m.usage.input_tokens if m.usage else None for m in calls),
        output_tokens=sum_known(m.usage.output_tokens if m.usage else None for m in calls),
        cache_read_tokens=sum_known(m.usage.cache_read_tokens if m.usage else None for m in calls),
        cost_usd=sum_known(costs, strict=True) if calls else None,
        latency_ms=sum_known(m.latency_ms for m in calls),
        ttft_ms=calls[0].ttft_ms if calls else None,
        models=sorted({m.model_id for m in calls if m.model_id}),
    )


_WORDS = re.compile(r"\S+\s*|\s+")  # a word with the spaces after it


def word_diff(a: str, b: str) -> tuple[float, list[tuple[WordOp, str]]]:
    """Similarity (0…1, over words) and the word-level edit script from ``a`` to ``b``."""
    if a == b:
        return 1.0, ([("equal", a)] if a else [])
    ta, tb = _WORDS.findall(a), _WORDS.findall(b)
    # match on the bare words; emit the tokens with their spacing
    sm = difflib.SequenceMatcher(None, [w.strip() for w in ta], [w.strip() for w in tb], autojunk=False)
    ops: list[tuple[WordOp, str]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            ops.append(("equal", "".join(ta[i1:i2])))
        else:
            if i2 > i1:
                ops.append(("delete", "".join(ta[i1:i2])))
            if j2 > j1:
                ops.append(("insert", "".join(tb[j1:j2])))
    return sm.ratio(), ops


def changed_fields(a: Any, b: Any, prefix: str = "", whole: str = "(arguments)") -> list[str]:
    """Paths where two JSON values differ: dicts recursed (``filters.min``), lists of the
    same length recursed (``hops[2].to``), anything else compared whole (``whole`` at the top)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                out.append(path)
            else:
                out.extend(changed_fields(a[key], b[key], path))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and prefix:
        return [
            p
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for p in changed_fields(x, y, f"{prefix}[{i}]")
        ]
    return [] if a == b else [prefix or whole]


def value_at(value: Any, path: str) -> Any:
    """The value at a path from ``changed_fields`` (``KeyError`` when there is none)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(value, list) or index >= len(value):
                raise KeyError(path)
            value = value[index]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(path)
    return value


def align_tools(a: list[ToolCall], b: list[ToolCall]) -> list[ToolCallDiff]:
    """Align two tool-call sequences: identical calls (name and arguments) anchor the
    alignment; between anchors, calls of the same name pair up. Every pair compares
    arguments and results."""
    keys_a = [_call_key(c) for c in a]
    keys_b = [_call_key(c) for c in b]
    out: list[ToolCallDiff] = []
    exact = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in exact.get_opcodes():
        if tag == "equal":
            out.extend(_pair(ca, cb) for ca, cb in zip(a[i1:i2], b[j1:j2], strict=True))
        else:
            out.extend(_align_by_name(a[i1:i2], b[j1:j2]))
    return out


def _pair(a: ToolCall, b: ToolCall) -> ToolCallDiff:
    args = changed_fields(a.input, b.input)
    result = ["(status)"] if a.status != b.status else []
    result += changed_fields(a.result, b.result, whole="(result)")
    op: ToolOp = "args_changed" if args else "result_changed" if result else "same"
    return ToolCallDiff(op, a.name, a, b, args, result)


def _call_key(call: ToolCall) -> str:
    return call.name + "\x00" + json.dumps(call.input, sort_keys=True, ensure_ascii=False)


def _align_by_name(a: list[ToolCall], b: list[ToolCall]) -> list[ToolCallDiff]:
    sm = difflib.SequenceMatcher(None, [c.name for c in a], [c.name for c in b], autojunk=False)
    out: list[ToolCallDiff] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out.extend(_pair(ca, cb) for ca, cb in zip(a[i1:i2], b[j1:j2], strict=True))
            continue
        out.extend(ToolCallDiff("removed", c.name, c, None) for c in a[i1:i2])
        out.extend(ToolCallDiff("added", c.name, None, c) for c in b[j1:j2])
    return out


def sum_known(values: Any, strict: bool = False) -> Any:
    """Sum ignoring None; all None → None. ``strict``: any None → None (unknown cost)."""
    vals = list(values)
    if strict and any(v is None for v in vals):
        return None
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


__all__ = [
    "TOOL_OPS",
    "Side",
    "ToolCall",
    "ToolCallDiff",
    "ToolOp",
    "TurnDiff",
    "align_tools",
    "align_turns",
    "changed_fields",
    "split_turns",
    "sum_known",
    "value_at",
    "word_diff",
]
