"""`tahrix case grant|revoke|access`: who may open a case on the service page, in its jobs and
over MCP (docs/security.md). The grants live in the record, so on a team's PostgreSQL store one
grant holds on every host."""

from __future__ import annotations

import argparse
import getpass
import os
from typing import Any

ROLES = ("viewer", "investigator", "owner")  # agent.storage.interface.ROLES, spelt out for --help


def add_access_commands(cs: Any) -> None:
    grant = cs.add_parser("grant", help="let a user open a case (service page, jobs, MCP): grant CASE USER")
    grant.add_argument("case_id", metavar="CASE")
    grant.add_argument("user", metavar="USER", help="the user name the service's tokens file maps to")
    grant.add_argument("--role", choices=ROLES, default="investigator",
                       help="viewer: sees the case; investigator: also asks the assistant; owner: as "
                       "investigator, and recorded as the case's owner (default investigator)")  # fmt: skip
    grant.set_defaults(func=_grant)
    revoke = cs.add_parser("revoke", help="take a user's access to a case away: revoke CASE USER")
    revoke.add_argument("case_id", metavar="CASE")
    revoke.add_argument("user", metavar="USER")
    revoke.set_defaults(func=_revoke)
    acc = cs.add_parser("access", help="who may open a case, as what, granted by whom and when")
    acc.add_argument("case_id", metavar="CASE")
    acc.set_defaults(func=_access)


def operator() -> str | None:
    """Who runs the command, as recorded in ``granted_by``: ``$TAHRIX_USER``, else the login name."""
    try:
        return os.environ.get("TAHRIX_USER") or getpass.getuser()
    except Exception:  # no login name in some containers
        return None


def _grant(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        ws.grant_case(args.case_id, args.user, args.role, by=operator())
    print(f"{args.user} may open {args.case_id} as {args.role}.")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:  # no need for the case to be loaded here: a revoke only takes away
        gone = ws.store.revoke_case(args.case_id, args.user)
    print(f"{args.user} may no longer open {args.case_id}." if gone else
          f"{args.user} had no access to {args.case_id}; nothing changed.")  # fmt: skip
    return 0


def _access(args: argparse.Namespace) -> int:
    from tahrix_lab.case.access import OPEN_CASES_ENV, open_cases
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        ws.require_case(args.case_id)
        rows = ws.store.case_access(case_id=args.case_id)
    opened = open_cases()
    if opened is None or args.case_id in opened:
        print(f"{args.case_id} is open to every signed-in user (${OPEN_CASES_ENV}).")
    if not rows:
        print(f"No one is granted {args.case_id}.")
    for r in rows:
        when = r["granted_at"].strftime("%Y-%m-%d %H:%M UTC") if r["granted_at"] else "?"
        print(f"{r['user']}\t{r['role']}\tgranted by {r['granted_by'] or '?'} at {when}")
    return 0
