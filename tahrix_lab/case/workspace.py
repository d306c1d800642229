"""Workspace: one DuckDB file holding both the transcript and the case data.

ws = Workspace()                      # $TAHRIX_DB or ./tahrix.duckdb
case_id = ws.load_sample_case()       # idempotent
session = ws.start_investigation(case_id, user="ana", grant={"may_write": False})
for event in ws.ask(session, "Where did the stolen ETH go?", backend=..., model=...): ...
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.agent.loop import ask as _ask
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.duck import Database
from tahrix_lab.agent.storage.target import default_target as default_path
from tahrix_lab.agent.storage.target import engine_of
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Session
from tahrix_lab.case import report as _report
from tahrix_lab.case.annotations import apply_annotation as _apply_annotation
from tahrix_lab.case.annotations import revert as _revert
from tahrix_lab.case.citations import verify_citations as _verify_citations
from tahrix_lab.case.citations import with_citations
from tahrix_lab.case.context import CaseContextProvider, Grant, ToolContext
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors import run_detectors as _run_detectors
from tahrix_lab.case.detectors import triage as _triage
from tahrix_lab.case.prompts import INVESTIGATION_PROMPT
from tahrix_lab.case.record_sync import sync_annotations
from tahrix_lab.case.tools import CASE_TOOLS, register_case_tools
from tahrix_lab.case.tracing import TraceParams, role_starts, trace_funds
from tahrix_lab.case.workspace_files import WorkspaceFiles

SAMPLE_CASE_ID = "CASE-001"


def evidence_path() -> str:
    """Where a team's case evidence lives when the record is in PostgreSQL: a DuckDB file,
    ``$TAHRIX_EVIDENCE_DB`` or ``tahrix-evidence.duckdb`` in the working directory."""
    return os.environ.get("TAHRIX_EVIDENCE_DB") or "tahrix-evidence.duckdb"


def sample_case_dir() -> Path:
    """``data/sample_case``: inside the installed package, or at the top of a source checkout."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "data" / "sample_case"
    return installed if installed.is_dir() else package.parent / "data" / "sample_case"


