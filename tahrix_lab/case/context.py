"""The per-call tool context and the assistant's grant.

The transcript has no foreign key into the case: the record's session-case link
(``TranscriptStore.case_link``, on either engine) names a session's case and holds
the grant the analyst gave the assistant. The
``CaseContextProvider`` reads that link at the start of *every* tool call, so
a narrowed grant bites on the very next call, and refuses calls outside it
with ``ToolDenied`` (the loop turns that into an error result the model reads
and the transcript keeps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.errors import NeedsApproval, ToolDenied
from tahrix_lab.agent.tools import Approval, Tool
from tahrix_lab.agent.transcript import Session
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.record_sync import sync_annotations


@dataclass(frozen=True)
class Grant:
    """What the assistant may do in one investigation session.

    ``tools=None`` allows every tool offered to investigation sessions;
    ``may_write`` gates the tools marked ``writes`` (``annotate``, ``run_detectors``);
    ``approve_writes`` makes writes wait for the analyst's Approve (``agent.approvals``):
    ``True`` for every writing tool, or a tuple of tool names and ``tool:action`` pairs
    (``"annotate:dismiss_flag"``). A write that overturns an analyst's decision always
    waits, whatever the grant says (``case.annotations``).
    """

    tools: tuple[str, ...] | None = None
    may_write: bool = False
    approve_writes: bool | tuple[str, ...] = False

    @classmethod
    def from_dict(cls, data: dict[str, Any] | Grant | None) -> Grant:
        if isinstance(data, Grant):
            return data
        data = data or {}
        tools = data.get("tools")
        approve = data.get("approve_writes", False)
        return cls(
            tools=tuple(tools) if tools is not None else None,
            may_write=bool(data.get("may_write", False)),
            approve_writes=tuple(str(a) for a in approve)
            if isinstance(approve, list | tuple)
            else bool(approve),
        )

    def to_dict(self) -> dict[str, Any]:
        approve = self.approve_writes
        return {"tools": list(self.tools) if self.tools is not None else None, "may_write": self.may_write,
                "approve_writes": list(approve) if isinstance(approve, tuple) else approve}  # fmt: skip

    def needs_approval(self, tool: Tool, args: dict[str, Any]) -> bool:
        """Whether this grant makes the call wait for the analyst."""
        if not tool.writes or self.approve_writes is False:
            return False
        if self.approve_writes is True:
            return True
        return tool.name in self.approve_writes or f"{tool.name}:{args.get('action')}" in self.approve_writes

    def check(self, tool: Tool) -> None:
        if self.tools is not None and tool.name not in self.tools:
            allowed = ", ".join(self.tools) or "none"
            raise ToolDenied(
                f"The analyst's grant for this session does not include the tool {tool.name!r} "
                f"(allowed: {allowed}). Ask the analyst to widen the grant if you need it."
            )
        if tool.writes and not self.may_write:
            raise ToolDenied(
                f"The tool {tool.name!r} changes case data and this session's grant is read-only. "
                "Describe the change you would make and ask the analyst to make it or to allow writes."
            )


@dataclass
class ToolContext:
    """What a case tool runs with: the case, the session's memory and a database handle."""

    db: CaseDB
    case_id: str
    session_id: str | None = None
    user: str | None = None
    address: str | None = None
    chain: str | None = None
    grant: Grant = field(default_factory=Grant)
    approval: Approval | None = None  # the analyst's yes, when this call ran on their approval
    seen_addresses: set[str] = field(default_factory=set)
    transactions: set[str] = field(default_factory=set)
    bridge_events: set[str] = field(default_factory=set)
    anomaly_flags: set[str] = field(default_factory=set)

    @property
    def actor(self) -> str:
        """Who a write is audited under: the analyst who approved the call, else the assistant."""
        if self.approval is not None:
            return self.approval.by
        return f"agent:{self.session_id}" if self.session_id else "agent"

    def see(self, kind: str, keys: list[str]) -> set[str]:
        """Remember keys as looked at in this session; return those already seen before."""
        target = {
            "address": self.seen_addresses,
            "tx": self.transactions,
            "bridge_event": self.bridge_events,
            "flag": self.anomaly_flags,
        }[kind]
        before = {k for k in keys if k in target}
        if self.session_id is not None:
            before |= self.db.mark_seen(self.session_id, kind, keys)
        target.update(keys)
        return before


