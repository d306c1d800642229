"""`tahrix labels …`: the workspace's label library (load, find, sources)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_commands(sub: Any) -> None:
    labels = sub.add_parser("labels", help="the label library shared by cases: load, find, sources")
    ls = labels.add_subparsers(dest="labels_command", metavar="ACTION")
    load = ls.add_parser(
        "load",
        help="load label files (eth-labels JSON/CSV, Etherscan export, OFAC lists, OFAC SDN XML/CSV, own CSV), "
        "recognised by content; loading again changes nothing",
    )
    load.add_argument("files", nargs="+")
    load.add_argument(
        "--source", help="the list's name (default per format: eth-labels, etherscan, ofac-sdn, own)"
    )
    load.add_argument("--as-of", dest="as_of", help="the list's version or date, when the file does not say")
    load.add_argument("--chain", help="the chain of every address in the files (default: from the file)")
    load.add_argument("--asset", help="an OFAC list's asset (default: from the file name, e.g. _ETH)")
    load.add_argument("--by", dest="added_by", help="who loads them (kept on each label)")
    load.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    load.set_defaults(func=_load)
    find = ls.add_parser("find", help="every label of an address, with its source, best first")
    find.add_argument("address")
    find.add_argument("--chain")
    find.add_argument("--json", action="store_true")
    find.set_defaults(func=_find)
    src = ls.add_parser("sources", help="the sources in the library: versions, labels, files")
    src.add_argument("--json", action="store_true")
    src.set_defaults(func=_sources)
    labels.set_defaults(func=lambda a: (labels.print_help(), 2)[1])


def _load(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        report = ws.load_labels(args.files, source=args.source, as_of=args.as_of, chain=args.chain,
                                asset=args.asset, added_by=args.added_by)  # fmt: skip
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.table())
    return 0


def _find(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        found = ws.find_labels(args.address, args.chain)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    if not found:
        print(f"No label for {args.address}.")
        return 1
    for entry in found:
        conflict = "  (categories conflict: each source is shown)" if entry["conflict"] else ""
        print(f"{entry['chain']}:{entry['address']}{conflict}")
        for lab in entry["labels"]:
            where = lab["source"] + (f" {lab['source_version']}" if lab.get("source_version") else "")
            if lab.get("from_case"):
                where += f" (case {lab['from_case']})"
            window = ""
            if lab.get("valid_from") or lab.get("valid_to"):
                window = f"  valid {lab.get('valid_from') or '…'} to {lab.get('valid_to') or '…'}"
            print(f"  {lab['category'] or '-':<20} {lab['label'] or '-':<40} {where}  "
                  f"[{lab.get('confidence') or '-'}]{window}")  # fmt: skip
    return 0


def _sources(args: argparse.Namespace) -> int:
    from tahrix_lab.case.workspace import Workspace

    with Workspace() as ws:
        rows = ws.label_sources()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("The label library is empty (tahrix labels load FILE…).")
    for r in rows:
        print(f"{r['source']:<16} {r['source_version'] or '-':<12} {r['labels']:>8} labels {r['addresses']:>8} addresses  "
              f"loaded {r['first_loaded']}  files: {', '.join(r['files'] or [])}")  # fmt: skip
    return 0
