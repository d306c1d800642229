"""`tahrix` commands on stored transcripts (tahrix_lab.lab): sessions, show, replay, diff,
costs, export and import. ``tahrix lab`` is notebook.py's."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the handlers import what they use: `tahrix --help` loads none of it
    from tahrix_lab.agent.store import TranscriptStore


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

    p = sub.add_parser("costs", help="calls, tokens and USD grouped by model, day, user…")
    p.add_argument(
        "--by",
        default="model,day",
        help="comma-separated: model,backend,user,team,purpose,case,session,hour,day,week,month",
    )
    p.add_argument("--since", type=_date, help="YYYY-MM-DD (UTC)")
    p.add_argument("--until", type=_date, help="YYYY-MM-DD (UTC), exclusive")
    p.add_argument("--user")
    p.add_argument("--team", help="only this team's sessions (a session's team is $TAHRIX_TEAM when made)")
    p.add_argument("--case", help="only the sessions linked to this case")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument("--json", action="store_true", help="one JSON object per line, for scripts")
    p.set_defaults(func=_costs)

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


# -- helpers -------------------------------------------------------------------------------


def _date(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date like 2026-01-31") from None


def _store() -> TranscriptStore:
    from tahrix_lab.agent.store import TranscriptStore

    return TranscriptStore()


def _console() -> Any:
    from tahrix_lab.flow.terminal import terminal_console

    return terminal_console()


def _costs_frame(store: TranscriptStore, **kwargs: Any) -> Any:
    """``costs`` in one burst on the file: genai-prices' data is loaded before the lease,
    so pricing a model seen for the first time does not hold the file that long."""
    from genai_prices import data_snapshot

    from tahrix_lab.lab.costs import costs

    data_snapshot.get_snapshot()
    with store.lease():
        return costs(store, **kwargs)


def _session_costs(store: TranscriptStore, ids: Sequence[str]) -> dict[str, tuple[int, float | None]]:
    """Calls and USD of the listed sessions, each call priced by the one pricer at its time
    (as ``show`` prices them). Unknown prices are left out of the sum, as in ``tahrix costs``;
    a session with no known price has cost ``None``. No DataFrame: pandas alone would
    take ``tahrix sessions`` past a second."""
    from tahrix_lab.agent.pricing import DEFAULT_PRICER
    from tahrix_lab.agent.transcript import Usage

    if not ids:
        return {}
    # one read; the pricing runs after it, with the file let go
    rows = store.usage_rows(session_ids=list(ids))
    per: dict[str, tuple[int, float | None]] = {}
    for r in rows:
        sid = r["session_id"]
        calls, total = per.get(sid, (0, None))
        tokens = Usage(r["input_tokens"], r["output_tokens"], r["cache_read_tokens"], r["cache_write_tokens"],
                       r["reasoning_tokens"])  # fmt: skip
        cost = DEFAULT_PRICER.price(r["model_id"], tokens, backend=r["backend"], at=r["created_at"])
        per[sid] = (calls + 1, total if cost is None else (total or 0.0) + cost)
    return per


def _print_json(rows: Sequence[dict[str, Any]]) -> None:
    """JSON Lines on stdout; ASCII only, so no stored control character reaches a terminal."""
    for row in rows:
        print(json.dumps(row, ensure_ascii=True, default=_json_default, allow_nan=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars from DataFrames
        return value.item()
    return str(value)


def _plain(value: Any) -> Any:
    """A DataFrame cell as JSON: NaN and NaT are unknown (null), never 0."""
    if value is None:
        return None
    try:
        if value != value:  # NaN
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "to_pydatetime"):
        return value.to_pydatetime().isoformat()
    return value.item() if hasattr(value, "item") else value


def resolve_id(store: TranscriptStore, given: str) -> str:
    """A full session id from an id or a unique prefix of one."""
    from tahrix_lab.agent.errors import ConfigurationError

    ids = store.session_ids_starting(given, limit=3)
    if not ids:
        raise ConfigurationError(f"No session id starts with {given!r} in {store.path!r}.")
    if len(ids) > 1 and given not in ids:
        raise ConfigurationError(f"{given!r} matches several sessions; give more of the id.")
    return ids[0] if len(ids) == 1 else given


def _cost(value: Any) -> str:
    return "unknown" if value is None or value != value else f"${value:.4f}"  # NaN is unknown too


# -- commands ------------------------------------------------------------------------------


def _sessions(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tahrix_lab.flow.textsafe import safe, shown

    store = _store()
    sessions = store.list_sessions(user=args.user, purpose=args.purpose, limit=args.limit)
    per = _session_costs(store, [s.id for s in sessions])
    if args.json:
        _print_json([
            {"id": s.id, "created_at": s.created_at.isoformat(), "user": s.user, "purpose": s.purpose,
             "title": s.title, "status": s.status, "calls": per.get(s.id, (0, None))[0],
             "cost_usd": _plain(per.get(s.id, (0, None))[1]), "replay_of": s.replay_of}
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
            _cost(cost) if calls else "–",
            shown((s.replay_of or "")[:8], multiline=False),
        )
    _console().print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.pricing import DEFAULT_PRICER
    from tahrix_lab.flow.terminal import FlowPrinter, format_cost, message_events
    from tahrix_lab.flow.textsafe import shown

    store = _store()
    with store.lease():
        sid = resolve_id(store, args.id)
        session = store.get_session(sid)
        messages = store.load_messages(sid)
    console = _console()

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

    store = _store()
    ids = [resolve_id(store, i) for i in args.ids]
    console = _console()
    if args.estimate:
        for sid in ids:
            est = estimate_replay_cost(sid, args.model, store=store, backend=args.backend)
            console.print(
                f"{shown(sid)}: {est.calls} calls, {est.input_tokens} in / {est.output_tokens} out tokens → "
                f"{_cost(est.cost_usd)} on {shown(args.model)} (originally {_cost(est.original_cost_usd)})"
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

    store = _store()
    d = diff(resolve_id(store, args.a), resolve_id(store, args.b), store=store)
    console = _console()
    console.print(d.to_rich())
    if args.tools:
        for turn, c in d.tool_changes():
            console.print(f"turn {turn}: {c.op} {shown(describe(c))}")
            # what the tool answered differently: each changed result path, A → B
            for (path, was), (_, now) in zip(result_values(c, "a"), result_values(c, "b"), strict=True):
                console.print(f"    {shown(path)}: {shown(was)} → {shown(now)}")
    return 0


def _costs(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tahrix_lab.flow.textsafe import safe, shown

    store = _store()
    df = _costs_frame(
        store, by=args.by, since=args.since, until=args.until, user=args.user, team=args.team, case=args.case
    )
    if args.json:
        _print_json([{str(k): _plain(v) for k, v in rec.items()} for rec in df.to_dict("records")])
        return 0
    if args.csv:
        text = df.map(lambda v: safe(v, multiline=False) if isinstance(v, str) else v)
        text.to_csv(sys.stdout, index=False)
        return 0
    if df.empty:
        print("No model calls in this range.")
        return 0
    table = Table(title=f"Costs by {shown(args.by)}")
    frame = df.drop(columns=["uncached_cost_usd"])  # cost_usd + saved_usd; the CSV keeps it
    for col in frame.columns:
        table.add_column(str(col), justify="right" if frame[col].dtype.kind in "iuf" else "left")
    for rec in frame.itertuples(index=False):
        cells = []
        for col, value in zip(frame.columns, rec, strict=True):
            if col in ("cost_usd", "saved_usd"):
                cells.append(_cost(value))
            elif isinstance(value, datetime):
                cells.append(
                    value.strftime("%Y-%m-%d %H:%M") if value.hour or value.minute else f"{value:%Y-%m-%d}"
                )
            else:
                cells.append("" if value is None else shown(value, multiline=False))
        table.add_row(*cells)
    total = df["cost_usd"].sum(min_count=1)
    saved = df["saved_usd"].sum(min_count=1)
    unknown = int(df["unknown_cost_calls"].sum())
    caching = ""
    if saved == saved and saved:  # NaN: no known price; 0: nothing was cached
        what = f"saved {_cost(saved)}" if saved > 0 else f"cost {_cost(-saved)} more (cache writes)"
        caching = f"; prompt caching {what}, uncached {_cost(total + saved)}"
    table.caption = f"total {_cost(total)}{caching}" + (
        f"; {unknown} calls with unknown price" if unknown else ""
    )
    _console().print(table)
    return 0


def _export(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import ConfigurationError
    from tahrix_lab.lab.transfer import export_sessions

    if args.case and args.ids:
        raise ConfigurationError("Give session ids or --case, not both.")
    store = _store()
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

    store = _store()
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
