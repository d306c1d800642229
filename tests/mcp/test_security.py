"""Security of ``tahrix mcp serve`` as a real process on loopback, driven by the SDK's client."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import httpx

from tahrix_lab.agent.bounds import json_size
from tahrix_lab.agent.secrets import redact_url
from tahrix_lab.agent.tools import DEFAULT_MAX_RESULT_BYTES
from tahrix_lab.case.workspace import Workspace
from tests.mcp.conftest import ALICE, BOB, TAHRIX, HttpServer, free_port, serve_args, stop
from tests.mcp.test_server_http import _call

MARKER = "…[truncated: 100,000,000 characters]"


def test_a_huge_cell_is_bounded_before_the_transcript_keeps_it(
    http_server: HttpServer, case_db: Path
) -> None:
    _, out = _call(http_server.url, ALICE, "run_sql", {"query": "SELECT repeat('a', 100000000) AS big"})
    assert out.is_error is False and MARKER in json.dumps(out.structured_content, ensure_ascii=False)
    stop(http_server.proc)
    with Workspace(case_db) as ws:
        session = next(s for s in ws.store.list_sessions() if s.purpose == "mcp" and s.user == "alice")
        results = [
            p.tool_result
            for m in ws.store.load_messages(session.id)
            for p in m.parts
            if p.type == "tool_result"
        ]
        assert results == [out.structured_content]  # the record holds exactly what the caller was sent
        assert json_size(results[0]) <= DEFAULT_MAX_RESULT_BYTES
        parts = [p for m in ws.store.load_messages(session.id) for p in m.parts]
        stored = sum(
            len(json.dumps([p.tool_input, p.tool_result, p.text], ensure_ascii=False)) for p in parts
        )
        assert stored <= DEFAULT_MAX_RESULT_BYTES + 1000  # the call and its bounded result, nothing more


def _refused(
    case_db: Path, tmp_path: Path, tokens: dict[str, str], mode: int
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(tokens))
    path.chmod(mode)
    args = serve_args(case_db, "--http", str(free_port()), "--tokens-file", str(path))
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_a_tokens_file_others_can_read_is_refused(case_db: Path, tmp_path: Path) -> None:
    out = _refused(case_db, tmp_path, {ALICE: "alice"}, 0o666)
    assert out.returncode != 0 and "chmod 600" in out.stderr and "0666" in out.stderr
    assert ALICE not in out.stderr  # the refusal does not print the secret it protects


def test_a_short_token_is_refused(case_db: Path, tmp_path: Path) -> None:
    out = _refused(case_db, tmp_path, {"short-token-123": "carol"}, 0o600)
    assert out.returncode != 0 and "shorter than 32 characters" in out.stderr and "carol" in out.stderr
    assert "short-token-123" not in out.stderr


def test_redact_url_hides_only_the_password() -> None:
    assert redact_url("redis://:pw@localhost:6379/0") == "redis://:***@localhost:6379/0"
    assert redact_url("postgresql://ana:s3cret@db.example/tahrix") == "postgresql://ana:***@db.example/tahrix"
    assert redact_url("redis://localhost:6379/0") == "redis://localhost:6379/0"


def _post(url: str, token: str, body: dict[str, object], session: str | None = None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    return httpx.post(url, json=body, headers=headers, timeout=30)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}  # fmt: skip
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def test_an_mcp_session_is_its_users_alone(http_server: HttpServer) -> None:
    url = http_server.url
    init = _post(url, ALICE, INIT)
    sid = init.headers["mcp-session-id"]
    _post(url, ALICE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    unknown = _post(url, BOB, LIST, "f" * 32)
    stolen = _post(url, BOB, LIST, sid)
    assert unknown.status_code == 404 and stolen.status_code == 404  # as for an unknown session
    auth = {"Authorization": f"Bearer {BOB}", "mcp-session-id": sid}
    assert httpx.delete(url, headers=auth, timeout=30).status_code == 404  # bob cannot end it
    mine = _post(url, ALICE, LIST, sid)
    assert mine.status_code == 200 and "lookup_address" in mine.text  # alice's session still works


def test_the_cli_log_file_is_created_0600_under_umask_022(tmp_path: Path) -> None:
    log = tmp_path / "state" / "tahrix.log"
    env = {**os.environ, "TAHRIX_LOG": str(log)}
    out = subprocess.run(["/bin/sh", "-c", 'umask 022 && exec "$@"', "sh", *TAHRIX], env=env,
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert out.returncode == 2 and log.exists()  # help printed; the log is there for what follows
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_non_loopback_bind_needs_allowed_hosts(case_db: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE: "alice"}))
    tokens.chmod(0o600)
    args = serve_args(case_db, "--http", str(free_port()), "--host", "0.0.0.0", "--tokens-file", str(tokens))
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode != 0 and "--allowed-host" in out.stderr


def test_allowed_hosts_keep_dns_rebinding_protection_on(case_db: Path, tmp_path: Path) -> None:
    port = free_port()
    server = HttpServer(case_db, tmp_path, {ALICE: "alice"}, "--host", "0.0.0.0", "--allowed-host",
                        f"mcp.test:{port}", port=port)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {ALICE}"}
        good = httpx.post(url, json=INIT, headers={**headers, "Host": f"mcp.test:{port}"}, timeout=30)
        evil = httpx.post(url, json=INIT, headers={**headers, "Host": "evil.example"}, timeout=30)
        assert good.status_code == 200 and evil.status_code in (403, 421)
    finally:
        stop(server.proc)
