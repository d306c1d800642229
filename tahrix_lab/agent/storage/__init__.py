"""The record's storage: one interface (``TranscriptStore``), two engines.

- ``interface``: the store the loop, the budget and the surfaces see.
- ``target``: a DuckDB path or a PostgreSQL URL, told apart in one place; ``redacted``.
- ``duckdb_store`` (with ``duckdb_reports``, ``duck``, ``leased_cursor``, ``file_locks``,
  ``group_commit``, ``schema``): the record in one DuckDB file, shared by the processes of
  one host.
- ``postgres`` (with ``pg_reports``, ``pg_pool``, ``pg_schema``): the record in PostgreSQL,
  shared by a team.
- ``usage_sql``: the cost query's grouped sums, in each engine's SQL (and PostgreSQL's
  ``usage_daily`` rollup).
- ``migrations``: named, append-only migrations with a tracking table, for both.
"""

from tahrix_lab.agent.storage.duckdb_store import DuckDBStore
from tahrix_lab.agent.storage.interface import TranscriptStore
from tahrix_lab.agent.storage.postgres import PostgresStore
from tahrix_lab.agent.storage.target import DEFAULT_DB, default_target, engine_of, redacted

__all__ = [
    "DEFAULT_DB",
    "DuckDBStore",
    "PostgresStore",
    "TranscriptStore",
    "default_target",
    "engine_of",
    "redacted",
]
