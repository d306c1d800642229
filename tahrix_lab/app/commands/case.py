"""`tahrix` commands contributed by tahrix_lab.case: ``demo`` and ``case …``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tahrix_lab.app.commands.report import add_report_command


def add_commands(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the offline demo investigation of the sample case")
    p.set_defaults(func=_demo)

    case = sub.add_parser("case", help="case data: load, export, generate, list, detect")
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
    load.set_defaults(func=_load)
    export = cs.add_parser("export", help="write a case back as a case folder")
    export.add_argument("case_id")
    export.add_argument("dir")
    export.set_defaults(func=_export)
    gen = cs.add_parser("generate", help="generate the synthetic sample case (deterministic per seed)")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--out", required=True)
    gen.set_defaults(func=_generate)
    ls = cs.add_parser("list", help="list the cases in the database")
    ls.set_defaults(func=_list)
    det = cs.add_parser("detect", help="run the anomaly detectors on a case")
    det.add_argument("case_id")
    det.add_argument("--only", nargs="*", help="detector names (default: all)")
    det.set_defaults(func=_detect)
    add_report_command(cs)
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
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.table())
    return 0


def _export(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        print(f"Wrote {ws.export_case(args.case_id, args.dir)}")
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
        result = ws.run_detectors(args.case_id, args.only)
        for name, info in result["by_detector"].items():
            print(f"{name}: {info['flags']} flags ({info['seconds']} s)")
    return 0
