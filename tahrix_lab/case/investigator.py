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
import re
from collections.abc import Iterable, Sequence
from typing import Any

from tahrix_lab.agent.backends import FakeBackend, get_backend
from tahrix_lab.agent.backends.base import Backend, Event, ToolSpec
from tahrix_lab.agent.backends.fake import Turn, latest_question, reasoning, text, tool_call
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.transcript import Message
from tahrix_lab.case import investigator_answers as say
from tahrix_lab.case.tools.headlines import usd
from tahrix_lab.case.workspace import Workspace

QUESTION = (
    "Investigate case {case_id}: where did the stolen funds go, which exchanges or services received them, "
    "and which anomaly flags support that? Cite transaction hashes and flag ids."
)
SCRIPTED_MODEL = "scripted-investigator"


def _this_question(messages: Sequence[Message]) -> Sequence[Message]:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return messages[last_user + 1 :]


def _results(messages: Sequence[Message], name: str, *, anywhere: bool = False) -> list[dict[str, Any]]:
    """Every ok result of a tool for the latest question (or in the whole conversation), oldest first."""
    out = []
    for m in messages if anywhere else _this_question(messages):
        for p in m.parts:
            if p.type == "tool_result" and p.tool_name == name and p.tool_result is not None:
                out.append(p.tool_result)
    return out


def _last(messages: Sequence[Message], name: str, *, anywhere: bool = False) -> dict[str, Any]:
    found = _results(messages, name, anywhere=anywhere)
    return found[-1] if found else {}


def scripted_backend(workspace: Workspace | None = None, case_id: str | None = None) -> FakeBackend:
    """The scripted investigator: a deterministic ``FakeBackend`` that reads the real tool
    results (no network), for any number of questions and conversations at once.

    It keeps no state: ``FakeBackend(per_question=...)`` picks the latest question and
    how many answers already follow it. The investigation question (or any question
    asking to investigate) plays the full investigation; any other question picks its
    tools by what it asks (an address or a hash, flags, where the funds went, bridges,
    how much was taken; else the overview) and answers from what they return. It never
    runs out of script (``_closing`` after the last turn). ``case_id=None`` reads the
    case from the overview.
    """
    del workspace  # the turns see everything through the tool results, as a model would
    investigation, follow_up = investigation_turns(case_id), follow_up_turns()

    def turns_for(question: str, messages: Sequence[Message]) -> Sequence[Turn]:
        return investigation if is_investigation(question, messages) else follow_up

    return FakeBackend(per_question=turns_for, then=_closing)


def is_investigation(question: str, messages: Sequence[Message] = ()) -> bool:
    """Asked to investigate, or the conversation's first question about nothing in particular."""
    if re.search(r"\binvestigat", question, re.IGNORECASE):
        return True
    first = sum(1 for m in messages if m.role == "user") <= 1
    specific = ADDRESS.search(question) or TX_HASH.search(question) or FLAG_ID.search(question)
    return first and not specific


