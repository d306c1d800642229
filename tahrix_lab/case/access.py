"""Who may open which case (issue 31 item 3): the record's grants, plus the open cases.

A user opens a case they are granted (``tahrix case grant``; kept in the record, so a team's
PostgreSQL store shares them), or one of the *open cases* that ``$TAHRIX_OPEN_CASES`` names:
a comma-separated list of case ids, ``*`` for every case (the behaviour before grants), empty
for none. Unset, only the shipped synthetic sample case is open: it is public data, and the
service's offline demo runs on it. The notebook (``Workspace``) is the analyst's own and is
not gated; the service page, its jobs and the MCP server ask here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.workspace import SAMPLE_CASE_ID

if TYPE_CHECKING:
    from tahrix_lab.case.workspace import Workspace

OPEN_CASES_ENV = "TAHRIX_OPEN_CASES"
RUNS = ("investigator", "owner")  # roles that may start an investigation; a viewer only looks


def open_cases() -> set[str] | None:
    """The case ids open to every signed-in user; ``None``: every case."""
    value = os.environ.get(OPEN_CASES_ENV)
    if value is None:
        return {SAMPLE_CASE_ID}
    ids = {v.strip() for v in value.split(",") if v.strip()}
    return None if "*" in ids else ids


def role_of(ws: Workspace, user: str, case_id: str) -> str | None:
    """``user``'s role on ``case_id`` (``investigator`` for an open case), ``None``: may not open it.
    A case that is not loaded answers ``None`` like a forbidden one."""
    if not ws.cases.case_exists(case_id):
        return None
    granted = ws.store.case_access(case_id=case_id, user=user)
    if granted:
        return str(granted[0]["role"])
    opened = open_cases()
    return "investigator" if opened is None or case_id in opened else None


def cases_for(ws: Workspace, user: str) -> list[dict[str, Any]]:
    """The loaded cases ``user`` may open, each with ``role``."""
    granted = ws.store.cases_granted(user)
    opened = open_cases()
    out = []
    for case in ws.list_cases():
        role = granted.get(case["case_id"])
        if role is None and (opened is None or case["case_id"] in opened):
            role = "investigator"
        if role is not None:
            out.append({**case, "role": role})
    return out


def no_case(case_id: str) -> UserFacingError:
    """The one answer for a case that is not loaded and one the user may not open (no enumeration)."""
    return UserFacingError(f"No case named {case_id!r}.")


def require_role(ws: Workspace, user: str, case_id: str, *, run: bool = False) -> str:
    """``user``'s role on the case, or the missing-case refusal; ``run``: starting an investigation,
    which a viewer may not (they know the case, so saying so enumerates nothing)."""
    role = role_of(ws, user, case_id)
    if role is None:
        raise no_case(case_id)
    if run and role not in RUNS:
        raise UserFacingError(f"You may view case {case_id!r} but not investigate it (role {role}).")
    return role
