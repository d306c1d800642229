"""Fixtures for the MCP tests: a case database file, free ports, our server as a real process."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tahrix_lab.case.workspace import Workspace

HERE = Path(__file__).parent
EXPLORER = HERE / "explorer_server.py"
TAHRIX = [sys.executable, "-m", "tahrix_lab.cli"]
# bearer tokens of the test users (32 characters or more: the server refuses shorter ones)
ALICE, BOB = "token-of-alice-0123456789abcdefghij", "token-of-bob-0123456789abcdefghijkl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"the server exited with {proc.returncode}: {log.read_text(errors='replace')}"
            )
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port} within {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def case_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-case") / "template.duckdb"
    with Workspace(path) as ws:
        ws.load_sample_case()
    return path


@pytest.fixture
def case_db(case_db_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the sample-case database for one test (our server writes to it)."""
    path = tmp_path / "case.duckdb"
    shutil.copy(case_db_template, path)
    return path


def serve_args(db: Path, *extra: str) -> list[str]:
    return [*TAHRIX, "--db", str(db), "mcp", "serve", "--case", "CASE-001", "--user", "ana", *extra]


class HttpServer:
    def __init__(
        self, db: Path, tmp: Path, tokens: dict[str, str], *extra: str, port: int | None = None
    ) -> None:
        self.port = port or free_port()
        self.tokens_file = tmp / "tokens.json"
        self.tokens_file.write_text(json.dumps(tokens))
        self.tokens_file.chmod(0o600)  # the server refuses a tokens file others can read
        args = serve_args(db, "--http", str(self.port), "--tokens-file", str(self.tokens_file), *extra)
        self.log = tmp / "server.log"
        with self.log.open("wb") as log:  # a file, not a pipe: a chatty server cannot block on it
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
        wait_for_port(self.port, self.proc, self.log)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@pytest.fixture
def http_server(case_db: Path, tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer(case_db, tmp_path, {ALICE: "alice", BOB: "bob"})
    yield server
    stop(server.proc)