def _closing(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
    return [
        text("That is what the tools returned; ask about an address, the flags, the trace or the bridges.")
    ]


NAMES = {"exchange": "Exchange deposits", "otc_desk": "OTC desk", "instant_exchanger": "Instant exchanger",
         "mixing_service": "Mixer", "defi_bridge": "Bridge with no destination leg"}  # fmt: skip
STARTS = ("perpetrator", "suspect", "seed")


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
        starts = [a for a in overview.get("addresses_with_roles", []) if a.get("role") in STARTS]
        if not starts:
            return [
                text(
                    "The case has no perpetrator, suspect or seed address recorded, so there is nothing to trace from yet."
                )
            ]
        tri = overview.get("triage", {})
        first = starts[0]
        return [
            reasoning(
                f"The intake names {say.role_phrase([a['role'] for a in starts])}. Trace forward from them, see what "
                f"reached the {first['role']} first (amounts in their own asset), and read the "
                f"triaged flags ({tri.get('rows')} rows from {tri.get('flags')} flags), high severity first."
            ),
            tool_call("trace_funds", {"max_hops": 4, "min_usd": 1000}),
            tool_call(
                "list_transfers",
                {
                    "address": first["address"],
                    "chain": first["chain"],
                    "direction": "in",
                    "order_by": "usd",
                    "limit": 3,
                },
            ),
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
        flag_lists = _results(messages, "list_flags")
        peel = ((flag_lists[1] if len(flag_lists) > 1 else {}).get("flags") or [{}])[0]
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
        flag_lists = _results(messages, "list_flags")
        peel = ((flag_lists[1] if len(flag_lists) > 1 else {}).get("flags") or [{}])[0]
        hops = (flag_lists[2] if len(flag_lists) > 2 else {}).get("flags", [])
        pending = _last(messages, "find_bridge_events").get("bridge_events", [])
        denied = _last(messages, "annotate").get("error")
        overview = _last(messages, "get_case_overview")
        case = case_id or overview.get("case", {}).get("case_id", "the case")
        inflow = _last(messages, "list_transfers")
        who: dict[str, Any] = next(
            (a for a in overview.get("addresses_with_roles", []) if a.get("role") in STARTS), {}
        )
        lines = [
            f"**Findings for {case}** (scripted offline demo: every figure below comes from the tool results).",
            "",
            say.theft_line(
                inflow.get("transfers") or [], f"the {who.get('role', 'start')}", who.get("address", "")
            ),
            *say.trace_lines(trace, NAMES),
            *say.triage_lines(flag_lists[0] if flag_lists else {}),
        ]
        if peel.get("flag_id"):
            ev = peel.get("evidence", {})
            lines.append(
                f"- BTC peel chain: flag {peel['flag_id']} — {ev.get('length')} hops starting at {peel.get('address')}, "
                f"{ev.get('peels_to_exchange_labels')} peels to exchange deposits (first tx {(ev.get('tx_hashes') or ['?'])[0]})."
            )
        for f in hops[:2]:
            hop = (f.get("evidence", {}).get("hops") or [{}])[0]
            lines.append(
                f"- Chain hopping: flag {f['flag_id']} — {' → '.join(hop.get('route', []))} via bridge events "
                f"{', '.join(hop.get('bridge_event_ids', []))} ({hop.get('gap_minutes')} min between legs)."
            )
        for b in pending[:1]:
            sent = say.asset_amount(b.get("src_amount"), b.get("src_asset_key")) or "an unknown amount"
            lines.append(
                f"- Unmatched bridge leg: {b['bridge_event_id']} ({b['bridge_name']}, {sent}, {usd(b.get('src_usd'))}, "
                f"src tx {b['src_tx_hash']}) has no destination leg yet; declared destination {b.get('declared_dst_chain')}."
            )
        if denied:
            lines.append("")
            lines.append(
                f"I did not confirm flag {peel.get('flag_id')}: the tool refused because this session's grant is read-only. "
                "Please confirm it yourself, or allow writes and ask me again."
            )
        return [text("\n".join(line for line in lines if line is not None))]

    return [turn1, turn2, turn3, turn4, turn5]


# -- any other question: tools picked by what it asks, the answer from what they return ----------
ADDRESS = re.compile(
    r"(?<![0-9A-Za-z])(0x[0-9a-fA-F]{40}|T[1-9A-HJ-NP-Za-km-z]{33}|bc1[02-9ac-hj-np-z]{11,87})(?![0-9A-Za-z])"
)
TX_HASH = re.compile(r"(?<![0-9A-Za-z])(0x[0-9a-fA-F]{64}|[0-9a-fA-F]{64})(?![0-9A-Za-z])")
FLAG_ID = re.compile(r"\bFLG-[0-9a-f]{6,}\b")
WORDS = {
    "flags": r"\bflag|triage|suspicious|anomal|alert|risk",
    "trace": r"\btrace|where|went|\bgo\b|\bgone|follow|endpoint|exchange|mixer|cash.?out|launder|destination",
    "bridge": r"bridge|cross.?chain|chain.?hop",
    "stolen": r"how much|stolen|theft|\btaken|drain|amount|loss",
}
# A question that names a kind of flag ("the peel chain", "any dusting?") lists those flags.
FLAG_WORDS = {
    "peel_chain": r"\bpeel",
    "mixer_exposure": r"mixer[ _-]?exposure",
    "mixer_bulk_deposit": r"bulk[ _-]?deposit",
    "chain_hopping": r"chain[ _-]?hop",
    "structuring": r"\bstructur",
    "repeated_amount": r"repeated[ _-]?amount",
    "dusting": r"\bdust",
    "address_poisoning": r"poisoning|address[ _-]?poison",
    "fresh_address_funding": r"fresh[ _-]?address",
    "pass_through": r"pass[ _-]?through",
    "sanctions_exposure": r"sanction",
}


def picked_tools(question: str, messages: Sequence[Message]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a question asks for (the overview when it names none)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for h in dict.fromkeys(TX_HASH.findall(question)):
        calls.append(("get_transaction", {"tx_hash": h}))
    for a in dict.fromkeys(ADDRESS.findall(question)):
        calls.append(("lookup_address", {"address": a}))
    flags = list(dict.fromkeys(FLAG_ID.findall(question)))[:10]
    if flags:  # the ids matched a strict pattern, so they can stand in the query
        ids = ", ".join(f"'{f}'" for f in flags)
        calls.append(("run_sql", {"query": "SELECT flag_id, flag_type, severity, score, status, chain, address, tx_hash "
                                           f"FROM anomaly_flags WHERE flag_id IN ({ids})"}))  # fmt: skip
    for flag_type, pattern in FLAG_WORDS.items():
        if re.search(pattern, question, re.IGNORECASE):
            calls.append(("list_flags", {"view": "raw", "flag_type": flag_type, "limit": 5}))
    asks = {k for k, pattern in WORDS.items() if re.search(pattern, question, re.IGNORECASE)}
    if "stolen" in asks:
        roles = _last(messages, "get_case_overview", anywhere=True).get("addresses_with_roles") or []
        start = next((a for a in roles if a.get("role") in STARTS), None)
        if start is not None:
            calls.append(("list_transfers", {"address": start["address"], "chain": start["chain"], "direction": "in",
                                             "order_by": "usd", "limit": 5}))  # fmt: skip
        else:
            calls.append(("get_case_overview", {}))
    if "trace" in asks:
        calls.append(("trace_funds", {"max_hops": 4, "min_usd": 1000}))
    if "flags" in asks and not any(name == "list_flags" for name, _ in calls):
        calls.append(("list_flags", {"min_severity": "high", "limit": 10}))
    if "bridge" in asks:
        calls.append(("find_bridge_events", {"limit": 10}))
    return calls or [("get_case_overview", {})]


def follow_up_turns() -> list[Turn]:
    """Two turns for any question: the tools it asks for, then an answer from their results."""

    def ask_tools(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        question = latest_question(messages)
        calls = picked_tools(question, messages)
        names = ", ".join(dict.fromkeys(name for name, _ in calls))
        return [reasoning(f"To answer this I will call {names} and answer from what they return."),
                *(tool_call(name, args) for name, args in calls)]  # fmt: skip

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Iterable[Event]:
        lines = ["From the case tools (scripted offline answer: every figure comes from their results):", ""]
        failed = []
        for m in _this_question(messages):
            for p in m.parts:
                if p.type != "tool_result" or p.tool_result is None:
                    continue
                if p.tool_status == "error":
                    failed.append(
                        f"- {p.tool_name} could not answer: {(p.tool_result.get('error') or {}).get('message')}"
                    )
                    continue
                lines += _answer_lines(p.tool_name or "", p.tool_result, messages)
        return [text("\n".join(lines + failed))]

    return [ask_tools, answer]


def _answer_lines(name: str, result: dict[str, Any], messages: Sequence[Message]) -> list[str]:
    if name == "lookup_address":
        return say.address_lines(result)
    if name == "get_transaction":
        return say.transaction_lines(result)
    if name == "trace_funds":
        return say.trace_lines(result, NAMES)
    if name == "list_flags":
        return say.triage_lines(result, 5) if result.get("view") == "triage" else say.raw_flag_lines(result)
    if name == "find_bridge_events":
        return say.bridge_lines(result)
    if name == "list_transfers":
        roles = _last(messages, "get_case_overview", anywhere=True).get("addresses_with_roles") or []
        start: dict[str, Any] = next((a for a in roles if a.get("role") in STARTS), {})
        line = say.theft_line(
            result.get("transfers") or [], f"the {start.get('role', 'address')}", start.get("address", "")
        )
        return [line] if line else ["- No transfers reached that address."]
    if name == "get_case_overview":
        hint = "Ask about an address or a transaction, the flags, where the funds went, the bridges, or how much was taken."
        return [*say.overview_lines(result), "", hint]
    if name == "run_sql":
        cols = result.get("columns") or []
        return [
            f"- {', '.join(f'{c} {v}' for c, v in zip(cols, row, strict=False))}"
            for row in result.get("rows") or []
        ] or ["- No such flag in this case."]
    return [f"- {name}: {result.get('headline') or 'done'}"]


def demo_backend(workspace: Workspace, case_id: str) -> tuple[Backend, str, bool]:
    """(backend, model, scripted?) from ``TAHRIX_BACKEND`` / ``TAHRIX_MODEL``."""
    choice = (os.environ.get("TAHRIX_BACKEND") or "fake").strip()
    if choice == "fake":
        return scripted_backend(workspace, case_id), SCRIPTED_MODEL, True
    model = os.environ.get("TAHRIX_MODEL")
    if not model:
        raise ConfigurationError(f"TAHRIX_BACKEND={choice} needs TAHRIX_MODEL (the model id to call).")
    return get_backend(choice), model, False
