"""The composition root's join of the case domain and the job service.

Neither imports the other (the domain never imports a transport); this
module, above both, adapts a ``Workspace`` to what the service needs.

``CaseIntegration`` structurally satisfies the job service's protocol:
``purpose``, ``start_session(store, *, user, case_id)``, ``context_for(store, session)``, ``registry()``.
"""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Session
from tahrix_lab.case.context import CaseContextProvider, Grant
from tahrix_lab.case.investigator import scripted_backend
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace


class CaseIntegration:
    """Investigation sessions for the job service, backed by a ``Workspace``.

    ``grant`` is what the assistant may do in sessions started here (read-only by default).
    With ``case_id=None`` the sample case is used (loaded on first use).
    """

    purpose: str = "investigation"

    def __init__(self, workspace: Workspace, *, grant: Grant | dict[str, Any] | None = None) -> None:
        self.workspace = workspace
        self.grant = Grant.from_dict(grant)

    def start_session(self, store: TranscriptStore, *, user: str, case_id: str | None) -> Session:
        ws = self.workspace
        if case_id is None:
            case_id = ws.load_sample_case()
        elif not ws.cases.case_exists(case_id):
            raise UserFacingError(f"No case named {case_id!r}.")
        return ws.start_investigation(case_id, user=user, grant=self.grant, store=store)

    def context_for(self, store: TranscriptStore, session: Session) -> CaseContextProvider:
        return self.workspace.context_provider()

    def registry(self) -> ToolRegistry:
        return CASE_TOOLS

    def offline_backend(self) -> FakeBackend:
        """With no provider configured, the service runs the demo's scripted investigation."""
        return scripted_backend()


def case_integration(transcripts: TranscriptStore) -> Any:
    """The job service's sessions are case investigations: the case data lives in
    the same DuckDB file, so the workspace shares the service's connection."""
    from tahrix_lab.mcp.client.config import config_path

    integration = CaseIntegration(Workspace(transcripts.path, connection=transcripts.connection))
    # Loaded now (once per database; a count when already there), not at the first job: the
    # runner starts jobs inside one transcript transaction, and a case load is a transaction of
    # its own, which DuckDB cannot begin inside another on the same connection.
    integration.workspace.load_sample_case()
    if config_path() is None:  # no MCP servers file: the MCP SDK (seconds to import) is not needed
        return integration
    from tahrix_lab.mcp.client.toolbox import with_mcp_tools

    return with_mcp_tools(integration)
