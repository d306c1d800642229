"""The offline investigator: a scripted investigation of the sample case whose tool calls run for real.

``scripted_backend(workspace, case_id)`` returns a ``FakeBackend`` whose turns
are callables: each reads the real tool results from the messages it is sent
and decides the next call, and the final answer quotes tx hashes and flag ids
from those results. ``run_demo`` prints the flow and ends with the flags and
the cost. With ``TAHRIX_BACKEND=openai|bedrock`` (and ``TAHRIX_MODEL``) the
same investigation question goes to that provider instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tahrix_lab.agent.backends import FakeBackend, get_backend
from tahrix_lab.agent.backends.base import Backend, Event, ToolSpec
from tahrix_lab.agent.backends.fake import Turn, answers_since_question, reasoning, text, tool_call
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.transcript import Message
from tahrix_lab.case.workspace import Workspace

QUESTION = (
    "Investigate case {case_id}: where did the stolen funds go, which exchanges or services received them, "
    "and which anomaly flags support that? Cite transaction hashes and flag ids."
)
SCRIPTED_MODEL = "scripted-investigator"


def _results(messages: Sequence[Message], name: str) -> list[dict[str, Any]]:
    """Every result of a tool so far, oldest first."""
    out = []
    for m in messages:
        for p in m.parts:
            if p.type == "tool_result" and p.tool_name == name and p.tool_result is not None:
                out.append(p.tool_result)
    return out


def _last(messages: Sequence[Message], name: str) -> dict[str, Any]:
    found = _results(messages, name)
    return found[-1] if found else {}


def _short(h: str | None) -> str:
    return h or "?"


def scripted_backend(workspace: Workspace, case_id: str) -> FakeBackend:
    """A deterministic investigator that reads the real tool results (no network)."""
    del workspace  # the turns see everything through the tool results, as a model would
    return FakeBackend(investigation_turns(case_id), name="fake")


class ScriptedInvestigator:
    """The same scripted investigation for any number of conversations at once
    (the job service's offline model): it keeps no state, and picks the turn
    from how many answers follow the last question."""

    name = "fake"

    def __init__(self) -> None:
        self._turns = investigation_turns(None)

    def stream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterator[Event]:
        call = answers_since_question(messages)
        if call >= len(self._turns):
            raise BackendError(
                f"The scripted investigation has {len(self._turns)} turns; call {call + 1} has none."
            )
        return FakeBackend([self._turns[call]]).stream(
            system=system, messages=messages, tools=tools, model=model, inference=inference
        )


def investigation_turns(case_id: str | None) -> list[Turn]:
    """The scripted investigation's turns; ``case_id=None`` reads it from the case overview."""

    def turn1(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        return [
            reasoning(
                "Start from the case overview to find the perpetrator address and what has been flagged."
            ),
            tool_call("get_case_overview", {}),
        ]

    def turn2(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        overview = _last(messages, "get_case_overview")
        roles = {a.get("role") for a in overview.get("addresses_with_roles", [])}
        if not roles & {"perpetrator", "suspect", "seed"}:
            return [
                text(
                    "The case has no perpetrator, suspect or seed address recorded, so there is nothing to trace from yet."
                )
            ]
        tri = overview.get("triage", {})
        return [
            reasoning(
                f"The intake names {', '.join(sorted(r for r in roles if r))} addresses. Trace forward from them, and read the "
                f"triaged flags ({tri.get('rows')} rows from {tri.get('flags')} flags), high severity first."
            ),
            tool_call("trace_funds", {"max_hops": 4, "min_usd": 1000}),
            tool_call("list_flags", {"min_severity": "high", "limit": 15}),
        ]

    def turn3(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        cats = sorted(_last(messages, "trace_funds").get("summary", {}).get("endpoint_usd_by_category", {}))
        return [
            reasoning(
                f"The trace ends at {', '.join(cats) or 'no labelled service'}. Look at the laundering legs beyond "
                "the mixer: the peel chain, the chain hops and any bridge leg with no destination."
            ),
            tool_call("list_flags", {"view": "raw", "flag_type": "peel_chain", "limit": 3}),
            tool_call("list_flags", {"view": "raw", "flag_type": "chain_hopping", "limit": 5}),
            tool_call("find_bridge_events", {"status": "pending", "limit": 5}),
        ]

    def turn4(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        peel = (_results(messages, "list_flags")[1].get("flags") or [{}])[0]
        if not peel.get("flag_id"):
            return [text("No peel chain was flagged.")]
        return [
            reasoning(
                "The peel chain evidence is strong; I would mark that flag confirmed. That is a write, so the grant decides."
            ),
            tool_call(
                "annotate",
                {
                    "target_kind": "flag",
                    "target": peel["flag_id"],
                    "action": "confirm_flag",
                    "payload": {"note": "Peel chain confirmed against the trace (scripted demo)."},
                },
            ),
        ]

    def turn5(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        trace = _last(messages, "trace_funds")
        summary = trace.get("summary", {})
        flag_lists = _results(messages, "list_flags")
        rows = (flag_lists[0] if flag_lists else {}).get("rows", [])
        peel = ((flag_lists[1] if len(flag_lists) > 1 else {}).get("flags") or [{}])[0]
        hops = (flag_lists[2] if len(flag_lists) > 2 else {}).get("flags", [])
        pending = _last(messages, "find_bridge_events").get("bridge_events", [])
        denied = _last(messages, "annotate").get("error")
        case = case_id or _last(messages, "get_case_overview").get("case", {}).get("case_id", "the case")
        start = summary.get("start", {})
        lines = [
            f"**Findings for {case}** (scripted offline demo: every figure below comes from the tool results).",
            "",
            f"- Traced ${summary.get('traced_usd', 0):,.0f} from the {', '.join(start.get('roles') or ['given'])} address(es) "
            f"within {trace.get('params', {}).get('max_hops')} hops ({trace.get('params', {}).get('taint_model')} taint): "
            f"${summary.get('endpoints_usd', 0):,.0f} reached services, ${summary.get('held_usd', 0):,.0f} is still held, "
            f"${summary.get('frontier_usd', 0):,.0f} is beyond the hop limit.",
        ]
        names = {"exchange": "Exchange deposits", "otc_desk": "OTC desk", "instant_exchanger": "Instant exchanger",
                 "mixing_service": "Mixer", "defi_bridge": "Bridge with no destination leg"}  # fmt: skip
        tops = summary.get("top_endpoints", [])
        for cat, usd in summary.get("endpoint_usd_by_category", {}).items():
            first = next((e for e in tops if e["category"] == cat), None)
            if first is None:
                continue
            n = sum(1 for e in tops if e["category"] == cat)
            lines.append(
                f"- {names.get(cat, cat)}: ${usd:,.0f} in total; the largest, {first['address']} "
                f"({first.get('label') or 'unlabelled'}), received ${first['tainted_usd']:,.0f} in tx "
                f"{_short((first.get('tx_hashes') or [None])[0])}"
                + (f" (and {n - 1} more shown)." if n > 1 else ".")
            )
        for r in rows[:3]:
            f = r["flags"][0] if r.get("flags") else {}
            who = (
                r["subject"].get("address")
                or r["subject"].get("entity")
                or f"{r['subject'].get('members')} addresses"
            )
            lines.append(
                f"- Triage ({r['severity']}, score {r['score']}): {who}"
                + (f" [{r['role']}]" if r.get("role") else "")
                + f" — {', '.join(r['flag_types'])}; e.g. flag {f.get('flag_id')} (tx {_short((f.get('tx_hashes') or [None])[0])})."
            )
        if peel.get("flag_id"):
            ev = peel.get("evidence", {})
            lines.append(
                f"- BTC peel chain: flag {peel['flag_id']} — {ev.get('length')} hops starting at {peel.get('address')}, "
                f"{ev.get('peels_to_exchange_labels')} peels to exchange deposits (first tx {ev.get('tx_hashes', ['?'])[0]})."
            )
        for f in hops[:2]:
            hop = (f.get("evidence", {}).get("hops") or [{}])[0]
            lines.append(
                f"- Chain hopping: flag {f['flag_id']} — {' → '.join(hop.get('route', []))} via bridge events "
                f"{', '.join(hop.get('bridge_event_ids', []))} ({hop.get('gap_minutes')} min between legs)."
            )
        for b in pending[:1]:
            lines.append(
                f"- Unmatched bridge leg: {b['bridge_event_id']} ({b['bridge_name']}, src tx {b['src_tx_hash']}) has no destination "
                f"leg yet; declared destination {b.get('declared_dst_chain')}."
            )
        if denied:
            lines.append("")
            lines.append(
                f"I did not confirm flag {peel.get('flag_id')}: the tool refused because this session's grant is read-only. "
                "Please confirm it yourself, or allow writes and ask me again."
            )
        return [text("\n".join(lines))]

    return [turn1, turn2, turn3, turn4, turn5]


def demo_backend(workspace: Workspace, case_id: str) -> tuple[Backend, str, bool]:
    """(backend, model, scripted?) from ``TAHRIX_BACKEND`` / ``TAHRIX_MODEL``."""
    choice = (os.environ.get("TAHRIX_BACKEND") or "fake").strip()
    if choice == "fake":
        return scripted_backend(workspace, case_id), SCRIPTED_MODEL, True
    model = os.environ.get("TAHRIX_MODEL")
    if not model:
        raise ConfigurationError(f"TAHRIX_BACKEND={choice} needs TAHRIX_MODEL (the model id to call).")
    return get_backend(choice), model, False
