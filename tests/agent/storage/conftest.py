"""The store conformance suite's fixtures: every store test runs on both engines.

``store_target`` (and ``store``, opened on it) is parametrized over a DuckDB file and a
fresh database on a real PostgreSQL server that one session-scoped fixture starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.storage import PostgresStore
from tests.agent.storage.pg_server import PgServer

ENGINES = ["duckdb", "postgresql"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    server.start()
    try:
        yield server
    finally:
        PostgresStore.close_pools()
        server.destroy()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database on the shared server (its URL holds the password)."""
    yield pg_server.url(pg_server.create_database())
    PostgresStore.close_pools()


@pytest.fixture(params=ENGINES)
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives: a DuckDB file, or a fresh PostgreSQL database."""
    if request.param == "duckdb":
        return str(tmp_path / "t.duckdb")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(store_target: str) -> Iterator[TranscriptStore]:
    s = TranscriptStore(store_target)
    try:
        yield s
    finally:
        s.close()
