"""Two hosts on one record: separate processes in separate working directories that share
nothing but the PostgreSQL URL."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.agent.storage.pg_server import PgServer

ROOT = Path(__file__).resolve().parents[3]

# A host's long-lived process: reads "spend USER TOKENS" or "check USER" lines.
HOST = textwrap.dedent(
    """
    import os, sys
    from tahrix_lab.agent import Budget, BudgetExceeded, Message, TranscriptStore, Usage
    store = TranscriptStore()  # $TAHRIX_DB: the team's URL
    budget = Budget(global_monthly_usd=float(os.environ["TEAM_CAP"]), store=store, sync_every=0.0)
    for line in sys.stdin:
        cmd, user, *rest = line.split()
        if cmd == "spend":
            s = store.create_session(user=user)
            store.append_message(s.id, Message(role="assistant", parts=[], backend="openai",
                                               model_id="gpt-4o-mini", usage=Usage(int(rest[0]), 1000)))
            print("spent", flush=True)
        else:
            try:
                budget.check(user)
                print("ok", flush=True)
            except BudgetExceeded as exc:
                print(exc.bucket, flush=True)
    """
)


class Host:
    def __init__(self, cwd: Path, url: str) -> None:
        cwd.mkdir()
        self.cwd = cwd
        env = {**os.environ, "TAHRIX_DB": url, "PYTHONPATH": str(ROOT), "TEAM_CAP": "0.03"}
        env["TAHRIX_LOG"] = str(cwd / "tahrix.log")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOST],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0
        self.proc.stdout.close()


def test_a_global_cap_set_once_trips_for_every_user_on_both_hosts(
    pg_server: PgServer, tmp_path: Path
) -> None:
    url = pg_server.url(pg_server.create_database())
    a, b = Host(tmp_path / "host-a", url), Host(tmp_path / "host-b", url)
    try:
        assert [a.ask("check alice"), b.ask("check bob")] == ["ok", "ok"]
        assert a.ask("spend alice 100000") == "spent"  # about $0.016 of the $0.03 cap
        assert [a.ask("check alice"), b.ask("check bob")] == ["ok", "ok"]  # under the cap on both
        assert b.ask("spend bob 100000") == "spent"  # the team's spend passes the cap on host B
        for host, user in ((a, "alice"), (a, "carol"), (b, "bob"), (b, "dave")):
            assert host.ask(f"check {user}") == "global_monthly_usd", user
    finally:
        a.close()
        b.close()
    for host in (a, b):  # nothing was shared through the working directory
        assert sorted(p.name for p in host.cwd.iterdir()) in ([], ["tahrix.log"])
