"""A team's deployment on one record: two hosts (separate working directories, nothing
shared but the PostgreSQL URL and the Redis URL), `tahrix serve --role api` on host A,
`--role worker` on host B, and a notebook kernel on each. Jobs posted to A run on B and
land in the record; a global cap set once trips for the kernels and the service on both
hosts; `tahrix costs` on either sees the whole team."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.storage import PostgresStore
from tests.agent.storage.pg_server import PASSWORD, PgServer
from tests.agent.storage.test_team import Host
from tests.e2e.test_service_processes import JOB, RedisServer, Serve, poll_to_end

pytestmark = pytest.mark.e2e

ALICE = {"Authorization": "Bearer alice-token-0123456789abcdefghijklm"}
BOB = {"Authorization": "Bearer bob-token-0123456789abcdefghijklmno"}
CAP = "0.03"  # USD a month for the whole team, as Host's kernels are given


@pytest.fixture
def team(tmp_path: Path) -> Iterator[dict[str, Any]]:
    pg = PgServer()
    pg.start()
    redis_srv = RedisServer(tmp_path).start()
    shared = tmp_path / "shared"  # what an operator hands each host: the tokens and the script
    shared.mkdir()
    tokens = shared / "tokens.json"
    tokens.write_text(json.dumps({ALICE["Authorization"][7:]: "alice", BOB["Authorization"][7:]: "bob"}))
    tokens.chmod(0o600)
    script = shared / "script.json"
    script.write_text(json.dumps({"delay": 0.02, "turns": [[{"kind": "text", "text": "w0 w1 w2 w3"}]]}))
    try:
        yield {
            "url": pg.url(pg.create_database()),
            "redis": redis_srv.url,
            "common": [
                "--redis-url",
                redis_srv.url,
                "--tokens-file",
                str(tokens),
                "--fake-script",
                str(script),
                "--budget-global-monthly-usd",
                CAP,
            ],
        }
    finally:
        redis_srv.stop()
        PostgresStore.close_pools()
        pg.destroy()


def _host(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir()
    return path


def test_two_hosts_share_jobs_the_global_cap_and_costs(tmp_path: Path, team: dict[str, Any]) -> None:
    url = team["url"]
    dir_a, dir_b = _host(tmp_path, "host-a"), _host(tmp_path, "host-b")
    worker = Serve(*team["common"], "--role", "worker", db=url, cwd=dir_b)
    api = Serve(*team["common"], "--role", "api", db=url, cwd=dir_a)
    kernel_a = kernel_b = None
    try:
        worker.wait_listening(marker="worker running")
        api.wait_listening()
        kernel_a, kernel_b = Host(dir_a / "kernel", url), Host(dir_b / "kernel", url)
        with httpx.Client(timeout=30) as client:
            # A job posted to host A's API runs on host B's worker (A runs none) and lands in the record.
            job = client.post(f"{api.url}{JOB}", json={"message": "trace it"}, headers=ALICE).json()
            done = poll_to_end(client, api.url, ALICE, job["job_id"])
            assert done["status"] == "done", done
            with TranscriptStore(url) as record:
                stored = record.load_messages(done["session_id"])
                assert [m.role for m in stored] == ["user", "assistant"]
                assert record.get_session(done["session_id"]).user == "alice"

            # The team spends past the global cap from host A's kernel...
            assert kernel_a.ask("spend carol 100000") == "spent"
            assert kernel_b.ask("check dave") == "ok"  # under the cap
            assert kernel_a.ask("spend carol 100000") == "spent"
            # ...and it trips on host B's kernel and for a job the service runs on host B.
            assert kernel_b.ask("check dave") == "global_monthly_usd"
            deadline = time.monotonic() + 30  # the worker's ledger syncs once a second
            while True:
                refused = client.post(f"{api.url}{JOB}", json={"message": "again"}, headers=BOB).json()
                ended = poll_to_end(client, api.url, BOB, refused["job_id"])
                errors = [c for c in ended["all_chunks"] if c["type"] == "error"]
                if ended["status"] == "error" or time.monotonic() > deadline:
                    break
                time.sleep(1)
            # refused at its start, before any model call, with the budget's own sentence
            assert ended["status"] == "error" and len(errors) == 1, ended
            assert (errors[0]["kind"], errors[0]["status"]) == ("refused", 429)
            assert "team's spending limit" in errors[0]["message"]
    finally:
        for kernel in (kernel_a, kernel_b):
            if kernel is not None:
                kernel.close()
        api.stop()
        worker.stop()

    # `tahrix costs` on either host sees the whole team: the service's users and the kernels'.
    for cwd in (dir_a, dir_b):
        env = {**os.environ, "TAHRIX_DB": url}
        run = subprocess.run(
            [sys.executable, "-m", "tahrix_lab.cli", "costs", "--by", "user", "--json"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        rows = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
        by_user = {r["user"]: r for r in rows}
        assert {"alice", "carol"} <= set(by_user), rows
        assert by_user["carol"]["calls"] == 2
        assert PASSWORD not in run.stdout + run.stderr
    # Nothing went through the working directories: the API host holds no database, and the
    # worker's host only its own evidence file (docs/workspace.md), never a record.
    assert not list(dir_a.rglob("*.duckdb"))
    assert [p.name for p in dir_b.rglob("*.duckdb")] == ["tahrix-evidence.duckdb"]
