"""``tahrix serve``: the job service's command line (the service itself: ``tahrix_lab.jobs.server``)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from tahrix_lab.app.commands.http_limits import add_limit_options, limits_from_args

if TYPE_CHECKING:  # the service (fastapi, redis…) is imported when serve runs, not at --help
    from tahrix_lab.jobs.server import IntegrationFactory, Settings


def add_commands(sub: Any, integration_factory: IntegrationFactory | None = None) -> None:
    """Add ``serve``. ``integration_factory(transcripts)`` builds the domain integration
    (the case package's); without one, sessions are plain chat."""
    p = sub.add_parser("serve", help="run the job service (HTTP API and chat page)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (0 picks a free one; default 8000)")
    p.add_argument(
        "--workers", type=int, default=4, help="jobs run at once; more wait in a queue (default 4)"
    )
    p.add_argument("--role", choices=["all", "api", "worker"], default="all", help="see docs/service.md")
    p.add_argument("--redis-url", default=os.environ.get("TAHRIX_REDIS_URL"), help="share jobs via Redis")
    p.add_argument("--tokens-file", default=os.environ.get("TAHRIX_TOKENS_FILE"),
                   help='JSON {"<token>": "<user>"}; without it a throw-away token is printed')  # fmt: skip
    p.add_argument("--backend", default=None, help="fake, openai, bedrock or a base URL ($TAHRIX_BACKEND)")
    p.add_argument("--model", default=None, help="model id ($TAHRIX_MODEL)")
    p.add_argument("--fake-script", default=os.environ.get("TAHRIX_FAKE_SCRIPT"),
                   help="fake backend script: echo, slow, or a JSON file (docs/service.md)")  # fmt: skip
    p.add_argument("--api-docs", action="store_true",
                   help="serve /docs and /openapi.json (off by default: /docs loads swagger-ui from a CDN)")  # fmt: skip
    p.add_argument("--max-running-per-user", type=int, default=8,
                   help="answers one user may have running or queued at once; more get 429 (0: no cap)")  # fmt: skip
    p.add_argument("--budget-minute-tokens", type=int, default=None)
    p.add_argument("--budget-hour-tokens", type=int, default=None)
    p.add_argument("--budget-monthly-usd", type=float, default=_env_float("TAHRIX_BUDGET_MONTHLY_USD"),
                   help="USD one user may spend a month ($TAHRIX_BUDGET_MONTHLY_USD); a real model "
                   "started without any budget gets a default cap, with a warning")  # fmt: skip
    p.add_argument("--budget-global-monthly-usd", type=float, default=None)
    add_limit_options(p, max_body="64 KiB")
    p.set_defaults(func=lambda args: _serve(args, integration_factory))


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    return float(value) if value else None


def _serve(args: argparse.Namespace, integration_factory: IntegrationFactory | None) -> int:
    from tahrix_lab.app import workplace
    from tahrix_lab.jobs.server import serve

    if integration_factory is not None and args.role != "api":  # the processes that open cases
        print(f"tahrix serve: {case_access_note()}", flush=True)
    return serve(settings_from_args(args), integration_factory, extend=workplace.mount)


def case_access_note() -> str:
    """Who opens which case, said at start: after an update to grants, an empty case list has a reason."""
    from tahrix_lab.case.access import OPEN_CASES_ENV, open_cases

    opened = open_cases()
    if opened is None:
        return f"every signed-in user opens every case (${OPEN_CASES_ENV}=*)"
    listed = ", ".join(sorted(opened)) or "none"
    return (f"users open the cases granted to them (tahrix case grant CASE USER); "
            f"open to all: {listed} (${OPEN_CASES_ENV})")  # fmt: skip


def settings_from_args(args: argparse.Namespace) -> Settings:
    from tahrix_lab.jobs.server import Settings
    from tahrix_lab.web.guards import Limits
    from tahrix_lab.web.tokens import load_tokens

    tokens = load_tokens(args.tokens_file) if args.tokens_file else {}
    return Settings(
        host=args.host,
        port=args.port,
        workers=args.workers,
        role=args.role,
        redis_url=args.redis_url,
        tokens=tokens,
        backend=args.backend,
        model=args.model,
        fake_script=args.fake_script,
        db=os.environ.get("TAHRIX_DB"),
        max_running_per_user=args.max_running_per_user or None,
        limits=limits_from_args(args, Limits()),
        api_docs=args.api_docs,
        budget_minute_tokens=args.budget_minute_tokens,
        budget_hour_tokens=args.budget_hour_tokens,
        budget_monthly_usd=args.budget_monthly_usd,
        budget_global_monthly_usd=args.budget_global_monthly_usd,
    )
