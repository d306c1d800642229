"""Append-only, named schema migrations with a tracking table.

Each component (the transcript, the case database) owns an ordered tuple of
``Migration``s under a namespace. A migration runs once, in order, and is
recorded in ``_migrations``; never edit one that has shipped — add a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str
    # Run after ``sql`` in the same transaction, given the cursor: a data step that
    # depends on what is in the file (e.g. copying rows from a table that may not exist).
    then: Callable[[Any], None] | None = None


def applied_migrations(conn: Any, namespace: str) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (namespace VARCHAR NOT NULL, name VARCHAR NOT NULL, "
        "applied_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp, PRIMARY KEY (namespace, name))"
    )
    rows = conn.execute(
        "SELECT name FROM _migrations WHERE namespace = ? ORDER BY applied_at, name", [namespace]
    )
    return [r[0] for r in rows.fetchall()]


def apply_migrations(conn: Any, namespace: str, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded; return the names applied now.

    ``conn`` is a ``duck.Database`` or a DuckDB connection (anything with ``cursor()``)."""
    cur = conn.cursor()
    try:
        done = set(applied_migrations(cur, namespace))
        applied = []
        for m in migrations:
            if m.name in done:
                continue
            cur.execute("BEGIN")
            try:
                cur.execute(m.sql)
                if m.then is not None:
                    m.then(cur)
                cur.execute("INSERT INTO _migrations (namespace, name) VALUES (?, ?)", [namespace, m.name])
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
            applied.append(m.name)
        return applied
    finally:
        cur.close()
