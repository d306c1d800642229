"""Diff two transcripts, aligned by user turn, and its renderings.

The alignment (turns, tool calls with their arguments and results, words) is
``diff_align``'s. Per pair of turns: the assistant's text (similarity and a
word-level diff), the tool calls (same / added / removed / args_changed /
result_changed, with the paths that differ), the stop reasons, tokens, cost
(the pricer's rates), latency and time to first token. ``TranscriptDiff``
renders as a DataFrame (``to_frame``), a side-by-side HTML view in a notebook
(``_repr_html_``, every transcript string escaped) and a rich table
(``to_rich``) for ``tahrix diff``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message
from tahrix_lab.lab.diff_align import (
    TOOL_OPS,
    Side,
    ToolCall,
    ToolCallDiff,
    TurnDiff,
    align_turns,
    sum_known,
    value_at,
)

if TYPE_CHECKING:
    import pandas as pd  # imported where used: `import tahrix_lab.lab` stays light

MARKS = {"same": "=", "added": "+", "removed": "−", "args_changed": "~", "result_changed": "≠"}
_MARKS_HEAD = "/".join(MARKS[op] for op in TOOL_OPS)  # "=/+/−/~/≠"


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
            f"tools {_MARKS_HEAD} {_tool_figures(tot)}>"
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
                out[f"{key}_{side}"] = sum_known(
                    getattr(getattr(t, side), key) for t in self.turns if getattr(t, side)
                )
        for t in self.turns:
            out["turns_a"] += t.a is not None
            out["turns_b"] += t.b is not None
        counts: dict[str, int] = dict.fromkeys(TOOL_OPS, 0)
        for t in self.turns:
            for k, v in t.tool_counts().items():
                counts[k] += v
        out.update({f"tools_{k}": v for k, v in counts.items()})
        paired = [t.similarity for t in self.turns if t.a is not None and t.b is not None]
        out["mean_similarity"] = sum(paired) / len(paired) if paired else None
        out["identical"] = self.identical
        return out

    def tool_changes(self) -> list[tuple[int, ToolCallDiff]]:
        """Every tool call that is not the same in both, with its turn."""
        return [(t.index, c) for t in self.turns for c in t.tools if c.op != "same"]

    def to_frame(self) -> pd.DataFrame:
        """One row per user turn, A and B side by side; ``tool_changes`` names each changed
        call with the argument and result paths that differ."""
        rows = []
        for t in self.turns:
            row: dict[str, Any] = {
                "turn": t.index,
                "user_text": t.user_text,
                "similarity": t.similarity,
                **{f"tools_{k}": v for k, v in t.tool_counts().items()},
                "tool_changes": "; ".join(describe(c) for c in t.tools if c.op != "same"),
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
                cells_a = [_tool_cell(c, c.a, "a") for c in t.tools]
                cells_b = [_tool_cell(c, c.b, "b") for c in t.tools]
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
        """A rich Table: one row per turn, A → B for each figure, the changed tool calls, totals last."""
        from rich.table import Table

        from tahrix_lab.flow.textsafe import shown as escape  # stored text: control characters escaped

        table = Table(title=f"A {self.a_id}  vs  B {self.b_id}", show_lines=False)
        for col in (
            "turn",
            "user",
            "similarity",
            f"tools {_MARKS_HEAD}",
            "tool changes",
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
                _tool_figures({f"tools_{k}": v for k, v in c.items()}),
                escape("\n".join(describe(x) for x in t.tools if x.op in ("args_changed", "result_changed"))),
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
            _tool_figures(tot),
            "",
            "",
            f"{tot['input_tokens_a']}/{tot['output_tokens_a']} → {tot['input_tokens_b']}/{tot['output_tokens_b']}",
            f"{_fmt_cost(tot['cost_usd_a'])} → {_fmt_cost(tot['cost_usd_b'])}",
            f"{_fmt_ms(tot['latency_ms_a'])} → {_fmt_ms(tot['latency_ms_b'])}",
            "",
        )
        return table


def diff_messages(
    a: Sequence[Message],
    b: Sequence[Message],
    *,
    a_id: str = "A",
    b_id: str = "B",
    pricer: Pricer | None = None,
) -> TranscriptDiff:
    return TranscriptDiff(a_id, b_id, align_turns(a, b, pricer or DEFAULT_PRICER))


def diff(
    a: str, b: str, *, store: TranscriptStore | None = None, pricer: Pricer | None = None
) -> TranscriptDiff:
    """Diff two stored sessions by id (``store`` defaults to ``$TAHRIX_DB``)."""
    store = store if store is not None else TranscriptStore()
    store.get_session(a)  # a clear error when an id is unknown
    store.get_session(b)
    return diff_messages(store.load_messages(a), store.load_messages(b), a_id=a, b_id=b, pricer=pricer)


# -- formatting helpers --------------------------------------------------------------------


def describe(c: ToolCallDiff) -> str:
    """One line for a tool call's change: ``≠ lookup_address result: label``."""
    parts = [f"{MARKS[c.op]} {c.name}"]
    if c.changed:
        parts.append(f"args: {', '.join(c.changed)}")
    if c.result_changed:
        parts.append(f"result: {', '.join(c.result_changed)}")
    return " ".join(parts)


def result_values(c: ToolCallDiff, side: str, limit: int = 5) -> list[tuple[str, str]]:
    """``(path, value as JSON)`` on one side for the first ``limit`` changed result paths."""
    call: ToolCall | None = getattr(c, side)
    out = []
    for path in c.result_changed[:limit]:
        if path == "(status)":
            value: Any = call.status if call else None
        elif path == "(result)":
            value = call.result if call else None
        else:
            try:
                value = value_at(call.result if call else None, path)
            except KeyError:
                value = "(none)"
        out.append((path, json.dumps(value, ensure_ascii=False, sort_keys=True)[:120]))
    return out


def _tool_cell(c: ToolCallDiff, call: ToolCall | None, side: str) -> str:
    if call is None:
        return "&nbsp;"
    esc = html.escape
    cell = f"{MARKS[c.op]} {esc(c.name)}({esc(_args(call))})"
    if c.changed:
        cell += f" changed: {esc(', '.join(c.changed))}"
    if c.result_changed:
        shown = "; ".join(f"{esc(path)} = {esc(value)}" for path, value in result_values(c, side))
        more = len(c.result_changed) - 5
        cell += f"<br>&nbsp;&nbsp;result changed: {shown}{f' (+{more} more)' if more > 0 else ''}"
    return cell


def _tool_figures(tot: dict[str, Any]) -> str:
    return "/".join(str(tot[f"tools_{op}"]) for op in TOOL_OPS)


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


__all__ = ["MARKS", "TranscriptDiff", "describe", "diff", "diff_messages", "result_values"]
