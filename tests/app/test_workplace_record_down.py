"""The service page's routes while the team's PostgreSQL record is down (stopped with
``pg_ctl stop -m immediate``): a calm, retryable 503 naming no server, the detail in the log;
and the same routes answer again once it is back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.agent.storage import PostgresStore
from tahrix_lab.app import workplace
from tahrix_lab.app.case_service import case_integration
from tahrix_lab.jobs.server import Settings, build
from tests.agent.storage.pg_server import PgServer
from tests.agent.storage.test_faults import own_server  # noqa: F401  (a server this module stops)
from tests.jobs.conftest import over_http

API = "/api/v1/agent"
ALICE = {"Authorization": "Bearer alice-token-123"}
OUTAGE_S = 20.0


@pytest.fixture
def served(
    own_server: PgServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[httpx.Client, PgServer]]:
    monkeypatch.setenv("TAHRIX_PG_STATEMENT_TIMEOUT", "1")  # given up on in seconds, not minutes
    monkeypatch.setenv("TAHRIX_PG_RETRY", "1")
    monkeypatch.setenv("TAHRIX_DB_WAIT", "2")
    monkeypatch.delenv("TAHRIX_BACKEND", raising=False)
    monkeypatch.chdir(tmp_path)  # the evidence file beside the PostgreSQL record
    url = own_server.url(own_server.create_database())
    built = build(Settings(tokens={"alice-token-123": "alice"}, db=url, backend="fake"), case_integration,
                  extend=workplace.mount)  # fmt: skip
    try:
        with over_http(built) as client:
            yield client, own_server
    finally:
        PostgresStore.close_pools()


def test_the_page_says_the_record_is_unreachable_and_works_again(
    served: tuple[httpx.Client, PgServer], caplog: pytest.LogCaptureFixture
) -> None:
    client, server = served
    panel = client.get(f"{API}/cases/CASE-001/flags", headers=ALICE)
    assert panel.status_code == 200, panel.text
    flag_id = panel.json()["rows"][0]["flags"][0]["flag_id"]
    decision = f"{API}/cases/CASE-001/flags/{flag_id}/decision"
    undo = f"{API}/cases/CASE-001/flags/{flag_id}/undo"
    dismissed = client.post(decision, json={"action": "dismiss_flag"}, headers=ALICE).json()["last_decision"]

    server.stop("immediate")
    stopped = time.monotonic()
    try:
        answers: list[Any] = [
            client.get(f"{API}/cases", headers=ALICE),
            client.get(f"{API}/cases/CASE-001/flags", headers=ALICE),
            client.post(decision, json={"action": "confirm_flag"}, headers=ALICE),
            client.post(undo, json={"audit_id": dismissed["audit_id"]}, headers=ALICE),
        ]
        # an outage of 20 s, asked all along: the pool's reconnection attempts back off meanwhile
        # (psycopg_pool doubles the delay: left alone, its next attempt would come ~10 s after the restart)
        while time.monotonic() - stopped < OUTAGE_S:
            answers.append(client.get(f"{API}/cases/CASE-001/flags", headers=ALICE))
    finally:
        server.start()
    for got in answers:
        assert got.status_code == 503, got.text
        assert got.json()["detail"] == workplace.RECORD_DOWN
        assert "127.0.0.1" not in got.text  # the server is named in the log, not to the page
    assert "127.0.0.1" in caplog.text

    # a client that waits as it was told is answered: the pool's backoff did not outlast the outage
    time.sleep(float(answers[-1].headers["Retry-After"]))
    undone = client.post(undo, json={"audit_id": dismissed["audit_id"]}, headers=ALICE)
    assert undone.status_code == 200, undone.text  # the undo refused while down was not half done
    assert next(f for f in undone.json()["raw"] if f["flag_id"] == flag_id)["status"] == "new"
    confirmed = client.post(decision, json={"action": "confirm_flag"}, headers=ALICE)
    assert confirmed.status_code == 200, confirmed.text
    flag = next(f for r in confirmed.json()["rows"] for f in r["flags"] if f["flag_id"] == flag_id)
    assert flag["status"] == "confirmed"
