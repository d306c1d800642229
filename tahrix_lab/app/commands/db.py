"""``tahrix db …``: ``check`` (which of the record's migrations the database has) and
``migrate`` (apply the missing ones), for a DuckDB file or a PostgreSQL URL (``--db`` or
``$TAHRIX_DB``). A password in the URL is never printed."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tahrix_lab.flow.textsafe import safe


def add_commands(sub: Any) -> None:
    db = sub.add_parser("db", help="the record's database: check its migrations, or apply them")
    actions = db.add_subparsers(dest="db_command", metavar="ACTION")
    check = actions.add_parser("check", help="reach the database and list applied and pending migrations")
    check.set_defaults(func=_check)
    migrate = actions.add_parser("migrate", help="apply the record's pending migrations")
    migrate.set_defaults(func=_migrate)
    db.set_defaults(func=lambda a: (db.print_help(), 2)[1])


def _check(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.storage import admin, default_target

    status = admin.check(default_target())
    print(f"{status.engine}: {safe(status.target)}")
    print(f"applied: {', '.join(status.applied) or 'none'}")
    if status.pending:
        print(f"pending: {', '.join(status.pending)} (run: tahrix db migrate)", file=sys.stderr)
        return 1
    print("up to date")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.storage import admin, default_target, redacted

    target = default_target()
    ran = admin.migrate(target)
    print(f"{safe(redacted(target))}: " + (f"applied {', '.join(ran)}" if ran else "already up to date"))
    return 0
