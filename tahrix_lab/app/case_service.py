"""The composition root's join of the case domain and the job service.

Neither imports the other (the domain never imports a transport); this
module, above both, adapts a ``Workspace`` to what the service needs.

``CaseIntegration`` structurally satisfies the job service's protocol:
``purpose``, ``start_session(store, *, user, case_id)``, ``context_for(store, session)``, ``registry()``,
and the optional parts: the citations line after each answer (``answer_events``), who may open a
conversation (``may_open_session``) and the offline model. What the service page shows
(``cases_for``, ``case_view``, ``trace_onward``, ``decide_flag``, ``turn_citations``, ``session_cases``) is called
by the page's routes in ``app/workplace.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.errors import ConfigurationError, ToolRetry, UserFacingError
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Session
from tahrix_lab.case import access
from tahrix_lab.case.citations import verify_citations, with_citations
from tahrix_lab.case.context import CaseContextProvider, Grant
from tahrix_lab.case.investigator import QUESTION, scripted_backend
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace, evidence_path


class ViewOnly(UserFacingError):
    """The user may view the case but not change it (a viewer); the page's route answers 403."""


class CaseIntegration:
    """Investigation sessions for the job service, backed by a ``Workspace``.

    ``grant`` is what the assistant may do in sessions started here (read-only by default).
    With ``case_id=None`` the sample case is used (loaded on first use). ``mcp_servers``: a
    servers file whose tools its sessions are offered too (``tahrix_lab.mcp.client``).
    """

    purpose: str = "investigation"

    def __init__(
        self,
        workspace: Workspace,
        *,
        grant: Grant | dict[str, Any] | None = None,
        mcp_servers: str | os.PathLike[str] | None = None,
    ) -> None:
        self.workspace = workspace
        self.grant = Grant.from_dict(grant)
        self.mcp_servers = mcp_servers

    def start_session(self, store: TranscriptStore, *, user: str, case_id: str | None) -> Session:
        ws = self.workspace
        if case_id is None:
            case_id = ws.load_sample_case()
        # a case the user may not open answers as an unknown one (access.no_case)
        access.require_role(ws, user, case_id, run=True)
        return ws.start_investigation(case_id, user=user, grant=self.grant, store=store)

    def context_for(self, store: TranscriptStore, session: Session) -> CaseContextProvider:
        """Every run in a session asks here first: a conversation on a case its user may no longer
        open (or run) is refused as the service refuses someone else's conversation."""
        case_id = self.workspace.case_of(session.id)
        if case_id is not None and access.role_of(self.workspace, session.user, case_id) not in access.RUNS:
            from tahrix_lab.jobs import JobRejected  # the service's refusal (a 404, as for no conversation)

            raise JobRejected(404, "There is no conversation with this session_id.", "session_id")
        return self.workspace.context_provider()

    def may_open_session(self, user: str, session: Session) -> bool:
        """A conversation on a case ``user`` may no longer open (case/access.py) is closed to them:
        the service answers it as someone else's (404) and leaves it out of their list."""
        case_id = self.workspace.case_of(session.id)
        return case_id is None or access.role_of(self.workspace, user, case_id) is not None

    def registry(self) -> ToolRegistry:
        if self.mcp_servers is None:
            return CASE_TOOLS
        # Imported (and the servers started) at the first run, not at start-up: the SDK takes seconds.
        from tahrix_lab.mcp.client.toolbox import registry_with_mcp

        return registry_with_mcp(CASE_TOOLS, self.mcp_servers)

    def offline_backend(self) -> FakeBackend:
        """With no provider configured, the service runs the demo's scripted investigation."""
        return scripted_backend()

    def answer_events(self, session: Session, events: Iterator[Any]) -> Iterator[Any]:
        """A case session's answers end with their citations line, as in the notebook widget."""
        case_id = self.workspace.case_of(session.id)
        return with_citations(events, self.workspace.cases, case_id) if case_id else events

    # -- the service page (app/workplace.py) -----------------------------------------------------------
    def cases_for(self, user: str) -> list[dict[str, Any]]:
        """The cases ``user`` may open (granted, or open: case/access.py), with their role. The one
        place the page's picker, its case routes and new jobs ask."""
        keep = ("case_id", "title", "incident_type", "incident_time", "status", "summary", "role")
        return [{k: c.get(k) for k in keep} for c in access.cases_for(self.workspace, user)]

    def case_for(self, user: str, case_id: str) -> dict[str, Any] | None:
        return next((c for c in self.cases_for(user) if c["case_id"] == case_id), None)

    def case_view(self, user: str, case_id: str, part: str) -> dict[str, Any] | None:
        """``part`` of a case for the page: ``examples`` (questions to start from), ``flags`` (the flags
        panel's rows) or ``graph`` (the fund-flow graph panel's graph); ``None``: not a case for this user."""
        from tahrix_lab.lab.panel_data import graph_data  # the notebook panels' own shapes

        case = self.case_for(user, case_id)
        if case is None:
            return None
        ws = self.workspace
        if part == "examples":
            return {"case": case, "examples": example_questions(ws, case_id)}
        if part == "flags":
            return self._flags_view(case)
        if part == "graph":  # as notebook 01 draws it
            return {
                "title": f"Fund flow · {case_id}",
                "graph": graph_data(ws.flow_graph(case_id, **GRAPH_PARAMS)),
            }
        raise ValueError(f"unknown part {part!r}")

    def decide_flag(self, user: str, case_id: str, flag_id: str, action: str) -> dict[str, Any] | None:
        """The page's Confirm or Dismiss on a flag: ``ws.annotate`` under ``user``'s name; returns the
        flags panel's rows after it. ``None``: not a case for this user; a viewer gets ``ViewOnly``."""
        case = self._deciding(user, case_id)
        if case is None:
            return None
        try:
            done = self.workspace.annotate(case_id, "flag", flag_id, action, analyst=user)
        except ToolRetry as exc:  # the annotate tool's refusal (an unknown flag): the analyst's too
            raise UserFacingError(exc.message) from None
        last = {"flag_id": flag_id, "action": action, "audit_id": done["audit_id"]}
        return {**self._flags_view(case), "last_decision": last}

    def undo_flag_decision(
        self, user: str, case_id: str, flag_id: str, audit_id: str
    ) -> dict[str, Any] | None:
        """The page's Undo: takes back ``user``'s own decision ``audit_id`` on ``flag_id`` (any other
        entry is refused); returns the flags panel's rows after it. ``None`` and ``ViewOnly`` as
        ``decide_flag``."""
        case = self._deciding(user, case_id)
        if case is None:
            return None
        entry = next((e for e in self.workspace.audit_log(case_id) if e["audit_id"] == audit_id), None)
        if (
            entry is None
            or (entry["target_kind"], entry["target_id"]) != ("flag", flag_id)
            or (entry["action"] not in ("confirm_flag", "dismiss_flag") or entry["actor"] != user)
        ):
            raise UserFacingError(f"{audit_id!r} is not a decision of yours on {flag_id}.")
        self.workspace.revert(audit_id, actor=user, case_id=case_id)
        return self._flags_view(case)

    def _deciding(self, user: str, case_id: str) -> dict[str, Any] | None:
        """The case, for one who may decide on its flags; ``None``: not a case for this user."""
        case = self.case_for(user, case_id)
        if case is not None and case["role"] not in access.RUNS:
            raise ViewOnly(
                f"You may view case {case_id!r} but not decide on its flags (role {case['role']})."
            )
        return case

    def _flags_view(self, case: dict[str, Any]) -> dict[str, Any]:
        """The flags panel's data; Confirm / Dismiss for those who may investigate the case."""
        from tahrix_lab.lab.panel_data import flags_data

        case_id = case["case_id"]
        return {
            "title": f"Flags · {case_id}",
            "can_decide": case["role"] in access.RUNS,
            **flags_data(self.workspace.flag_rows(case_id)),
        }

    def trace_onward(
        self, user: str, case_id: str, node: dict[str, Any], edges_in: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The graph onward from ``node`` as the graph panel's "Trace onward" gets it (``edges_in``: the
        page's flows into the node, so a bridge contract is left along their matched legs only)."""
        from tahrix_lab.lab.panel_data import graph_data

        if self.case_for(user, case_id) is None:
            return None
        onward = {**GRAPH_PARAMS, "max_hops": ONWARD_HOPS}
        try:
            found = self.workspace.trace_onward(case_id, node, {"edges": edges_in}, **onward)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # not a node or flows the graph drew
            raise UserFacingError("That node or its flows are not as the case's graph draws them.") from exc
        return {"graph": graph_data(found)}

    def turn_citations(self, session_id: str, chunks: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """The citations line of each turn of a stored conversation (``history_chunks``), as its live run
        sent it: the transcript does not keep the line, so a conversation read again checks it anew.
        (The caller owns the session; a case they may no longer open gets no lines.)"""
        case_id = self.workspace.case_of(session_id)
        if case_id is not None:
            user = self.workspace.store.get_session(session_id).user
            if access.role_of(self.workspace, user, case_id) is None:
                return [None for c in chunks if c.get("type") == "user"]
        turns: list[tuple[list[str], list[tuple[str, Any]]]] = []
        for c in chunks:
            if c.get("type") == "user":
                turns.append(([], []))
            elif turns and c.get("type") == "content":
                turns[-1][0].append(str(c.get("text") or ""))
            elif turns and c.get("type") == "tool_result" and c.get("status") == "ok":
                turns[-1][1].append((str(c.get("name")), c.get("result")))
        db = self.workspace.cases
        return [
            verify_citations(db, "".join(text), case_id, tool_results=results)
            if case_id and "".join(text).strip()
            else None
            for text, results in turns
        ]

    def session_cases(self, session_ids: list[str]) -> dict[str, str]:
        """The case of each of these sessions that has one its user may still open (the page's
        conversations list shows no case it could not open)."""
        found = {}
        for sid in session_ids:
            case_id = self.workspace.case_of(sid)
            if case_id is not None:
                user = self.workspace.store.get_session(sid).user
                if access.role_of(self.workspace, user, case_id) is not None:
                    found[sid] = case_id
        return found


GRAPH_PARAMS: dict[str, Any] = {"max_hops": 4, "min_usd": 1000}
ONWARD_HOPS = 2  # as FlowGraphPanel.for_case


def example_questions(ws: Workspace, case_id: str) -> list[str]:
    """Questions to start from: the investigation, then ones the offline investigator answers from its
    tools (flags, the money's path, bridges, the top triage row's address)."""
    out = [
        QUESTION.format(case_id=case_id),
        "How much was stolen, and from which addresses?",
        "Where did the funds go? Which exchanges or mixers received them?",
        "Which flags in the triage matter most, and why?",
        "Were any bridges used to move the funds across chains?",
    ]
    rows = ws.flag_rows(case_id).get("rows") or []
    subject = next((r["subject"] for r in rows if (r.get("subject") or {}).get("kind") == "address"), None)
    if subject and subject.get("address"):
        out.append(f"What do we know about {subject['address']}?")
    return out


def workspace_for(transcripts: TranscriptStore) -> Workspace:
    """The case workspace beside a record: on DuckDB the evidence shares the record's file
    (and its connection); on PostgreSQL it is the ``evidence_path()`` file, and sessions and
    their case links are read and written in the record."""
    if transcripts.engine == "postgresql":
        return Workspace(evidence_path(), record=transcripts)  # the evidence file beside the record
    return Workspace(transcripts.path, connection=transcripts.connection)


WRITES_ENV = "TAHRIX_ASSISTANT_WRITES"


def service_grant() -> dict[str, Any]:
    """What the assistant may do in the service's sessions: read-only unless the operator sets
    ``$TAHRIX_ASSISTANT_WRITES=approve``, where it may propose writes (annotate, run_detectors) and
    each waits for the signed-in analyst's Approve on the page. There is no setting that lets it
    write unasked."""
    mode = os.environ.get(WRITES_ENV, "off").strip().lower()
    if mode not in ("off", "approve"):
        raise ConfigurationError(f"{WRITES_ENV} must be 'off' or 'approve', not {mode!r}.")
    return {"may_write": True, "approve_writes": True} if mode == "approve" else {}


def case_integration(transcripts: TranscriptStore) -> CaseIntegration:
    """The job service's sessions are case investigations on the workspace beside the record
    (``workspace_for``), offered the MCP servers' tools when a servers file is configured."""
    from tahrix_lab.mcp.client.config import config_path

    integration = CaseIntegration(
        workspace_for(transcripts), grant=service_grant(), mcp_servers=config_path()
    )
    # Loaded now (once per database; a count when already there), not at the first job: the
    # runner starts jobs inside one transcript transaction, and a case load is a transaction of
    # its own, which DuckDB cannot begin inside another on the same connection.
    integration.workspace.load_sample_case()
    return integration
