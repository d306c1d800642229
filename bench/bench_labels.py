"""The label library at the size of a large commercial export.

Writes N labels (default 1,000,000) as a plain label CSV (address, chain, name, category,
source; a tenth of them sanctioned), loads them with ``load_labels`` (target: <= 20 s),
loads them again (idempotent: all unchanged), then builds a case of M transfers (default
1,000,000) straight into the tables, one in fifty to a listed address, and screens it:
the ``sanctions_exposure`` detector over the ``case_labels`` view (target: <= 5 s).

    python bench/bench_labels.py
    BENCH_LABELS_N=200000 BENCH_LABELS_TRANSFERS=200000 python bench/bench_labels.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tahrix_lab.agent.storage.duck import connect  # noqa: E402
from tahrix_lab.case.db import CaseDB  # noqa: E402
from tahrix_lab.case.detectors import run_detectors  # noqa: E402
from tahrix_lab.case.labels import load_labels  # noqa: E402

N = int(os.environ.get("BENCH_LABELS_N", 1_000_000))
M = int(os.environ.get("BENCH_LABELS_TRANSFERS", 1_000_000))
CATEGORIES = [
    "exchange",
    "defi_dex",
    "mixer",
    "sanctioned",
    "otc",
    "phish-hack",
    "gambling",
    "bridge",
    "scam",
    "token",
]


def write_labels(path: Path) -> None:
    with path.open("w") as fh:
        fh.write("address,chain,name,category,source\n")
        for i in range(N):
            cat = CATEGORIES[i % len(CATEGORIES)]
            fh.write(f"0x{i:040X},ethereum,Entity {i // 7}: wallet {i},{cat},vendor-x\n")


def build_case(db: CaseDB, case_id: str) -> None:
    # senders 0..M/4 (unlabelled: offset past the labels), receivers among the labels: 1 in 50 transfers
    # to a sanctioned address (category index 3), the rest to exchanges, DEXs and mixers (indexes 0-2)
    with db.write() as cur:
        cur.execute("INSERT INTO cases (case_id, title) VALUES (?, 'bench')", [case_id])
        cur.execute(
            f"""INSERT INTO transfers (case_id, transfer_id, chain, tx_hash, block_time, kind, from_address,
                  to_address, asset_key, amount_raw, amount, usd_value, status)
            SELECT $case, 'ethereum:0x' || lpad(printf('%x', i), 64, '0') || ':native:0', 'ethereum',
                   '0x' || lpad(printf('%x', i), 64, '0'), TIMESTAMP '2024-03-01' + to_seconds(i), 'native',
                   '0x' || lpad(printf('%x', {N} + i % ({M} // 4 + 1)), 40, '0'),
                   '0x' || lpad(printf('%x', CASE WHEN i % 50 = 0 THEN (i * 10 + 3) % {N} ELSE (i * 10 + i % 3) % {N} END), 40, '0'),
                   'ethereum:native', '1000000000000000000', 1, 3000.0, TRUE
            FROM range({M}) t(i)""",
            {"case": case_id},
        )
        db.refresh_addresses(cur, case_id)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "labels.csv"
        t = time.perf_counter()
        write_labels(path)
        print(f"wrote {N:,} labels in {time.perf_counter() - t:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        db = CaseDB(connect(str(Path(tmp) / "bench.duckdb")))
        t = time.perf_counter()
        report = load_labels(db, [path])
        load_s = time.perf_counter() - t
        print(f"load {N:,} labels: {load_s:.1f} s (target <= 20 s) new={report.total('new'):,} "
              f"unknown categories={report.unknown_categories}")  # fmt: skip
        t = time.perf_counter()
        again = load_labels(db, [path])
        print(f"reload (no change): {time.perf_counter() - t:.1f} s unchanged={again.total('unchanged'):,} "
              f"new={again.total('new')} updated={again.total('updated')}")  # fmt: skip
        t = time.perf_counter()
        build_case(db, "BENCH")
        print(f"built a case of {M:,} transfers in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        seen = db.scalar("SELECT count(*) FROM case_labels WHERE case_id = 'BENCH'")
        print(f"case_labels for the case's addresses: {seen:,} in {time.perf_counter() - t:.2f} s")
        t = time.perf_counter()
        result = run_detectors(db, "BENCH", ["sanctions_exposure"])
        screen_s = time.perf_counter() - t
        flags = result["by_detector"]["sanctions_exposure"]["flags"]
        print(f"screen {M:,} transfers against {N:,} labels (sanctions_exposure): {screen_s:.1f} s "
              f"(target <= 5 s), {flags:,} flags")  # fmt: skip


if __name__ == "__main__":
    main()
