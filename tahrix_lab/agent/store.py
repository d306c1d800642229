"""Kept so ``tahrix_lab.agent.store.TranscriptStore`` goes on working: the store lives in
``tahrix_lab.agent.storage`` (one interface, a DuckDB and a PostgreSQL engine)."""

from tahrix_lab.agent.storage import DEFAULT_DB, TranscriptStore
from tahrix_lab.agent.storage.schema import MIGRATIONS
from tahrix_lab.agent.storage.target import default_target as default_path

__all__ = ["DEFAULT_DB", "MIGRATIONS", "TranscriptStore", "default_path"]
