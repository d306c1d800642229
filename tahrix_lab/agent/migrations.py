"""Kept for imports in flight: migrations live in ``tahrix_lab.agent.storage.migrations``."""

from tahrix_lab.agent.storage.migrations import Migration, applied_migrations, apply_migrations

__all__ = ["Migration", "applied_migrations", "apply_migrations"]
