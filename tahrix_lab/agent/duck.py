"""Kept for imports in flight: the DuckDB plumbing lives in ``tahrix_lab.agent.storage.duck``."""

from tahrix_lab.agent.storage.duck import Database, connect

__all__ = ["Database", "connect"]
