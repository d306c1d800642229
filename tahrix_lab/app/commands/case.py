"""`tahrix` commands contributed by tahrix_lab.case: ``demo`` and ``case …``.

A command that takes a case works on the only loaded case when none is named; with
several it names them and asks (exit code 1, like every calm error)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tahrix_lab.app.commands.case_access import add_access_commands, operator
from tahrix_lab.app.commands.output import new_console
from tahrix_lab.app.commands.report import add_report_command

if TYPE_CHECKING:
    from tahrix_lab.case.workspace import Workspace

# case.schema.SEVERITIES, spelt out: importing the case package at parse time would slow --help
SEVERITIES = ("info", "low", "medium", "high", "critical")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the offline demo investigation of the sample case")
    p.set_defaults(func=_demo)

    case = sub.add_parser("case", help="case data: load, export, generate, list, detect, flags, trace")
    cs = case.add_subparsers(dest="case_command", metavar="ACTION")
    load = cs.add_parser(
        "load",
        help="load a case folder, or export files (Etherscan family, ethereum-etl), recognised by header",
    )
    load.add_argument(
        "path", nargs="+", help="a case folder, export CSV files, or a folder of them (give --case-id)"
    )
    load.add_argument("--case-id", help="the case the exports are loaded into")
    load.add_argument(
        "--chain",
        default=None,
        help="chain of the exports (ethereum, bsc, polygon, arbitrum, …; aliases such as eth or matic work); "
        "default: from the export's native column, else ethereum",
    )
    load.add_argument("--token", help="the token contract of an Etherscan token-page export")
    load.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    load.add_argument(
        "--force", action="store_true", help="merge files again even when their content was loaded before"
    )
    load.add_argument("--owner", default=os.environ.get("TAHRIX_USER"),
                      help="grant this user the case as owner (docs/security.md; default: $TAHRIX_USER)")  # fmt: skip
    load.set_defaults(func=_load)
    op = cs.add_parser(
        "open", help="rebuild a case's evidence here from its manifest in the record (--verify: check a copy)"
    )
    op.add_argument(
        "case_id", nargs="?", metavar="CASE", help="default: every case the record has a manifest of"
    )
    op.add_argument(
        "--files", metavar="DIR", help="where the case's files are, when not at the paths it was loaded from"
    )
    op.add_argument(
        "--verify", action="store_true", help="compare the copy here with the manifest; change nothing"
    )
    op.add_argument("--json", action="store_true", help="print the results as JSON")
    op.set_defaults(func=_open)
    export = cs.add_parser("export", help="write a case back as a case folder: export [CASE] DIR")
    export.add_argument("where", nargs="+", metavar="[CASE] DIR")
    export.set_defaults(func=_export)
    gen = cs.add_parser("generate", help="generate the synthetic sample case (deterministic per seed)")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--out", required=True)
    gen.set_defaults(func=_generate)
    ls = cs.add_parser("list", help="list the cases in the database")
    ls.set_defaults(func=_list)
    det = cs.add_parser("detect", help="run the anomaly detectors on a case, then show its triage")
    det.add_argument("case_id", nargs="?", metavar="CASE", help="default: the only loaded case")
    det.add_argument("--only", nargs="*", help="detector names (default: all)")
    det.set_defaults(func=_detect)
    flags = cs.add_parser("flags", help="the case's flags rolled up (triage), or every raw flag")
    flags.add_argument("case_id", nargs="?", metavar="CASE", help="default: the only loaded case")
    flags.add_argument("--raw", action="store_true", help="list the raw flags instead of the triage rows")
    flags.add_argument("--min-severity", choices=SEVERITIES, help="leave out weaker rows or flags")
    flags.add_argument("--limit", type=int, default=1000, help="raw flags listed at most (default 1000)")
    flags.add_argument("--json", action="store_true", help="print JSON (triage's rows, or the raw flags)")
    flags.set_defaults(func=_flags)
    trace = cs.add_parser("trace", help="trace the funds: where they ended, by category, native and USD")
    trace.add_argument("case_id", nargs="?", metavar="CASE", help="default: the only loaded case")
    trace.add_argument(
        "--from", dest="start", metavar="ADDRESS", action="append",
        help="start here (repeat for several) instead of the case's perpetrator and suspect addresses",
    )  # fmt: skip
    trace.add_argument("--chain", help="the chain of --from addresses when several chains have them")
    trace.add_argument("--json", action="store_true", help="print the trace as JSON, endpoints with amounts")
    trace.set_defaults(func=_trace)
    add_report_command(cs)
    add_access_commands(cs)
    case.set_defaults(func=lambda a: (case.print_help(), 2)[1])


def _demo(args: argparse.Namespace) -> int:
    from tahrix_lab.app.demo import run_demo

    run_demo()
    return 0


def _load(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import UserFacingError
    from tahrix_lab.case.workspace import Workspace

    paths = [Path(p) for p in args.path]
    with Workspace() as ws:
        if len(paths) == 1:
            if not (paths[0].is_dir() and (paths[0] / "case.json").exists()) and not args.case_id:
                raise UserFacingError("Loading exports needs --case-id (the case they belong to).")
            report = ws.load_path(
                paths[0], case_id=args.case_id, chain=args.chain, token=args.token, force=args.force
            )
        else:
            if not args.case_id:
                raise UserFacingError("Loading exports needs --case-id (the case they belong to).")
            report = ws.load_files(args.case_id, paths, chain=args.chain, token=args.token, force=args.force)
        if args.owner:  # its loader may open it on the service page and over MCP
            ws.grant_case(report.case_id, args.owner, "owner", by=operator())
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.table())
    return 0


def _open(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        cases = [args.case_id] if args.case_id else ws.store.manifest_cases()
        if args.verify and not args.case_id:  # every case with a copy here
            cases = [c for c in cases if ws.cases.case_exists(c)]
        results = [ws.open_case(c, files=args.files, verify=args.verify) for c in cases]
    if args.json:
        _print_json(results)
    elif not cases:
        print("No case to open: the record has no case manifests (load a case: tahrix case load).")
    for r in [] if args.json else results:
        print(
            f"{r['case_id']}: {r['status']} ({r['steps']} steps in its manifest, {r['replayed']} replayed here)"
        )
        for d in r["differences"]:
            print(f"    {d}")
    return 1 if any(r["status"] == "differs" for r in results) else 0


def pick_case(ws: Workspace, given: str | None) -> str:
    """The case named, else the only one loaded; several or none is a calm error naming what to do."""
    from tahrix_lab.agent.errors import UserFacingError

    if given:
        ws.require_case(given)
        return given
    cases = [c["case_id"] for c in ws.list_cases()]
    if len(cases) == 1:
        return str(cases[0])
    if not cases:
        raise UserFacingError(
            "No case is loaded: load one with `tahrix case load FOLDER` "
            "(or make the sample with `tahrix case generate --out FOLDER`)."
        )
    raise UserFacingError(f"Several cases are loaded ({', '.join(cases)}); name one, e.g. {cases[0]}.")


def _export(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import UserFacingError
    from tahrix_lab.case.workspace import Workspace

    if len(args.where) > 2:
        raise UserFacingError("case export takes [CASE] DIR: a case id and a folder, or a folder alone.")
    *given, folder = args.where
    with Workspace() as ws:
        print(f"Wrote {ws.export_case(pick_case(ws, given[0] if given else None), folder)}")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from tahrix_lab.case.generator import generate_case

    out = generate_case(args.seed, args.out)
    sizes = json.loads((out / "ground_truth.json").read_text())["sizes"]
    print(f"Wrote {out} (seed {args.seed}): " + ", ".join(f"{k} {v}" for k, v in sizes.items()))
    return 0


def _list(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        for c in ws.list_cases():
            print(f"{c['case_id']}\t{c['status']}\t{c['title']}")
    return 0


def _detect(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        case_id = pick_case(ws, args.case_id)
        result = ws.run_detectors(case_id, args.only)
        for name, info in result["by_detector"].items():
            print(f"{name}: {info['flags']} flags ({info['seconds']} s)")
        print()
        _print_triage(ws, case_id, None)
    print(f"\nNext: tahrix case trace {case_id}   (where the funds went; `tahrix case flags {case_id} --raw` "
          "lists every flag)")  # fmt: skip
    return 0


def _print_json(value: Any) -> None:
    """ASCII only, so no stored control character reaches a terminal; exact decimals as strings."""
    print(json.dumps(value, ensure_ascii=True, allow_nan=False, default=str, indent=1))


def _print_triage(ws: Workspace, case_id: str, min_severity: str | None) -> None:
    from tahrix_lab.app.commands.case_tables import triage_table
    from tahrix_lab.case.readout import triage_usd

    triage = ws.triage(case_id, min_severity=min_severity)
    new_console().print(triage_table(triage, triage_usd(ws.cases, case_id, triage["rows"])))


def _flags(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        case_id = pick_case(ws, args.case_id)
        if not args.raw:
            if args.json:
                _print_json(ws.triage(case_id, min_severity=args.min_severity))
            else:
                _print_triage(ws, case_id, args.min_severity)
            return 0
        from tahrix_lab.app.commands.case_tables import raw_table
        from tahrix_lab.case.readout import flag_usd

        flags = ws.flags(case_id, min_severity=args.min_severity, limit=args.limit)
        if args.json:
            _print_json(flags)
        else:
            stated = {f["flag_id"]: flag_usd(f["evidence"] or {}) for f in flags}
            new_console().print(raw_table(case_id, flags, stated))
    return 0


def _trace(args: argparse.Namespace) -> int:
    from tahrix_lab.app.commands.case_tables import trace_table
    from tahrix_lab.case.readout import endpoint_amounts
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        case_id = pick_case(ws, args.case_id)
        if args.start:
            result = ws.trace(args.start, case_id=case_id, chain=args.chain)
        else:
            result = ws.trace(case_id)
        received = endpoint_amounts(ws.cases, case_id, result)
    if args.json:
        for endpoints in result["endpoints"].values():
            for e in endpoints:
                e["received"] = received.get(f"{e['chain']}:{e['address']}", [])
        _print_json(result)
        return 0
    new_console().print(trace_table(result, received))
    return 0
