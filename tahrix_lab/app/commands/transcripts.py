"""`tahrix` commands on stored transcripts (tahrix_lab.lab): sessions, show, replay, diff,
export and import; ``costs`` is costs.py's, ``tahrix lab`` notebook.py's."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Literal

from tahrix_lab.app.commands import costs as costs_commands
from tahrix_lab.app.commands.costs import session_costs
from tahrix_lab.app.commands.output import new_console, open_store, plain, print_json_lines, resolve_id, usd

if TYPE_CHECKING:  # the handlers import what they use: `tahrix --help` loads none of it
    from tahrix_lab.agent.storage import TranscriptStore


def add_commands(sub: Any) -> None:
    """Add this layer's subcommands to the `tahrix` parser."""
    p = sub.add_parser("sessions", help="list stored sessions, newest first")
    p.add_argument("--user")
    p.add_argument("--purpose")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true", help="one JSON object per line, for scripts")
    p.set_defaults(func=_sessions)

    p = sub.add_parser("show", help="render a stored session's flow in order")
    p.add_argument("id", help="session id (a unique prefix is enough)")
    p.set_defaults(func=_show)

    p = sub.add_parser("replay", help="replay sessions' user turns on another backend/model")
    p.add_argument("ids", nargs="+", metavar="ID", help="session id(s) to replay")
    p.add_argument("--backend", required=True, help="fake, openai, bedrock, or an OpenAI-compatible URL")
    p.add_argument("--model", required=True, help="the target model id")
    p.add_argument(
        "--recorded-tools",
        action="store_true",
        help="answer tool calls from the original transcript instead of running the tools",
    )
    p.add_argument("--estimate", action="store_true", help="only print the expected cost; send nothing")
    p.set_defaults(func=_replay)

    p = sub.add_parser("diff", help="compare two sessions turn by turn")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--tools", action="store_true", help="also list every tool call that differs")
    p.set_defaults(func=_diff)

    costs_commands.add_commands(sub)  # here, so `tahrix --help` lists them in this order

    p = sub.add_parser(
        "export",
        help="write sessions as JSON Lines (the whole workspace with its case rows when no id is given)",
    )
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument(
        "--case", metavar="CASE", help="one case: its sessions, access, annotations and audit entries"
    )
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.set_defaults(func=_export)

    p = sub.add_parser("import", help="read sessions and case rows from JSON Lines")
    p.add_argument("file", help="a .jsonl file, or - for stdin")
    p.add_argument(
        "--skip-existing", action="store_true", help="leave sessions and case rows already stored as they are"
    )
    p.set_defaults(func=_import)


# -- commands ------------------------------------------------------------------------------


