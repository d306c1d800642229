"""Case manifests (issue 26 item 2): what recording a load's manifest costs, and how long
another host takes to rebuild the case from it and to verify a copy.

    .venv/bin/python bench/bench_case_open.py                      # 1,000,000 transfers
    .venv/bin/python bench/bench_case_open.py --transfers 100000   # quick

The sample case padded to the requested transfers (``bench_case_scale.scale_folder``) is
loaded on host A twice, into fresh files: once without the manifest (``manifest=False``,
the load as before), once with it (the files' SHA-256, the evidence's fingerprint, one
record row), then the detectors run (a second step). Host B, with its own evidence file
and A's record, rebuilds the case from the manifest (checks every file's SHA-256, replays
the load and the detectors, compares the fingerprint after each) and then verifies it.
Prints each figure; asserts nothing but that B's evidence equals A's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_case_scale import scale_folder

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.case.generator import generate_case
from tahrix_lab.case.loaders import load_case_folder
from tahrix_lab.case.loaders.manifest import fingerprint, sha256_file
from tahrix_lab.case.workspace import Workspace

CASE = "CASE-001"


def timed(label: str, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    print(f"{label:52s} {time.perf_counter() - t0:7.2f} s")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--transfers", type=int, default=int(os.environ.get("TAHRIX_BENCH_TRANSFERS", "1000000"))
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "case"
        generate_case(7, folder)
        scale_folder(folder, args.transfers)
        size = sum(f.stat().st_size for f in folder.iterdir())
        print(f"case folder: {args.transfers:,} transfers, {size / 1e6:,.0f} MB of files; load average "
              f"{os.getloadavg()[0]:.1f}")  # fmt: skip

        with Workspace(Path(tmp) / "plain.duckdb") as ws:
            timed("load without the manifest (as before)", load_case_folder, ws.cases, folder, manifest=False)
        with Workspace(Path(tmp) / "host-a.duckdb") as a:
            timed("load with the manifest", a.load_case_folder, folder)
            timed("    of which: SHA-256 of the files", lambda: [sha256_file(f) for f in folder.iterdir()])
            fp = timed("    of which: the evidence's fingerprint", fingerprint, a.cases, CASE)
            print(f"    ({fp['transfers']['rows']:,} transfers, {fp['transactions']['rows']:,} transactions)")
            timed("detectors (recorded as a second step)", a.run_detectors, CASE)
            fp_a = fingerprint(a.cases, CASE)
            flags = fp_a["anomaly_flags"]["rows"]

        record = TranscriptStore(Path(tmp) / "host-a.duckdb")
        with Workspace(Path(tmp) / "host-b.duckdb", record=record) as b:
            r = timed("open on host B: rebuild from the manifest", b.open_case, CASE)
            v = timed("verify host B's copy", b.open_case, CASE, verify=True)
            same = fingerprint(b.cases, CASE) == fp_a
        print(f"host B: {r['status']}, {r['replayed']} steps replayed, {flags:,} flags; verify: {v['status']}; "
              f"same fingerprint as A: {same}")  # fmt: skip
        if not same:
            raise SystemExit("host B's evidence differs from A's")


if __name__ == "__main__":
    main()
