"""``tahrix db check`` and ``tahrix db migrate`` for either engine, without opening a store.

``check`` reads which of the record's named migrations a target has (applying none);
``migrate`` applies the missing ones. Both name a PostgreSQL target without its password.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage import pg_schema, schema
from tahrix_lab.agent.storage.duck import Database
from tahrix_lab.agent.storage.migrations import applied_migrations, apply_migrations
from tahrix_lab.agent.storage.pg_pool import connect_once
from tahrix_lab.agent.storage.target import Engine, engine_of, redacted

NAMESPACE = "transcript"


@dataclass(frozen=True)
class Status:
    engine: Engine
    target: str  # redacted
    applied: list[str]
    pending: list[str]


def check(target: str) -> Status:
    """The record's migrations at ``target``: applied and pending (nothing is changed)."""
    engine = engine_of(target)
    if engine == "postgresql":
        with connect_once(target) as conn:
            done = pg_schema.applied(conn, NAMESPACE)
        names = [m.name for m in pg_schema.MIGRATIONS]
    else:
        if target != ":memory:" and not os.path.exists(os.path.expanduser(target)):
            raise ConfigurationError(f"No DuckDB file at {target!r} yet (it is made on first use).")
        db = Database.open(target)
        try:
            with db.lease():
                cur = db.cursor()
                done = applied_migrations(cur, NAMESPACE)
                cur.close()
        finally:
            db.close()
        names = [m.name for m in schema.MIGRATIONS]
    return Status(engine, redacted(target), done, [n for n in names if n not in done])


def migrate(target: str) -> list[str]:
    """Apply the record's missing migrations at ``target``; the names applied now."""
    if engine_of(target) == "postgresql":
        with connect_once(target) as conn:
            return pg_schema.migrate(conn, NAMESPACE, pg_schema.MIGRATIONS)
    db = Database.open(target)
    try:
        with db.lease():
            return apply_migrations(db, NAMESPACE, schema.MIGRATIONS)
    finally:
        db.close()
