"""`tahrix case report CASE [--session ID …] --out report.html`: the case report (docs/report.md)."""

from __future__ import annotations

import argparse
from typing import Any


def add_report_command(case_subparsers: Any) -> None:
    """Add ``report`` to the ``tahrix case`` actions."""
    rep = case_subparsers.add_parser(
        "report",
        help="write the case report: reviewed findings with every citation checked, graph, exposure, provenance",
    )
    rep.add_argument("case_id")
    rep.add_argument(
        "--session", action="append", default=None, metavar="ID",
        help="a session whose answers give the findings (repeatable; default: every session of the case)",
    )  # fmt: skip
    rep.add_argument(
        "--out", required=True, help="the file to write: .html (self-contained page) or .md (Markdown)"
    )
    rep.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        rep = ws.report(args.case_id, sessions=args.session, path=args.out)
    findings = next(s for s in rep.sections if s.id == "findings")
    reported = sum(1 for b in findings.blocks if b[0] == "finding")
    summary = next(s for s in rep.sections if s.id == "summary").blocks[-1][2]
    line = next((row[1] for row in summary if row[0] == "Citations"), "")
    print(f"Wrote {args.out}: {reported} findings from {len(rep.sessions)} session(s); {line}")
    return 0
