"""``tahrix mcp …``: ``serve`` (the case tools as an MCP server) and ``tools`` (the configured servers' tools)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from tahrix_lab.app.commands.http_limits import add_limit_options, limits_from_args


def add_commands(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="MCP: serve the case tools, or list the configured MCP servers' tools")
    ms = mcp.add_subparsers(dest="mcp_command", metavar="ACTION")
    serve = ms.add_parser(
        "serve", help="the case tools as an MCP server (stdio, or streamable HTTP with --http)"
    )
    serve.add_argument("--case", required=True, dest="case_id", help="the case the tools work on")
    serve.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on this port (default: stdio)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--allowed-host", action="append", default=[], metavar="HOST[:PORT]",
        help="a Host header the server answers to (required with a non-loopback --host; repeatable)",
    )  # fmt: skip
    serve.add_argument(
        "--allowed-origin", action="append", default=[], metavar="ORIGIN",
        help="a browser Origin allowed to call the server (repeatable)",
    )  # fmt: skip
    serve.add_argument(
        "--tokens-file", help='HTTP bearer tokens, JSON {"<token>": "<user>"} (default: $TAHRIX_TOKENS_FILE)'
    )
    serve.add_argument(
        "--allow-writes",
        action="store_true",
        help="let callers run annotate and run_detectors (default: read-only)",
    )
    serve.add_argument("--user", help="the user stdio calls are recorded for (default: the login name)")
    add_limit_options(serve, max_body="1 MiB")
    serve.set_defaults(func=_serve)
    tools = ms.add_parser("tools", help="connect to the servers in the MCP servers file and list their tools")
    tools.add_argument("--config", help="the MCP servers file (default: $TAHRIX_MCP_CONFIG)")
    tools.set_defaults(func=_tools)
    mcp.set_defaults(func=lambda a: (mcp.print_help(), 2)[1])


def _serve(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace
    from tahrix_lab.mcp.server import CaseMcpServer
    from tahrix_lab.mcp.server.serving import LIMITS, MCP_PATH, run_http, run_stdio, transport_security

    user = args.user or _login()
    if args.http is not None:  # refuse an open bind before anything starts
        transport_security(args.host, args.allowed_host, args.allowed_origin)
    tokens = _tokens(args.tokens_file, user) if args.http is not None else {}
    ws = Workspace()
    try:
        server = CaseMcpServer(ws, args.case_id, grant={"may_write": args.allow_writes}, user=user)
        mode = "writes allowed" if args.allow_writes else "read-only"
        if args.http is None:  # stdout is the protocol: say nothing there
            print(f"tahrix mcp: serving case {args.case_id} over stdio ({mode})", file=sys.stderr)
            run_stdio(server)
            return 0
        print(
            f"tahrix mcp: serving case {args.case_id} at http://{args.host}:{args.http}{MCP_PATH} ({mode})",
            file=sys.stderr,
            flush=True,
        )
        run_http(server, tokens, host=args.host, port=args.http, allowed_hosts=args.allowed_host,
                 allowed_origins=args.allowed_origin, limits=limits_from_args(args, LIMITS))  # fmt: skip
        return 0
    finally:
        ws.close()


def _tokens(path: str | None, user: str) -> dict[str, str]:
    from tahrix_lab.web.tokens import dev_token, load_tokens

    path = path or os.environ.get("TAHRIX_TOKENS_FILE")
    if path:  # mode 0600 and strong tokens, before the server starts
        return load_tokens(path)
    token = dev_token()
    print(f"tahrix mcp: no tokens file; use this bearer token (user {user}): {token}", file=sys.stderr)
    return {token: user}


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "mcp"


def _tools(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import ConfigurationError
    from tahrix_lab.mcp.client import McpToolbox
    from tahrix_lab.mcp.client.config import CONFIG_ENV, config_path, load_config

    path = args.config or config_path()
    if path is None:
        raise ConfigurationError(f"No MCP servers file: set {CONFIG_ENV} or pass --config.")
    with McpToolbox(load_config(path)).start() as box:
        for tool in box.tools:
            kind = "writes" if tool.writes else "read-only"
            print(f"{tool.name:40} {tool.source}  ({kind}; {', '.join(sorted(tool.purposes))})")
        return 1 if box.problems and not box.tools else 0
