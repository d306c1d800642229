"""Diff two transcripts, aligned by user turn.

A turn is a user message and every assistant and tool message until the next
user message. For each pair of turns the diff compares the assistant's text
(similarity and a word-level diff), the tool-call sequences (aligned by tool
name: same / added / removed / args_changed with the changed fields), the stop
reasons, tokens, cost, latency and time to first token. ``TranscriptDiff``
renders as a DataFrame (``to_frame``), a side-by-side HTML view in a notebook
(``_repr_html_``, every transcript string escaped) and a rich table
(``to_rich``) for ``tahrix diff``.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part, Usage
from tahrix_lab.lab.costs import Rate, rates_for

if TYPE_CHECKING:
    import pandas as pd  # imported where used: `import tahrix_lab.lab` stays light

ToolOp = Literal["same", "added", "removed", "args_changed"]
WordOp = Literal["equal", "insert", "delete"]


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
    changed: list[str] = field(default_factory=list)  # dotted paths of changed arguments

    @property
    def result_same(self) -> bool:
        return (
            self.a is not None
            and self.b is not None
            and (self.a.status, self.a.result) == (self.b.status, self.b.result)
        )


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
            and all(t.op == "same" and t.result_same for t in self.tools)
            and a.stop_reasons == b.stop_reasons
            and (a.input_tokens, a.output_tokens, a.cache_read_tokens)
            == (b.input_tokens, b.output_tokens, b.cache_read_tokens)
        )

    def tool_counts(self) -> dict[str, int]:
        counts = {"same": 0, "added": 0, "removed": 0, "args_changed": 0}
        for t in self.tools:
            counts[t.op] += 1
        return counts


@dataclass(repr=False)
class TranscriptDiff:
    a_id: str
    b_id: str
    turns: list[TurnDiff]

    def __repr__(self) -> str:
        tot = self.totals
        return (
            f"<TranscriptDiff {self.a_id} vs {self.b_id}: {len(self.turns)} turns, "
            f"{'identical' if tot['identical'] else 'differs'}, mean similarity {_fmt_ratio(tot['mean_similarity'])}, "
            f"tools =/+/−/~ {tot['tools_same']}/{tot['tools_added']}/{tot['tools_removed']}/{tot['tools_args_changed']}>"
        )

    @property
    def identical(self) -> bool:
        """Same user turns, text, tool calls and results, stop reasons and tokens (timings aside)."""
        return all(t.identical for t in self.turns)

    @property
    def totals(self) -> dict[str, Any]:
        out: dict[str, Any] = {"turns_a": 0, "turns_b": 0}
        for key in ("calls", "input_tokens", "output_tokens", "cost_usd", "latency_ms"):
            for side in ("a", "b"):
                out[f"{key}_{side}"] = _sum(
                    getattr(getattr(t, side), key) for t in self.turns if getattr(t, side)
                )
        for t in self.turns:
            out["turns_a"] += t.a is not None
            out["turns_b"] += t.b is not None
        counts = {"same": 0, "added": 0, "removed": 0, "args_changed": 0}
        for t in self.turns:
            for k, v in t.tool_counts().items():
                counts[k] += v
        out.update({f"tools_{k}": v for k, v in counts.items()})
        paired = [t.similarity for t in self.turns if t.a is not None and t.b is not None]
        out["mean_similarity"] = sum(paired) / len(paired) if paired else None
        out["identical"] = self.identical
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per user turn, A and B side by side."""
        rows = []
        for t in self.turns:
            row: dict[str, Any] = {
                "turn": t.index,
                "user_text": t.user_text,
                "similarity": t.similarity,
                **{f"tools_{k}": v for k, v in t.tool_counts().items()},
            }
            for side_name in ("a", "b"):
                s: Side | None = getattr(t, side_name)
                row[f"text_{side_name}"] = s.text if s else None
                row[f"tool_calls_{side_name}"] = ", ".join(c.name for c in s.tool_calls) if s else None
                row[f"stop_{side_name}"] = s.stop_reason if s else None
                for key in ("calls", "input_tokens", "output_tokens", "cost_usd", "latency_ms", "ttft_ms"):
                    row[f"{key}_{side_name}"] = getattr(s, key) if s else None
            rows.append(row)
        import pandas as pd

        return pd.DataFrame(rows)

    # -- rendering --------------------------------------------------------------------
    def _repr_html_(self) -> str:
        esc = html.escape
        tot = self.totals
        out = [
            "<div class='tahrix-diff'><style>"
            ".tahrix-diff table{border-collapse:collapse;width:100%}"
            ".tahrix-diff td,.tahrix-diff th{border:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}"
            ".tahrix-diff del{background:#fdd;text-decoration:line-through}.tahrix-diff ins{background:#dfd;text-decoration:none}"
            ".tahrix-diff .user{background:#f4f4f8}.tahrix-diff .meta{color:#666;font-size:90%}"
            "</style>",
            f"<p><b>A</b> {esc(self.a_id)} &nbsp; <b>B</b> {esc(self.b_id)} &nbsp; "
            f"{'identical' if tot['identical'] else 'differs'}; mean text similarity "
            f"{_fmt_ratio(tot['mean_similarity'])}</p>",
            "<table><tr><th>turn</th><th>A</th><th>B</th></tr>",
        ]
        for t in self.turns:
            user = t.user_text
            out.append(
                f"<tr class='user'><td>{t.index}</td><td colspan='2'><b>user:</b> {esc(user)}"
                f"{'' if t.same_user_text or not (t.a and t.b) else ' <i>(B asked: ' + esc(t.b.user_text) + ')</i>'}"
                f" <span class='meta'>similarity {_fmt_ratio(t.similarity)}</span></td></tr>"
            )
            text_a = "".join(
                esc(w) if op == "equal" else f"<del>{esc(w)}</del>" for op, w in t.words if op != "insert"
            )
            text_b = "".join(
                esc(w) if op == "equal" else f"<ins>{esc(w)}</ins>" for op, w in t.words if op != "delete"
            )
            out.append(
                f"<tr><td></td><td>{text_a if t.a else '<i>(no turn)</i>'}</td>"
                f"<td>{text_b if t.b else '<i>(no turn)</i>'}</td></tr>"
            )
            if t.tools:
                cells_a, cells_b = [], []
                for c in t.tools:
                    mark = {"same": "=", "added": "+", "removed": "−", "args_changed": "~"}[c.op]
                    extra = f" changed: {esc(', '.join(c.changed))}" if c.changed else ""
                    cells_a.append(f"{mark} {esc(c.name)}({esc(_args(c.a))}){extra}" if c.a else "&nbsp;")
                    cells_b.append(f"{mark} {esc(c.name)}({esc(_args(c.b))}){extra}" if c.b else "&nbsp;")
                out.append(
                    f"<tr><td class='meta'>tools</td><td><code>{'<br>'.join(cells_a)}</code></td>"
                    f"<td><code>{'<br>'.join(cells_b)}</code></td></tr>"
                )
            out.append(f"<tr class='meta'><td></td><td>{esc(_meta(t.a))}</td><td>{esc(_meta(t.b))}</td></tr>")
        out.append(
            f"<tr><th>total</th><td>{tot['calls_a']} calls, {tot['input_tokens_a']} in / "
            f"{tot['output_tokens_a']} out, {esc(_fmt_cost(tot['cost_usd_a']))}</td>"
            f"<td>{tot['calls_b']} calls, {tot['input_tokens_b']} in / {tot['output_tokens_b']} out, "
            f"{esc(_fmt_cost(tot['cost_usd_b']))}</td></tr></table></div>"
        )
        return "".join(out)

    def to_rich(self) -> Any:
        """A rich Table: one row per turn, A → B for each figure, totals last."""
        from rich.table import Table

        from tahrix_lab.flow.textsafe import shown as escape  # stored text: control characters escaped

        table = Table(title=f"A {self.a_id}  vs  B {self.b_id}", show_lines=False)
        for col in (
            "turn",
            "user",
            "similarity",
            "tools =/+/−/~",
            "stop",
            "tokens in/out",
            "cost",
            "latency ms",
            "ttft ms",
        ):
            table.add_column(col, overflow="fold")
        for t in self.turns:
            c = t.tool_counts()
            user = t.user_text
            table.add_row(
                str(t.index),
                escape(user[:60], multiline=False),
                _fmt_ratio(t.similarity),
                f"{c['same']}/{c['added']}/{c['removed']}/{c['args_changed']}",
                f"{_get(t.a, 'stop_reason')} → {_get(t.b, 'stop_reason')}",
                f"{_get(t.a, 'input_tokens')}/{_get(t.a, 'output_tokens')} → "
                f"{_get(t.b, 'input_tokens')}/{_get(t.b, 'output_tokens')}",
                f"{_fmt_cost(_get(t.a, 'cost_usd'))} → {_fmt_cost(_get(t.b, 'cost_usd'))}",
                f"{_fmt_ms(_get(t.a, 'latency_ms'))} → {_fmt_ms(_get(t.b, 'latency_ms'))}",
                f"{_fmt_ms(_get(t.a, 'ttft_ms'))} → {_fmt_ms(_get(t.b, 'ttft_ms'))}",
            )
        tot = self.totals
        table.add_section()
        table.add_row(
            "total",
            "identical" if tot["identical"] else "differs",
            _fmt_ratio(tot["mean_similarity"]),
            f"{tot['tools_same']}/{tot['tools_added']}/{tot['tools_removed']}/{tot['tools_args_changed']}",
            "",
            f"{tot['input_tokens_a']}/{tot['output_tokens_a']} → {tot['input_tokens_b']}/{tot['output_tokens_b']}",
            f"{_fmt_cost(tot['cost_usd_a'])} → {_fmt_cost(tot['cost_usd_b'])}",
            f"{_fmt_ms(tot['latency_ms_a'])} → {_fmt_ms(tot['latency_ms_b'])}",
            "",
        )
        return table

    def tool_changes(self) -> list[tuple[int, ToolCallDiff]]:
        """Every tool call that is not the same in both, with its turn."""
        return [(t.index, c) for t in self.turns for c in t.tools if c.op != "same"]