def _sessions(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tahrix_lab.flow.textsafe import safe, shown

    store = open_store()
    sessions = store.list_sessions(user=args.user, purpose=args.purpose, limit=args.limit)
    per = session_costs(store, [s.id for s in sessions])
    if args.json:
        print_json_lines([
            {"id": s.id, "created_at": s.created_at.isoformat(), "user": s.user, "purpose": s.purpose,
             "title": s.title, "status": s.status, "calls": per.get(s.id, (0, None))[0],
             "cost_usd": plain(per.get(s.id, (0, None))[1]), "replay_of": s.replay_of}
            for s in sessions
        ])  # fmt: skip
        return 0
    if not sessions:
        print(f"No sessions in {safe(store.path)}.")
        return 0
    table = Table(title=f"Sessions in {shown(store.path)}")
    table.add_column("id", no_wrap=True)
    for col in ("created (UTC)", "user", "purpose", "title", "calls", "cost", "replay of"):
        table.add_column(col, overflow="fold")
    for s in sessions:
        calls, cost = per.get(s.id, (0, None))
        table.add_row(
            shown(s.id, multiline=False),
            s.created_at.strftime("%Y-%m-%d %H:%M"),
            shown(s.user, multiline=False),
            shown(s.purpose, multiline=False),
            shown(s.title or "", multiline=False),
            str(calls),
            usd(cost) if calls else "–",
            shown((s.replay_of or "")[:8], multiline=False),
        )
    new_console().print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.pricing import DEFAULT_PRICER
    from tahrix_lab.flow.terminal import FlowPrinter, format_cost, message_events
    from tahrix_lab.flow.textsafe import shown

    store = open_store()
    with store.lease():
        sid = resolve_id(store, args.id)
        session = store.get_session(sid)
        messages = store.load_messages(sid)
    console = new_console()

    def line(value: Any) -> str:
        return shown(value, multiline=False)

    console.print(
        f"[bold]{line(session.title or session.id)}[/] · {line(session.user)} · {line(session.purpose)} · "
        f"{session.created_at:%Y-%m-%d %H:%M} UTC"
        + (f" · replay of {line(session.replay_of)}" if session.replay_of else "")
    )
    if session.system_prompt:
        console.print(f"[dim]system: {shown(session.system_prompt[:300])}[/]")
    calls = iter([m for m in messages if m.role == "assistant"])
    printer = FlowPrinter(console)
    total: float | None = 0.0
    for event, payload in message_events(messages, store.load_turn_ends(sid)):
        if event == "usage":  # stored calls carry no price: price them at the call's time
            m = next(calls)
            cost = DEFAULT_PRICER.price(m.model_id, m.usage, backend=m.backend, at=m.created_at)
            payload = {**payload, "cost_usd": cost}
            total = None if total is None or cost is None else total + cost
        printer(event, payload)
    console.print(f"\n[dim]{len(messages)} messages · total {format_cost(total)}[/]")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.backends import get_backend
    from tahrix_lab.flow.textsafe import shown
    from tahrix_lab.lab.replay import estimate_replay_cost, replay

    store = open_store()
    ids = [resolve_id(store, i) for i in args.ids]
    console = new_console()
    if args.estimate:
        for sid in ids:
            est = estimate_replay_cost(sid, args.model, store=store, backend=args.backend)
            console.print(
                f"{shown(sid)}: {est.calls} calls, {est.input_tokens} in / {est.output_tokens} out tokens → "
                f"{usd(est.cost_usd)} on {shown(args.model)} (originally {usd(est.original_cost_usd)})"
            )
        return 0
    backend = get_backend(args.backend)
    tools: Literal["live", "recorded"] = "recorded" if args.recorded_tools else "live"
    failed = 0
    if len(ids) == 1:
        from tahrix_lab.flow.terminal import FlowPrinter

        printer = FlowPrinter(console)
        result = replay(
            ids[0], backend=backend, model=args.model, tools=tools, store=store, on_event=printer,
            **_case_tools(store, ids[0], tools),
        )  # fmt: skip
        console.print()
        console.print(shown(result.summary()))
        return 0 if result.ok else 1
    from rich.progress import track

    for sid in track(ids, description="replaying", console=console):
        result = replay(
            sid, backend=backend, model=args.model, tools=tools, store=store, **_case_tools(store, sid, tools)
        )
        failed += not result.ok
        console.print(shown(result.summary()))
    return 1 if failed else 0


def _case_tools(store: TranscriptStore, session_id: str, tools: str) -> dict[str, Any]:
    """For a live replay of a case's session: the case tools and the case context
    (the replay copies the case link, so the tools see the same case and grant)."""
    if tools != "live" or store.case_link(session_id) is None:
        return {}
    from tahrix_lab.app.case_service import workspace_for

    ws = workspace_for(store)
    return {"registry": ws.registry(), "context": ws.context_provider()}


def _diff(args: argparse.Namespace) -> int:
    from tahrix_lab.flow.textsafe import shown
    from tahrix_lab.lab.diff import describe, diff, result_values

    store = open_store()
    d = diff(resolve_id(store, args.a), resolve_id(store, args.b), store=store)
    console = new_console()
    console.print(d.to_rich())
    if args.tools:
        for turn, c in d.tool_changes():
            console.print(f"turn {turn}: {c.op} {shown(describe(c))}")
            # what the tool answered differently: each changed result path, A → B
            for (path, was), (_, now) in zip(result_values(c, "a"), result_values(c, "b"), strict=True):
                console.print(f"    {shown(path)}: {shown(was)} → {shown(now)}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import ConfigurationError
    from tahrix_lab.lab.transfer import export_sessions

    if args.case and args.ids:
        raise ConfigurationError("Give session ids or --case, not both.")
    store = open_store()
    ids = [resolve_id(store, i) for i in args.ids] or None
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            n = export_sessions(store, fh, ids, case=args.case)
        print(f"Exported {n} sessions to {args.output}.", file=sys.stderr)
    else:
        export_sessions(store, sys.stdout, ids, case=args.case)
    return 0


def _import(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import ConfigurationError
    from tahrix_lab.flow.textsafe import safe
    from tahrix_lab.lab.transfer import import_sessions

    store = open_store()
    on_conflict: Literal["error", "skip"] = "skip" if args.skip_existing else "error"
    if args.file == "-":
        report = import_sessions(store, sys.stdin, on_conflict, source="stdin")
    else:
        try:
            fh = open(args.file, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ConfigurationError(f"Cannot read {args.file!r}: {exc.strerror}.") from None
        with fh:
            report = import_sessions(store, fh, on_conflict, source=repr(args.file))
    print(
        f"Imported {len(report.imported)} sessions into {safe(store.path)}"
        + (
            f" with {report.case_rows} case rows (links, what sessions saw, access, annotations, audit entries)"
            if report.case_rows
            else ""
        )
        + (f"; skipped {len(report.skipped)} sessions already there" if report.skipped else "")
        + (
            f"; skipped {report.case_rows_skipped} case rows already there"
            if report.case_rows_skipped
            else ""
        )
        + "."
    )
    if report.missing_cases:
        print(
            f"Note: the case(s) {', '.join(safe(c) for c in report.missing_cases)} are not loaded in this "
            "workspace; the sessions keep their link and appear once the case is loaded. To see its annotations "
            "over the evidence, load the case, then import this file again with --skip-existing.",
            file=sys.stderr,
        )
    return 0


__all__ = ["add_commands", "resolve_id"]
