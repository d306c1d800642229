"""``tahrix …`` commands. Each layer contributes its own in a ``commands``
module with ``add_commands(subparsers)``; this file only assembles them."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from tahrix_lab import __version__
from tahrix_lab.agent.errors import TahrixError
from tahrix_lab.agent.store import TranscriptStore


def build_parser() -> argparse.ArgumentParser:
    from tahrix_lab.case import commands as case_commands
    from tahrix_lab.jobs import commands as jobs_commands
    from tahrix_lab.lab import commands as lab_commands
    from tahrix_lab.mcp import commands as mcp_commands

    parser = argparse.ArgumentParser(
        prog="tahrix", description="Tahrix Lab: on-chain investigations with an LLM assistant."
    )
    parser.add_argument("--version", action="version", version=f"tahrix-lab {__version__}")
    parser.add_argument("--db", help="the DuckDB file (default: $TAHRIX_DB or ./tahrix.duckdb)")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log details (raw provider errors) to stderr"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    case_commands.add_commands(sub)
    jobs_commands.add_commands(sub, integration_factory=case_integration)
    lab_commands.add_commands(sub)
    mcp_commands.add_commands(sub)
    return parser


def case_integration(transcripts: TranscriptStore) -> Any:
    """The job service's sessions are case investigations: the case data lives in
    the same DuckDB file, so the workspace shares the service's connection."""
    from tahrix_lab.case.workspace import Workspace
    from tahrix_lab.integration import CaseIntegration
    from tahrix_lab.mcp.client import with_mcp_tools  # adds $TAHRIX_MCP_CONFIG's servers' tools, if set

    return with_mcp_tools(CaseIntegration(Workspace(transcripts.path, connection=transcripts.connection)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.db:
        os.environ["TAHRIX_DB"] = args.db
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except TahrixError as exc:
        print(f"tahrix: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