# -- building ---------------------------------------------------------------------------


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped by user turn (messages before the first user turn are dropped)."""
    turns: list[list[Message]] = []
    for m in messages:
        if m.role == "user":
            turns.append([m])
        elif turns:
            turns[-1].append(m)
    return turns


def _side(turn: list[Message], pricer: CallPricer) -> Side:
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
    costs = [
        pricer(m.model_id, m.usage, m.backend, m.created_at) if m.usage and m.usage.known else None
        for m in calls
    ]
    return Side(
        user_text=turn[0].text,
        text="\n".join(t for m in calls if (t := m.text)),
        tool_calls=tool_calls,
        stop_reasons=[m.stop_reason for m in calls],
        calls=len(calls),
        input_tokens=_sum(m.usage.input_tokens if m.usage else None for m in calls),
        output_tokens=_sum(m.usage.output_tokens if m.usage else None for m in calls),
        cache_read_tokens=_sum(m.usage.cache_read_tokens if m.usage else None for m in calls),
        cost_usd=_sum(costs, strict=True) if calls else None,
        latency_ms=_sum(m.latency_ms for m in calls),
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


def changed_fields(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON values differ (dicts recursed, anything else compared whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                out.append(path)
            else:
                out.extend(changed_fields(a[key], b[key], path))
        return out
    return [] if a == b else [prefix or "(arguments)"]


def align_tools(a: list[ToolCall], b: list[ToolCall]) -> list[ToolCallDiff]:
    """Align two tool-call sequences: identical calls (name and arguments) anchor the
    alignment; between anchors, calls of the same name pair up as ``args_changed``."""
    keys_a = [_call_key(c) for c in a]
    keys_b = [_call_key(c) for c in b]
    out: list[ToolCallDiff] = []
    exact = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in exact.get_opcodes():
        if tag == "equal":
            out.extend(
                ToolCallDiff("same", ca.name, ca, cb) for ca, cb in zip(a[i1:i2], b[j1:j2], strict=True)
            )
        else:
            out.extend(_align_by_name(a[i1:i2], b[j1:j2]))
    return out


def _call_key(call: ToolCall) -> str:
    return call.name + "\x00" + json.dumps(call.input, sort_keys=True, ensure_ascii=False)


def _align_by_name(a: list[ToolCall], b: list[ToolCall]) -> list[ToolCallDiff]:
    sm = difflib.SequenceMatcher(None, [c.name for c in a], [c.name for c in b], autojunk=False)
    out: list[ToolCallDiff] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for ca, cb in zip(a[i1:i2], b[j1:j2], strict=True):
                changed = changed_fields(ca.input, cb.input)
                out.append(ToolCallDiff("args_changed" if changed else "same", ca.name, ca, cb, changed))
            continue
        out.extend(ToolCallDiff("removed", c.name, c, None) for c in a[i1:i2])
        out.extend(ToolCallDiff("added", c.name, None, c) for c in b[j1:j2])
    return out


def diff_messages(
    a: Sequence[Message],
    b: Sequence[Message],
    *,
    a_id: str = "A",
    b_id: str = "B",
    pricer: Pricer | None = None,
) -> TranscriptDiff:
    priced = CallPricer(pricer or DEFAULT_PRICER)
    turns_a, turns_b = split_turns(a), split_turns(b)
    out: list[TurnDiff] = []
    for i in range(max(len(turns_a), len(turns_b))):
        sa = _side(turns_a[i], priced) if i < len(turns_a) else None
        sb = _side(turns_b[i], priced) if i < len(turns_b) else None
        ratio, words = word_diff(sa.text if sa else "", sb.text if sb else "")
        if sa is None or sb is None:
            ratio = 0.0
        tools = align_tools(sa.tool_calls if sa else [], sb.tool_calls if sb else [])
        out.append(TurnDiff(i + 1, sa, sb, ratio, words, tools))
    return TranscriptDiff(a_id, b_id, out)


def diff(
    a: str, b: str, *, store: TranscriptStore | None = None, pricer: Pricer | None = None
) -> TranscriptDiff:
    """Diff two stored sessions by id (``store`` defaults to ``$TAHRIX_DB``)."""
    store = store if store is not None else TranscriptStore()
    store.get_session(a)  # a clear error when an id is unknown
    store.get_session(b)
    return diff_messages(store.load_messages(a), store.load_messages(b), a_id=a, b_id=b, pricer=pricer)


class CallPricer:
    """Prices calls from each model's genai-prices rates, looked up once per diff
    (the same rate rows as the ``costs`` view: periods, tiers, cache kinds)."""

    def __init__(self, pricer: Pricer) -> None:
        self.pricer = pricer
        self._rates: dict[tuple[str, str | None], list[Rate]] = {}

    def __call__(
        self, model: str | None, usage: Usage | None, backend: str | None, at: datetime
    ) -> float | None:
        if not model or usage is None or not usage.known:
            return None
        key = (model, backend)
        if key not in self._rates:
            self._rates[key] = rates_for(model, backend, self.pricer)
        n = usage.input_tokens or 0
        for r in self._rates[key]:
            in_period = (r.valid_from is None or at >= r.valid_from) and (
                r.valid_to is None or at < r.valid_to
            )
            in_tier = n > r.min_input_tokens and (r.max_input_tokens is None or n <= r.max_input_tokens)
            if in_period and in_tier:
                read, write = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
                return (
                    max(n - read - write, 0) * r.input_per_mtok
                    + read * r.cache_read_per_mtok
                    + write * r.cache_write_per_mtok
                    + (usage.output_tokens or 0) * r.output_per_mtok
                ) / 1e6
        return None


# -- formatting helpers --------------------------------------------------------------------


def _sum(values: Any, strict: bool = False) -> Any:
    """Sum ignoring None; all None → None. ``strict``: any None → None (unknown cost)."""
    vals = list(values)
    if strict and any(v is None for v in vals):
        return None
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def _get(side: Side | None, name: str) -> Any:
    return getattr(side, name) if side is not None else None


def _args(call: ToolCall | None) -> str:
    if call is None:
        return ""
    return json.dumps(call.input, ensure_ascii=False, sort_keys=True)[:200]


def _meta(side: Side | None) -> str:
    if side is None:
        return ""
    return (
        f"{side.calls} calls · stop {side.stop_reason} · in {side.input_tokens} / out {side.output_tokens} · "
        f"{_fmt_cost(side.cost_usd)} · {_fmt_ms(side.latency_ms)} ms · ttft {_fmt_ms(side.ttft_ms)} ms"
    )


def _fmt_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def _fmt_ms(ms: float | None) -> str:
    return "–" if ms is None else f"{ms:.0f}"


def _fmt_ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.0%}"


__all__ = [
    "Side",
    "ToolCall",
    "ToolCallDiff",
    "TranscriptDiff",
    "TurnDiff",
    "align_tools",
    "changed_fields",
    "diff",
    "diff_messages",
    "split_turns",
    "word_diff",
]
