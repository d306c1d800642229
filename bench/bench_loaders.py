"""Export loader benchmark: ERC-20 transfers spread across 50 overlapping wallet exports.

    .venv/bin/python bench/bench_loaders.py                       # 50,000 transfers (quick, for make bench)
    .venv/bin/python bench/bench_loaders.py --transfers 1000000   # the target scale

Every transfer moves USDT between two of 50 wallets, so it is in both wallets'
Etherscan ERC-20 exports (each movement in 2 files). The 50 files are loaded
into a fresh DuckDB file in one load (target <= 30 s at 1,000,000), then
loaded again (target <= 10 s, nothing inserted: unchanged files are recognised
by their SHA-256), then loaded again with ``force=True`` (every row identified
and merged again). Prints the times (wall clock, and the process's CPU time, DuckDB's
threads included: on a machine shared with other work the CPU time is the
steadier figure), the rows read, inserted and merged; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import duckdb

from tahrix_lab.agent.storage.duck import connect
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders import load_files

WALLETS = 50
USDT = "0xdac17f958d2ee523a2206206994597c13d831ec7"
HEADER = '"Txhash","Blockno","UnixTimestamp","DateTime (UTC)","From","To","TokenValue","USDValueDayOfTx","ContractAddress","TokenName","TokenSymbol"'


def write_exports(folder: Path, transfers: int) -> list[Path]:
    """One Etherscan ERC-20 export per wallet, written by DuckDB (Python would take longer than the load)."""
    con = duckdb.connect()
    wallet = "'0x' || lpad(printf('%x', {w} + 4096), 40, '0')"
    con.execute(
        f"""CREATE TABLE t AS
        SELECT i, '0x' || lpad(printf('%x', i // 3 + 1), 64, '0') AS tx, i // 3 AS blk,
               i % {WALLETS} AS fw, (i * 7 + 1 + i // {WALLETS}) % {WALLETS} AS tw,
               printf('%.6f', (hash(i) % 100000000) / 1000000.0 + 0.01) AS v
        FROM range({transfers}) r(i)"""
    )
    con.execute(f"UPDATE t SET tw = (tw + 1) % {WALLETS} WHERE tw = fw")
    files = []
    for w in range(WALLETS):
        path = folder / f"export-tokentxns-wallet{w:02d}.csv"
        con.execute(
            f"""COPY (SELECT tx AS "Txhash", 19000000 + blk AS "Blockno", 1710000000 + blk * 12 AS "UnixTimestamp",
                       strftime(make_timestamp((1710000000 + blk * 12) * 1000000), '%Y-%m-%d %H:%M:%S') AS "DateTime (UTC)",
                       {wallet.format(w="fw")} AS "From", {wallet.format(w="tw")} AS "To", v AS "TokenValue",
                       '$' || v AS "USDValueDayOfTx", '{USDT}' AS "ContractAddress", 'Tether USD' AS "TokenName",
                       'USDT' AS "TokenSymbol"
                FROM t WHERE fw = {w} OR tw = {w} ORDER BY i DESC) TO '{path}' (HEADER, FORCE_QUOTE *)"""
        )
        files.append(path)
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--transfers", type=int, default=int(os.environ.get("TAHRIX_BENCH_LOADER_TRANSFERS", 50_000))
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        files = write_exports(folder, args.transfers)
        print(
            f"wrote {len(files)} wallet exports of {args.transfers:,} transfers in {time.perf_counter() - t0:.1f} s"
        )
        db = CaseDB(connect(str(folder / "bench.duckdb")))
        t0, c0 = time.perf_counter(), time.process_time()
        first = load_files(db, "BENCH", files)
        load_s, load_cpu = time.perf_counter() - t0, time.process_time() - c0
        read = sum(f.rows_read for f in first.files)
        inserted = sum(f.inserted for f in first.files)
        merged = sum(f.merged for f in first.files)
        print(
            f"load:   {load_s:6.1f} s (CPU {load_cpu:.1f} s)  rows read {read:,}  inserted {inserted:,}  merged {merged:,}  (target <= 30 s at 1,000,000)"
        )
        t0, c0 = time.perf_counter(), time.process_time()
        again = load_files(db, "BENCH", files)
        reload_s, reload_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"reload: {reload_s:6.1f} s (CPU {reload_cpu:.1f} s)  inserted {sum(f.inserted for f in again.files):,}  files recognised as "
            f"unchanged (SHA-256) {sum(f.format.startswith('unchanged') for f in again.files)}  "
            "(target <= 10 s at 1,000,000, nothing inserted)"
        )
        t0, c0 = time.perf_counter(), time.process_time()
        forced = load_files(db, "BENCH", files, force=True)
        forced_s, forced_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"reload forced through the merge: {forced_s:6.1f} s (CPU {forced_cpu:.1f} s)  inserted {sum(f.inserted for f in forced.files):,}  "
            f"merged {sum(f.merged for f in forced.files):,}"
        )
        stored = db.scalar("SELECT count(*) FROM transfers WHERE case_id = 'BENCH'")
        print(f"transfers in the case: {stored:,} (expected {args.transfers:,})")
        db.connection.close()


if __name__ == "__main__":
    main()
