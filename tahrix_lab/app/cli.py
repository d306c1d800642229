"""``tahrix …`` commands. Each group contributes its own in ``app/commands/<group>.py``
with ``add_commands(subparsers)``; this file only assembles them.

Start-up is part of the interface: building the parser imports only argparse and the
command modules, whose heavy imports (duckdb, pandas, rich, fastapi, jsonschema, the SDKs)
happen inside the handlers, so ``tahrix --help`` answers at once (``bench/bench_cli_startup.py``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tahrix_lab import __version__

if TYPE_CHECKING:
    from tahrix_lab.agent.storage import TranscriptStore


def build_parser() -> argparse.ArgumentParser:
    from tahrix_lab.app.commands import case as case_commands
    from tahrix_lab.app.commands import db as db_commands
    from tahrix_lab.app.commands import labels as labels_commands
    from tahrix_lab.app.commands import mcp as mcp_commands
    from tahrix_lab.app.commands import notebook as notebook_commands
    from tahrix_lab.app.commands import serve as serve_commands
    from tahrix_lab.app.commands import transcripts as transcript_commands

    parser = argparse.ArgumentParser(
        prog="tahrix", description="Tahrix Lab: on-chain investigations with an LLM assistant."
    )
    parser.add_argument("--version", action="version", version=f"tahrix-lab {__version__}")
    parser.add_argument(
        "--db", help="the DuckDB file or a postgresql:// URL (default: $TAHRIX_DB or ./tahrix.duckdb)"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log details (raw provider errors) to stderr"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    case_commands.add_commands(sub)
    labels_commands.add_commands(sub)
    serve_commands.add_commands(sub, integration_factory=_case_integration)
    transcript_commands.add_commands(sub)
    notebook_commands.add_commands(sub)
    mcp_commands.add_commands(sub)
    db_commands.add_commands(sub)
    return parser


def _case_integration(transcripts: TranscriptStore) -> Any:
    """The case domain joined to the job service, imported when ``serve`` runs."""
    from tahrix_lab.app.case_service import case_integration

    return case_integration(transcripts)


def log_path() -> Path:
    """Where details (tracebacks, raw provider errors) go without ``-v``: ``$TAHRIX_LOG``,
    else ``$XDG_STATE_HOME/tahrix/tahrix.log`` (``~/.local/state/tahrix/tahrix.log``)."""
    if os.environ.get("TAHRIX_LOG"):
        return Path(os.environ["TAHRIX_LOG"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tahrix" / "tahrix.log"


class _OneLine(logging.Formatter):
    """Without ``-v`` stderr gets one calm line per error; warnings and tracebacks go to the log."""

    def __init__(self, log: Path) -> None:
        super().__init__("tahrix: %(message)s")
        self.log = log

    def format(self, record: logging.LogRecord) -> str:
        from tahrix_lab.flow.textsafe import safe

        message = safe(record.getMessage().splitlines()[0] if record.getMessage() else "", multiline=False)
        return f"tahrix: {message[:300]}" + (f" (details in {self.log})" if record.exc_info else "")


def _setup_logging(verbose: bool) -> Path:
    log = log_path()
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_tahrix", False)]:  # main() run again
        root.removeHandler(old)
        old.close()
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    stderr = logging.StreamHandler(sys.stderr)
    stderr._tahrix = True  # type: ignore[attr-defined]
    if verbose:
        stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(stderr)
        return log
    stderr.setFormatter(_OneLine(log))
    stderr.setLevel(logging.ERROR)  # warnings (retries, unknown prices) only in the log
    root.addHandler(stderr)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        # Created 0600 whatever the umask: the log can quote case data and errors.
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        to_file = logging.FileHandler(log, delay=True, encoding="utf-8")
    except OSError:
        return log
    to_file.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    to_file._tahrix = True  # type: ignore[attr-defined]
    root.addHandler(to_file)
    return log


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    log = _setup_logging(args.verbose)
    if args.db:
        os.environ["TAHRIX_DB"] = args.db
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from tahrix_lab.agent.errors import TahrixError
    from tahrix_lab.flow.textsafe import safe

    try:
        return int(args.func(args) or 0)
    except TahrixError as exc:
        print(f"tahrix: {safe(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tahrix case flags | head`: the reader left, so stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # as the Python docs advise
        return 1
    except Exception as exc:
        if args.verbose:
            raise
        _log_traceback(log, exc)
        first = safe(str(exc).splitlines()[0] if str(exc) else "", multiline=False)[:200]
        print(
            f"tahrix: something went wrong ({type(exc).__name__}: {first}). "
            f"The details are in {log}; run with -v to see them here.",
            file=sys.stderr,
        )
        return 1


def _log_traceback(log: Path, exc: BaseException) -> None:
    import traceback

    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"{datetime.now(UTC).isoformat()} {os.getpid()} tahrix {' '.join(sys.argv[1:])}\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
