"""A call that waits for a person, over MCP: the SDK's client is asked (elicitation) or refused calmly."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tahrix_lab.agent.approvals import pending_calls
from tahrix_lab.agent.decisions import decide
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.mcp.server import CaseMcpServer
from tests.mcp.conftest import ALICE, HttpServer, stop

GRANT = {"may_write": True}


def _decided_flag(ws: Workspace) -> str:
    flag = str(ws.flags("CASE-001", flag_type="dusting")[0]["flag_id"])
    ws.annotate("CASE-001", "flag", flag, "confirm_flag", analyst="bob")
    return flag


def _flag(ws: Workspace, flag: str) -> Any:
    return ws.cases.one("SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [flag])


def _call(
    server: CaseMcpServer, args: dict[str, Any], answers: list[Any] | None, mode: str = "auto"
) -> tuple[Any, list[Any]]:
    """One annotate call through the SDK's client; ``answers``: what its user says (None: no elicitation).

    ``mode``: "auto" speaks the modern protocol in-process (the answer comes back as a retry of
    the call); "legacy" the initialize handshake (the server asks the client with a request).
    """
    asked: list[Any] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return answers.pop(0) if answers else types.ElicitResult(action="cancel")

    async def main() -> Any:
        kwargs: dict[str, Any] = {"elicitation_callback": on_elicit} if answers is not None else {}
        async with Client(server.server, cache=None, mode=mode, **kwargs) as client:
            return await client.call_tool("annotate", args)

    return anyio.run(main), asked


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_client_is_asked_and_approve_runs_it_under_the_users_name(case_db: Path, mode: str) -> None:
    with Workspace(case_db) as ws:
        flag = _decided_flag(ws)
        server = CaseMcpServer(ws, "CASE-001", user="ana", grant=GRANT)
        args = {"target_kind": "flag", "target": flag, "action": "dismiss_flag", "payload": {"note": "memo"}}
        yes = types.ElicitResult(action="accept", content={"approve": True, "reason": "checked on chain"})
        result, asked = _call(server, args, [yes], mode)
        assert not result.is_error, result.structured_content
        [question] = asked
        assert flag in question.message and "bob" in question.message
        assert set(question.requested_schema["properties"]) == {"approve", "reason"}
        assert result.structured_content["after"]["updated_by"] == "ana"
        stamp = result.structured_content["approval"]
        assert (stamp["decision"], stamp["by"], stamp["reason"]) == ("approved", "ana", "checked on chain")
        assert _flag(ws, flag) == {"status": "dismissed", "updated_by": "ana"}
        assert ws.audit_log("CASE-001")[-1]["actor"] == "ana"
        [session] = [s for s in ws.store.list_sessions() if s.purpose == "mcp"]
        messages = ws.store.load_messages(session.id)
        assert [m.role for m in messages] == ["assistant", "tool", "tool"]  # the call, pending, the decision
        assert pending_calls(messages) == []


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_denial_or_a_cancel_changes_nothing(case_db: Path, mode: str) -> None:
    with Workspace(case_db) as ws:
        flag = _decided_flag(ws)
        server = CaseMcpServer(ws, "CASE-001", user="ana", grant=GRANT)
        args = {"target_kind": "flag", "target": flag, "action": "dismiss_flag"}
        no = types.ElicitResult(action="accept", content={"approve": False, "reason": "memos lie"})
        result, _ = _call(server, args, [no], mode)
        assert result.is_error and result.structured_content["error"]["type"] == "denied_by_analyst"
        assert "memos lie" in result.structured_content["error"]["message"]
        result, asked = _call(server, args, [], mode)  # the user dismissed the form
        assert len(asked) == 1 and result.structured_content["approval"]["decision"] == "denied"
        assert _flag(ws, flag) == {"status": "confirmed", "updated_by": "bob"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_client_without_elicitation_is_refused_calmly_and_the_call_stays_decidable(
    case_db: Path, mode: str
) -> None:
    with Workspace(case_db) as ws:
        flag = _decided_flag(ws)
        server = CaseMcpServer(ws, "CASE-001", user="ana", grant=GRANT)
        args = {"target_kind": "flag", "target": flag, "action": "dismiss_flag"}
        result, _ = _call(server, args, None, mode)
        assert result.is_error
        error = result.structured_content["error"]
        assert (
            error["type"] == "needs_approval"
            and "cannot ask" in error["message"]
            and flag in error["message"]
        )
        assert _flag(ws, flag) == {"status": "confirmed", "updated_by": "bob"}
        # an analyst decides it later, from a notebook
        [session] = [s for s in ws.store.list_sessions() if s.purpose == "mcp"]
        [waiting] = pending_calls(ws.store.load_messages(session.id))
        events = list(decide(ws.store, session.id, waiting.id, approve=True, by="carol",
                             context=ws.context_provider(), registry=CASE_TOOLS))  # fmt: skip
        assert events[-1] == ("done", {"session_id": session.id, "stop_reason": "decided"})
        assert _flag(ws, flag) == {"status": "dismissed", "updated_by": "carol"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_real_http_server_asks_the_tokens_user(case_db: Path, tmp_path: Path, mode: str) -> None:
    """``tahrix mcp serve --http --allow-writes`` as a process: the SDK's client is asked and answers."""
    with Workspace(case_db) as ws:
        flag = _decided_flag(ws)
    server = HttpServer(case_db, tmp_path, {ALICE: "alice"}, "--allow-writes")
    asked: list[Any] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True, "reason": "seen on chain"})

    @asynccontextmanager
    async def transport() -> Any:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"}) as http,
            streamable_http_client(server.url, http_client=http) as streams,
        ):
            yield streams

    async def main() -> Any:
        async with Client(transport(), mode=mode, elicitation_callback=on_elicit) as client:
            args = {"target_kind": "flag", "target": flag, "action": "dismiss_flag"}
            return await client.call_tool("annotate", args)

    try:
        result = anyio.run(main)
    finally:
        stop(server.proc)
    assert len(asked) == 1 and flag in asked[0]
    assert not result.is_error, result.structured_content
    assert result.structured_content["approval"]["by"] == "alice"
    with Workspace(case_db) as ws:
        assert _flag(ws, flag) == {"status": "dismissed", "updated_by": "alice"}