class CaseContextProvider:
    """Resolves the ``ToolContext`` from the session at the start of every tool call.

    Without a session (a direct call in a notebook) it uses ``case_id`` and
    ``grant`` given here.
    """

    def __init__(
        self, db: CaseDB, *, case_id: str | None = None, grant: Grant | dict[str, Any] | None = None
    ):
        self.db = db
        self.case_id = case_id
        self.grant = Grant.from_dict(grant) if grant is not None else Grant(may_write=True)

    def for_approved_call(
        self, session: Session | None, tool: Tool, args: dict[str, Any], approval: Approval
    ) -> ToolContext:
        """The context of a call the analyst approved: the grant still applies (a narrowed grant
        still bites), the approval gate does not, and the tool acts under ``approval.by``."""
        return self.for_tool_call(session, tool, args, approval=approval)

    def for_tool_call(
        self, session: Session | None, tool: Tool, args: dict[str, Any], approval: Approval | None = None
    ) -> ToolContext:
        if session is None:
            if self.case_id is None:
                raise ToolDenied("This conversation is not linked to a case, so case tools cannot run.")
            case_id, grant, session_id, user = self.case_id, self.grant, None, None
        else:
            link = self.db.session_link(session.id)
            if link is None:
                raise ToolDenied(
                    "This session is not linked to a case. Start it with Workspace.start_investigation(case_id, ...)."
                )
            case_id, grant_data = link
            grant, session_id, user = Grant.from_dict(grant_data), session.id, session.user
        grant.check(tool)
        sync_annotations(self.db, case_id)  # what analysts wrote on any host, before the tool reads
        asked = args.get("case_id")
        if asked is not None and asked != case_id:
            raise ToolDenied(f"This session is linked to case {case_id!r}; it cannot work on case {asked!r}.")
        if approval is None and grant.needs_approval(tool, args):
            raise NeedsApproval(
                write_summary(tool.name, args), "This session's grant makes such writes wait for the analyst."
            )
        ctx = ToolContext(db=self.db, case_id=case_id, session_id=session_id, user=user, grant=grant,
                          approval=approval)  # fmt: skip
        ctx.address = args.get("address") if isinstance(args.get("address"), str) else None
        ctx.chain = args.get("chain") if isinstance(args.get("chain"), str) else None
        if session_id is not None:
            ctx.seen_addresses = set(self.db.seen(session_id, "address"))
            ctx.transactions = set(self.db.seen(session_id, "tx"))
            ctx.bridge_events = set(self.db.seen(session_id, "bridge_event"))
            ctx.anomaly_flags = set(self.db.seen(session_id, "flag"))
        return ctx


_VERBS = {"confirm_flag": "Confirm flag", "dismiss_flag": "Dismiss flag", "add_label": "Label address",
          "set_role": "Set the role of", "note": "Add a note to"}  # fmt: skip


def write_summary(tool: str, args: dict[str, Any]) -> str:
    """What the analyst reads beside Approve / Deny: a sentence made from the call's own arguments
    (the arguments follow in full on the card), never from case text."""
    given = args.get("payload")
    payload: dict[str, Any] = given if isinstance(given, dict) else {}
    if tool == "annotate" and args.get("action") in _VERBS:
        what = f"{_VERBS[args['action']]} {args.get('target')!s}"
        extra = payload.get("label") or payload.get("role") or payload.get("note") or payload.get("text")
        return f"{what}: {extra!r}." if extra else f"{what}."
    if tool == "run_detectors":
        names = args.get("detectors")
        return f"Run the detectors {', '.join(map(str, names))} and store their flags." if names else (
            "Run every detector and store the flags they find.")  # fmt: skip
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{tool}({shown})"
