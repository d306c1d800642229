"""Approve / Deny on the service page (issue 31 item 4), in real headless Chromium against a real
`tahrix serve` with ``TAHRIX_ASSISTANT_WRITES=approve``: the assistant's write waits with its
arguments, the signed-in analyst approves it with a reason, the answer goes on, and a reload shows
who decided. The same card as the notebook's (widgets/cards.js)."""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tahrix_lab.case.workspace import Workspace

pytestmark = pytest.mark.e2e

_spec = importlib.util.spec_from_file_location(
    "_svc_helpers", Path(__file__).parent / "test_service_processes.py"
)
assert _spec is not None and _spec.loader is not None
_svc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_svc)

SCREENS = (
    Path(__file__).resolve().parents[2] / "docs" / "screens"
    if os.environ.get("TAHRIX_SCREENSHOTS") == "docs"
    else Path(tempfile.mkdtemp(prefix="tahrix-screens-"))
)
TOKEN = "approval-token-0123456789abcdefghijklmnop"  # 32+ characters, as the tokens file asks


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("TAHRIX_ASSISTANT_WRITES", "approve")
    with Workspace(str(tmp_path / "probe.duckdb")) as probe:  # flag ids are stable per subject
        flag = probe.cases.list_flags(probe.load_sample_case(), limit=1)[0][0]["flag_id"]
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    tokens.chmod(0o600)
    call = {
        "target_kind": "flag",
        "target": flag,
        "action": "confirm_flag",
        "payload": {"note": "memo checked"},
    }
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay": 0.05, "turns": [
        [{"kind": "text", "text": "I will confirm the flag."}, {"kind": "tool_call", "name": "annotate", "args": call}],
        [{"kind": "text", "text": "The flag is confirmed, with your note."}],
    ]}))  # fmt: skip
    srv = _svc.Serve("--tokens-file", str(tokens), "--fake-script", str(script),
                     db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    srv.db, srv.flag = tmp_path / "t.duckdb", flag
    try:
        yield srv
    finally:
        srv.stop()


def test_the_analyst_approves_a_write_on_the_page(page: Any, server: Any) -> None:
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(server.url + "/")
    page.locator("#token").fill(TOKEN)
    page.locator("#login button[type=submit]").click()
    page.get_by_text("Signed in as alice").wait_for(timeout=15_000)
    page.locator("#case").select_option("CASE-001")
    page.locator("#examples button.example").first.wait_for(timeout=15_000)
    page.locator("#chat textarea").first.fill("Confirm the top flag.")
    page.locator("#chat button", has_text="Send").click()

    card = page.locator(".tx-approval")
    card.locator(".tx-approve").wait_for(timeout=30_000)
    assert "Waiting for your approval" in card.inner_text()
    assert card.locator(".tx-approval-summary").inner_text() == f"Confirm flag {server.flag}: 'memo checked'."
    assert server.flag in card.locator(".tx-approval-args").inner_text()  # the call's arguments, in full
    card.locator(".tx-approval-reason").fill("I read the memo")
    page.locator(".tx-approval").screenshot(path=str(SCREENS / "service-approval-pending.png"))
    card.locator(".tx-approve").click()

    page.get_by_text("The flag is confirmed, with your note.").wait_for(timeout=30_000)
    decided = page.locator(".tx-approval-decision").inner_text()
    assert decided.startswith("Approved by alice") and "I read the memo" in decided
    assert page.locator(".tx-approve").count() == 0

    # a reload reads the conversation back: the decision is in the transcript, the buttons gone
    page.reload()
    page.get_by_text("The flag is confirmed, with your note.").wait_for(timeout=30_000)
    assert page.locator(".tx-approval-decision").inner_text().startswith("Approved by alice")
    assert page.locator(".tx-approve").count() == 0
    assert page.console_errors == []

    server.stop()  # the server holds the file: read it after
    con = duckdb.connect(str(server.db), read_only=True)
    try:
        row = con.execute(
            "SELECT status, updated_by FROM anomaly_flags WHERE flag_id = ?", [server.flag]
        ).fetchone()
    finally:
        con.close()
    assert row == ("confirmed", "alice")