class Workspace(WorkspaceFiles):
    """The transcript store (``ws.store``) and the case database (``ws.cases``) on one file.

    Loading files, folders and label lists: ``WorkspaceFiles`` (``case/workspace_files.py``).

    The file is held only for each statement or burst, so other processes (notebook
    kernels, the CLI, ``tahrix serve``) work on it at the same time (docs/workspace.md).
    ``connection`` shares another component's ``Database`` (or keeps a DuckDB connection).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        connection: Database | duckdb.DuckDBPyConnection | None = None,
        record: TranscriptStore | None = None,
    ):
        # ``record``: where sessions and their case links live when not in this file (a team's
        # PostgreSQL store); the evidence stays in the DuckDB file either way. A postgresql://
        # target (or $TAHRIX_DB) means: that record, beside the evidence file.
        target = os.fspath(path) if path is not None else default_path()
        if connection is None and record is None and engine_of(target) == "postgresql":
            record, path = TranscriptStore(target), evidence_path()
        if isinstance(connection, Database):
            self._conn = connection.acquire()
        elif connection is not None:
            self._conn = Database(":memory:" if path is None else str(path), connection=connection)
        else:
            self._conn = Database.open(str(path) if path is not None else default_path())
        self.path = str(path) if path is not None else self._conn.path
        self.store = record if record is not None else TranscriptStore(self.path, connection=self._conn)
        self.cases = CaseDB(self._conn, record=self.store)
        register_case_tools()

    def lease(self) -> AbstractContextManager[Database]:
        """Hold the file for a burst of statements (one attach, one consistent view)."""
        return self._conn.lease()

    def close(self) -> None:
        self.store.close()
        self._conn.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- loading (the files themselves: WorkspaceFiles) -----------------------------
    def load_sample_case(self, *, detect: bool = True) -> str:
        """Load the shipped sample case once and run the detectors; return its id."""
        has = self.cases.scalar("SELECT count(*) FROM transfers WHERE case_id = ?", [SAMPLE_CASE_ID])
        if not has:
            self.load_case_folder(sample_case_dir())
        if detect and not self.cases.scalar(
            "SELECT count(*) FROM anomaly_flags WHERE case_id = ?", [SAMPLE_CASE_ID]
        ):
            self.run_detectors(SAMPLE_CASE_ID)
        return SAMPLE_CASE_ID

    def list_cases(self) -> list[dict[str, Any]]:
        return self.cases.list_cases()

    def grant_case(
        self, case_id: str, user: str, role: str = "investigator", *, by: str | None = None
    ) -> None:
        """Let ``user`` open the case on the service page, in its jobs and over MCP (docs/security.md)."""
        self.require_case(case_id)
        self.store.grant_case(case_id, user, role, granted_by=by)

    # -- sessions -----------------------------------------------------------
    def require_case(self, case_id: str) -> None:
        if not self.cases.case_exists(case_id):
            known = ", ".join(c["case_id"] for c in self.cases.list_cases()) or "none loaded"
            raise UserFacingError(f"No case named {case_id!r} (cases: {known}).")

    def start_investigation(
        self,
        case_id: str,
        *,
        user: str,
        grant: Grant | dict[str, Any] | None = None,
        title: str | None = None,
        store: TranscriptStore | None = None,
    ) -> Session:
        """A new ``investigation`` session linked to the case with the assistant's grant."""
        self.require_case(case_id)
        g = Grant.from_dict(grant)
        session = (store or self.store).create_session(
            user=user, purpose="investigation", system_prompt=INVESTIGATION_PROMPT.format(case_id=case_id),
            title=title or f"Investigation of {case_id}",
        )  # fmt: skip
        self.cases.link_session(case_id, session.id, g.to_dict(), user)
        return session

    def set_grant(self, session_id: str, grant: Grant | dict[str, Any]) -> Grant:
        if self.cases.session_link(session_id) is None:
            raise UserFacingError(f"Session {session_id!r} is not linked to a case.")
        g = Grant.from_dict(grant)
        self.cases.update_grant(session_id, g.to_dict())
        return g

    def grant(self, session_id: str) -> Grant:
        link = self.cases.session_link(session_id)
        if link is None:
            raise UserFacingError(f"Session {session_id!r} is not linked to a case.")
        return Grant.from_dict(link[1])

    def case_of(self, session_id: str) -> str | None:
        link = self.cases.session_link(session_id)
        return link[0] if link else None

    def context_provider(
        self, case_id: str | None = None, grant: Grant | dict[str, Any] | None = None
    ) -> CaseContextProvider:
        return CaseContextProvider(self.cases, case_id=case_id, grant=grant)

    def registry(self) -> ToolRegistry:
        return CASE_TOOLS

    def ask(self, session: Session | str, text: str, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """``agent.ask`` with the case tools and the case context provider filled in; a case session's
        answer is followed by a ``("citations", {...})`` event (``verify_citations``) before ``done``."""
        kwargs.setdefault("registry", CASE_TOOLS)
        kwargs.setdefault("context", self.context_provider())
        events = _ask(self.store, session, text, **kwargs)
        case_id = self.case_of(session.id if isinstance(session, Session) else session)
        return with_citations(events, self.cases, case_id) if case_id else events  # the citations line

    # -- data for the notebook panels ---------------------------------------------
    def flags(
        self,
        case_id: str,
        *,
        flag_type: str | None = None,
        min_severity: str | None = None,
        status: str | None = None,
        address: str | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        sync_annotations(self.cases, case_id)
        rows, _ = self.cases.list_flags(
            case_id,
            flag_type=flag_type,
            min_severity=min_severity,
            status=status,
            address=address,
            limit=limit,
        )
        return rows

    def triage(
        self, case_id: str, *, min_severity: str | None = None, include_dismissed: bool = False
    ) -> dict[str, Any]:
        """The flags rolled up per entity, address or cohort, most important first (``rows``), with
        each row's underlying flags as evidence; see docs/case.md "Detectors and triage"."""
        self.require_case(case_id)
        sync_annotations(self.cases, case_id)
        return _triage(self.cases, case_id, min_severity=min_severity, include_dismissed=include_dismissed)

    def trace(
        self,
        case_or_address: str | list[str],
        *,
        case_id: str | None = None,
        chain: str | None = None,
        roles: list[str] | tuple[str, ...] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """A fund-flow graph: from a case's role addresses, or from addresses / tx hashes.

        Given a case id, the trace starts at its ``roles`` addresses (default: perpetrator and suspect, or
        the seed addresses when the intake has only seeds); ``summary.start`` says which it used.
        Returns ``summary`` (traced, endpoints, frontier, held and cut-off USD; unpriced counts),
        ``nodes``, ``edges``, ``endpoints`` (by category), ``frontier`` and the params used.
        """
        if "stop_at_categories" in params:
            params["stop_at_categories"] = tuple(params["stop_at_categories"])
        p = TraceParams(**params)
        kind, used_roles = None, None
        if isinstance(case_or_address, str) and self.cases.case_exists(case_or_address) and case_id is None:
            case_id = case_or_address
            starts, used_roles = self.role_starts(case_id, roles)
            kind = "roles"
        else:
            starts = [case_or_address] if isinstance(case_or_address, str) else list(case_or_address)
            if case_id is None:
                row = self.cases.one(
                    "SELECT case_id FROM addresses WHERE address = ? OR address = lower(?) UNION "
                    "SELECT case_id FROM transfers WHERE tx_hash = ? OR tx_hash = lower(?) LIMIT 1",
                    [starts[0]] * 4,
                )
                if row is None:
                    raise UserFacingError(
                        f"{starts[0]!r} is neither a case nor an address or transaction in any case."
                    )
                case_id = row["case_id"]
        sync_annotations(self.cases, case_id)  # roles and analysts' labels from the record
        result = trace_funds(
            self.cases, case_id, starts, chain=chain, params=p, start_kind=kind, roles=used_roles
        )
        if "error" in result:
            raise UserFacingError(result["error"])
        return result

    def role_starts(
        self, case_id: str, roles: list[str] | tuple[str, ...] | None = None
    ) -> tuple[list[str], list[str]]:
        """(addresses, roles used): the given roles, else perpetrator and suspect, else seed."""
        return role_starts(self.cases, case_id, roles)

    def run_detectors(
        self,
        case_id: str,
        detectors: list[str] | None = None,
        overrides: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        self.require_case(case_id)
        return _run_detectors(self.cases, case_id, detectors, overrides)

    def audit_log(self, case_id: str) -> list[dict[str, Any]]:
        sync_annotations(self.cases, case_id)
        return self.cases.audit_log(case_id)

    def annotate(
        self,
        case_id: str,
        target_kind: str,
        target: str,
        action: str,
        payload: dict[str, Any] | None = None,
        *,
        analyst: str,
        chain: str | None = None,
    ) -> dict[str, Any]:
        """An analyst's own write (the ``annotate`` actions), audited under their name; unlike the
        assistant's, it may overturn another analyst's decision."""
        self.require_case(case_id)
        args = {"target_kind": target_kind, "target": target, "action": action, "payload": payload or {}}
        if chain is not None:
            args["chain"] = chain
        result = _apply_annotation(
            ToolContext(db=self.cases, case_id=case_id, user=analyst), args, analyst=analyst
        )
        result.pop("_effects", None)
        return result

    def revert(self, audit_id: str, *, actor: str, case_id: str | None = None) -> dict[str, Any]:
        """Undo one audited write (``audit_id`` from ``annotate``), audited under ``actor``; with
        ``case_id``, only an entry of that case."""
        return _revert(self.cases, audit_id, actor=actor, case_id=case_id)

    # -- citations and the report (docs/report.md) -------------------------------------
    def verify_citations(
        self, text: str, case_id: str, *, tool_results: Iterable[tuple[str, Any]] = ()
    ) -> dict[str, Any]:
        """Every hash, address, amount, time and id of ``text`` looked up in the case:
        ``verified`` (with its row), ``close`` or ``not_found``; ``line`` sums them up."""
        self.require_case(case_id)
        return _verify_citations(self.cases, text, case_id, tool_results=tool_results)

    def report_findings(self, case_id: str, sessions: list[str] | None = None) -> list[dict[str, Any]]:
        """The findings of the case's sessions (or those given), each with its review status."""
        self.require_case(case_id)
        return _report.findings(self.cases, self.store, case_id, self._report_sessions(case_id, sessions))

    def review_finding(
        self, case_id: str, finding_id: str, action: str, *, by: str, text: str | None = None
    ) -> dict[str, Any]:
        """Accept, edit (with ``text``) or drop a finding before export; who and when are recorded."""
        self.require_case(case_id)
        return _report.review(self.cases, case_id, finding_id, action, by=by, text=text)

    def report(
        self,
        case_id: str,
        *,
        sessions: list[str] | None = None,
        path: str | os.PathLike[str] | None = None,
        trace_params: dict[str, Any] | None = None,
    ) -> _report.Report:
        """The case report (docs/report.md): ``.html``, and ``.markdown``; written to ``path``
        when given (``.md`` for Markdown). Sessions default to every session of the case."""
        self.require_case(case_id)
        chosen = self._report_sessions(case_id, sessions)
        try:
            trace = self.trace(case_id, **(trace_params or {}))
        except UserFacingError:  # no role addresses to start from: the report says so
            trace = {"nodes": [], "edges": [], "endpoints": {}, "summary": {}, "params": {}}
        rep = _report.build_report(
            self.cases, self.store, case_id, sessions=chosen, trace=trace, triage=self.triage(case_id)
        )
        if path is not None:
            rep.write(Path(path))
        return rep

    def _report_sessions(self, case_id: str, sessions: list[str] | None) -> list[str]:
        linked = [s["session_id"] for s in self.cases.sessions_of(case_id)]
        if sessions is None:
            return linked
        strangers = [s for s in sessions if s not in linked]
        if strangers:
            raise UserFacingError(f"Session(s) {', '.join(strangers)} are not sessions of case {case_id!r}.")
        return list(sessions)

    # -- the fund-flow graph and the flags panel's rows (case/flowgraph.py, case/flagrows.py) --------
    def flow_graph(self, case_id: str, **params: Any) -> dict[str, Any]:
        """``trace(case_id, **params)`` as the graph panel draws it: native amounts and transactions per
        edge, names, label sources, totals and flags per node."""
        from tahrix_lab.case.flowgraph import flow_graph

        return flow_graph(self.cases, case_id, self.trace(case_id, **params))

    def trace_onward(
        self, case_id: str, node: dict[str, Any], graph: dict[str, Any] | None = None, **params: Any
    ) -> dict[str, Any]:
        """The graph onward from ``node`` (a graph node); from a bridge contract, along the matched legs of
        the crossings ``graph`` shows going into it, never the contract's unrelated outflows."""
        from tahrix_lab.case.flowgraph import bridge_edges, flow_graph, onward_starts

        starts, chain, events = onward_starts(self.cases, case_id, node, graph)
        out = flow_graph(self.cases, case_id, self.trace(starts, case_id=case_id, chain=chain, **params))
        out["edges"] = bridge_edges(self.cases, str(node["id"]), events) + out["edges"]
        return out

    def flag_rows(self, case_id: str) -> dict[str, Any]:
        """``triage(case_id)`` with a label, chain, amount, time, status and one-line explanation per row
        and per flag: what the flags panel shows."""
        from tahrix_lab.case.flagrows import flag_rows

        self.require_case(case_id)
        sync_annotations(self.cases, case_id)
        return flag_rows(self.cases, case_id)
