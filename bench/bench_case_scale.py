"""Case scale benchmark: load a scaled case folder, trace 6 hops, run every detector.

    .venv/bin/python bench/bench_case_scale.py                      # 100,000 transfers (quick)
    .venv/bin/python bench/bench_case_scale.py --transfers 1000000  # the target scale
    TAHRIX_BENCH_TRANSFERS=1000000 .venv/bin/python bench/bench_case_scale.py

The sample case (seed 7) is padded with synthetic background traffic (one
transaction and one USDC transfer per row, among a pool of addresses) up to
the requested number of transfers, written as a case folder, then loaded
into a fresh DuckDB file. Targets at 1,000,000 transfers: trace 6 hops
<= 0.5 s (the first trace of a case also builds the tracer's lookup index,
printed apart), all detectors <= 5 s. Also prints the triage, and the size in
bytes and (estimated) tokens of each tool's answer on the sample case and
at scale. Prints each figure; asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from tahrix_lab.agent.tools import model_facing, run_tool
from tahrix_lab.agent.transcript import Part
from tahrix_lab.case.detectors import run_detectors, triage
from tahrix_lab.case.generator import TRANSFER_COLUMNS, TX_COLUMNS, generate_case
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.tracing import TraceParams, trace_funds
from tahrix_lab.case.workspace import Workspace


def scale_folder(folder: Path, total_transfers: int) -> int:
    """Append background rows so transfers.csv holds ``total_transfers`` rows; return rows added."""
    con = duckdb.connect()
    base = con.execute(
        f"SELECT count(*) FROM read_csv('{folder}/transfers.csv', all_varchar = true)"
    ).fetchone()
    extra = max(0, total_transfers - int(base[0] if base else 0))
    pool = max(1000, extra // 20)
    addr = "'0x' || substr(md5('a' || ({k})::VARCHAR) || md5('b' || ({k})::VARCHAR), 1, 40)"
    frm = addr.format(k=f"(i * 7919) % {pool}")
    to = addr.format(k=f"(i * 104729 + 13) % {pool}")
    tx = "'0x' || md5('t' || i::VARCHAR) || md5('u' || i::VARCHAR)"
    # times scrambled over 80 days so one address's transfers are spread out like real traffic
    t = "strftime(TIMESTAMP '2024-02-10 00:00:00' + to_seconds((i * 2654435761) % (80 * 86400)), '%Y-%m-%d %H:%M:%S')"
    token = con.execute(
        f"SELECT asset_key FROM read_csv('{folder}/assets.csv', all_varchar = true) WHERE symbol = 'USDC'"
    ).fetchone()
    asset = token[0] if token else "ethereum:native"
    amount = "(((i * 37) % 500000) / 100.0 + 1)"
    bg_transfers = f"""
        SELECT 'ethereum:' || {tx} || ':token:0' AS transfer_id, 'ethereum' AS chain, {tx} AS tx_hash, {t} AS block_time,
               'token' AS kind, '0' AS log_index, '' AS trace_address, {frm} AS from_address, {to} AS to_address,
               '{asset}' AS asset_key, CAST(CAST({amount} * 1000000 AS BIGINT) AS VARCHAR) AS amount_raw,
               CAST({amount} AS VARCHAR) AS amount, CAST({amount} AS VARCHAR) AS usd_value, 'true' AS status
        FROM range({extra}) r(i)"""
    bg_txs = f"""
        SELECT 'ethereum' AS chain, {tx} AS tx_hash, CAST(19000000 + i AS VARCHAR) AS block_number, {t} AS block_time,
               '0' AS tx_index, {frm} AS from_address, '{asset.split(":")[1]}' AS to_address, CAST(i // {pool} AS VARCHAR) AS nonce,
               '0' AS value_raw, '0' AS value, '21000000000000' AS fee_raw, '0.000021' AS fee, '0.08' AS fee_usd,
               'true' AS status, '0xa9059cbb' AS method_selector, 'transfer' AS method_name, '' AS memo, 'bench' AS source
        FROM range({extra}) r(i)"""
    for name, cols, extra_sql in (
        ("transfers", TRANSFER_COLUMNS, bg_transfers),
        ("transactions", TX_COLUMNS, bg_txs),
    ):
        select = ", ".join(cols)
        out = folder / f"{name}.scaled.csv"
        con.execute(
            f"COPY (SELECT {select} FROM read_csv('{folder}/{name}.csv', all_varchar = true) UNION ALL "
            f"SELECT {select} FROM ({extra_sql})) TO '{out}' (HEADER, DELIMITER ',')"
        )
        out.replace(folder / f"{name}.csv")
    con.close()
    return extra


def tool_sizes(ws: Workspace, case_id: str, gt: dict[str, Any], label: str) -> None:
    """Bytes and (estimated) tokens of each read tool's answer as the model gets it."""
    session = ws.start_investigation(case_id, user="bench", grant={"may_write": False})
    a = gt["actors"]
    calls = {
        "get_case_overview": {}, "lookup_address": {"address": a["A0"], "counterparties": 50},
        "get_transaction": {"tx_hash": gt["theft_tx_hashes"][0]}, "list_transfers": {"limit": 500},
        "trace_funds (6 hops)": {"max_hops": 6}, "trace_funds (25 hops)": {"max_hops": 25, "min_usd": 0},
        "find_bridge_events": {"limit": 500}, "match_bridge_leg": {"src_tx_hash": gt["theft_tx_hashes"][0]},
        "list_flags (triage)": {"limit": 200}, "list_flags (raw)": {"view": "raw", "limit": 200},
        "screen_exposure": {"addresses": [{"address": a["A0"]}], "max_hops": 2},
        "run_sql": {"query": "SELECT * FROM transfers", "limit": 1000},
    }  # fmt: skip
    print(
        f"tool results on {label} (bytes as sent; tokens ≈ bytes / 4, no tokenizer offline; budget 8,000 B):"
    )
    for name, args in calls.items():
        tool = name.split(" ")[0]
        t0 = time.perf_counter()
        out = run_tool(
            Part.of_tool_use("b", tool, args), ws.context_provider(), registry=CASE_TOOLS, session=session
        )
        ms = (time.perf_counter() - t0) * 1000
        n = len(json.dumps(model_facing(out.result), ensure_ascii=False).encode())
        pages = "paged" if "page" in out.result else "whole"
        print(f"    {name:24s} {n:7,d} B  ≈{n // 4:6,d} tokens  {pages:5s} {out.status:5s} {ms:7.0f} ms")
    whole = ws.trace(case_id, max_hops=25, min_usd=0)
    n = len(json.dumps(whole).encode())
    print(
        f"    {'(whole 25-hop trace)':24s} {n:7,d} B  ≈{n // 4:6,d} tokens  what one answer would be without paging"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--transfers", type=int, default=int(os.environ.get("TAHRIX_BENCH_TRANSFERS", "100000"))
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "case"
        generate_case(7, folder)
        gt = json.loads((folder / "ground_truth.json").read_text())
        with Workspace(Path(tmp) / "sample.duckdb") as ws:
            ws.load_sample_case()
            tool_sizes(ws, "CASE-001", gt, "the sample case")
        t0 = time.perf_counter()
        added = scale_folder(folder, args.transfers)
        print(
            f"prepared case folder: {args.transfers:,} transfers ({added:,} background) in {time.perf_counter() - t0:.1f} s"
        )

        with Workspace(Path(tmp) / "bench.duckdb") as ws:
            t0 = time.perf_counter()
            report = ws.load_case_folder(folder)
            load_s = time.perf_counter() - t0
            print(f"load case folder:        {load_s:6.2f} s  {report.inserted['transfers']:,} transfers")

            t0 = time.perf_counter()
            trace_funds(ws.cases, "CASE-001", gt["theft_tx_hashes"], params=TraceParams(max_hops=6))
            print(f"trace_funds 6 hops, first (builds the lookup index): {time.perf_counter() - t0:6.2f} s")
            t0 = time.perf_counter()
            r = trace_funds(ws.cases, "CASE-001", gt["theft_tx_hashes"], params=TraceParams(max_hops=6))
            trace_s = time.perf_counter() - t0
            s = r["summary"]
            print(f"trace_funds 6 hops fwd:  {trace_s:6.2f} s  (target <= 0.5 s)  {r['totals']['transfers_followed']} transfers, "
                  f"{len(r['nodes'])} nodes, endpoints {sorted(r['endpoints'])}; traced ${s['traced_usd']:,.0f} = "
                  f"endpoints ${s['endpoints_usd']:,.0f} + frontier ${s['frontier_usd']:,.0f} + held ${s['held_usd']:,.0f} "
                  f"+ cut off ${s['cut_off_usd']:,.0f}")  # fmt: skip
            t0 = time.perf_counter()
            r = ws.trace("CASE-001", max_hops=6)
            print(f"trace_funds 6 hops from the intake's roles: {time.perf_counter() - t0:6.2f} s  "
                  f"{r['totals']['transfers_followed']} transfers")  # fmt: skip
            dense = "0x" + (hashlib.md5(b"a0").hexdigest() + hashlib.md5(b"b0").hexdigest())[:40]
            t0 = time.perf_counter()
            r2 = trace_funds(
                ws.cases,
                "CASE-001",
                [dense],
                params=TraceParams(max_hops=6, stop_at_categories=(), min_usd=0),
            )
            print(f"trace_funds 6 hops fwd from a busy background address: {time.perf_counter() - t0:6.2f} s  "
                  f"{r2['totals']['transfers_followed']} transfers (edge cap {r2['params']['max_edges']}, truncated {r2['truncated']})")  # fmt: skip

            t0 = time.perf_counter()
            res = run_detectors(ws.cases, "CASE-001")
            det_s = time.perf_counter() - t0
            print(f"all detectors:           {det_s:6.2f} s  (target <= 5 s)  {len(res['flag_ids']):,} flags")
            for name, info in res["by_detector"].items():
                print(f"    {name:24s} {info['seconds']:6.2f} s  {info['flags']:,} flags")
            t0 = time.perf_counter()
            tri = triage(ws.cases, "CASE-001")
            high = sum(v for k, v in tri["by_severity"].items() if k in ("high", "critical"))
            print(f"triage:                  {time.perf_counter() - t0:6.2f} s  {tri['rows_total']} rows ({high} high or "
                  f"critical) from {tri['flags_total']:,} flags")  # fmt: skip
            tool_sizes(ws, "CASE-001", gt, f"{args.transfers:,} transfers")


if __name__ == "__main__":
    main()
