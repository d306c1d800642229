"""The HTTP limits options of ``tahrix serve`` and ``tahrix mcp serve --http``: one set of names
for ``web.guards.Limits`` (docs/security.md). Unset, the server's own defaults hold."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the guards (uvicorn, starlette) are imported when a server starts, not at --help
    from tahrix_lab.web.guards import Limits

# option dest -> Limits field
_FIELDS = {
    "max_body_bytes": "max_body_bytes",
    "keep_alive_timeout": "keep_alive_s",
    "header_timeout": "header_timeout_s",
    "body_timeout": "body_timeout_s",
    "limit_concurrency": "limit_concurrency",
    "failed_sign_ins_per_minute": "failed_sign_ins_per_minute",
}


def add_limit_options(parser: Any, *, max_body: str) -> None:
    """The six options, in a group of their own; ``max_body`` names the server's body limit."""
    group = parser.add_argument_group("HTTP limits")
    group.add_argument(
        "--max-body-bytes", type=int, help=f"larger request bodies answer 413 (default {max_body})"
    )
    group.add_argument(
        "--keep-alive-timeout", type=float, help="seconds an idle connection stays open (default 5)"
    )
    group.add_argument(
        "--header-timeout", type=float, help="seconds to send a request's headers (default 10)"
    )
    group.add_argument("--body-timeout", type=float, help="seconds to send a request's body (default 30)")
    group.add_argument("--limit-concurrency", type=int,
                       help="connections and requests at once; more answer 503 (0: no limit; default 1000)")  # fmt: skip
    group.add_argument("--failed-sign-ins-per-minute", type=int,
                       help="failed token checks one client address may make a minute; more answer 429 (0: off; default 30)")  # fmt: skip


def limits_from_args(args: argparse.Namespace, defaults: Limits) -> Limits:
    """``defaults`` with the options given on the command line."""
    from dataclasses import replace

    given = {field: getattr(args, dest) for dest, field in _FIELDS.items()}
    return replace(defaults, **{k: v for k, v in given.items() if v is not None})
