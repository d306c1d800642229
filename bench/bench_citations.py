"""Citations and report benchmark.

    .venv/bin/python bench/bench_citations.py                     # 1,000,000 transfers
    .venv/bin/python bench/bench_citations.py --transfers 100000  # quicker

1. Checking a 5,000-word answer with 300 distinct citations (hashes, addresses, shortened
   forms, amounts, USD, times, blocks, flag/label/bridge ids; about one in ten
   invented or one character off) against a case of 1,000,000 transfers.
   Target <= 1 s. The case is the sample case plus background traffic written
   straight into DuckDB with SQL (one transaction and one USDC transfer per row).
   The first check of a case builds its lookup index (citations_index), printed apart.
2. Building the report for the sample case (one scripted investigation).
   Target <= 5 s.

Prints each figure (best and median of 3 runs); asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tahrix_lab.case.citations import verify_citations
from tahrix_lab.case.citations_find import find_citations
from tahrix_lab.case.investigator import QUESTION, scripted_backend
from tahrix_lab.case.workspace import Workspace

FILLER = ["the", "funds", "then", "moved", "through", "a", "further", "wallet", "before", "the", "analyst", "could", "follow", "them", "and", "the", "pattern", "matches", "what", "the", "detectors", "flagged", "in", "this", "case", "as", "described", "above"]  # fmt: skip


def timed(fn: Callable[[], Any], runs: int = 3) -> tuple[float, float, Any]:
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def pad_case(ws: Workspace, case_id: str, transfers: int) -> int:
    """Background traffic straight into the case tables: ``transfers`` - sample rows more."""
    have = int(ws.cases.scalar("SELECT count(*) FROM transfers WHERE case_id = ?", [case_id]))
    extra = max(0, transfers - have)
    pool = max(1000, extra // 20)
    addr = "'0x' || substr(md5('a' || ({k})::VARCHAR) || md5('b' || ({k})::VARCHAR), 1, 40)"
    frm, to = addr.format(k=f"(i * 7919) % {pool}"), addr.format(k=f"(i * 104729 + 13) % {pool}")
    tx = "'0x' || md5('t' || i::VARCHAR) || md5('u' || i::VARCHAR)"
    t = "TIMESTAMP '2024-02-10 00:00:00' + to_seconds((i * 2654435761) % (80 * 86400))"
    amount = "(((i * 37) % 500000) / 100.0 + 1)"
    usdc = ws.cases.scalar("SELECT asset_key FROM assets WHERE symbol = 'USDC' AND chain = 'ethereum'")
    with ws.cases.write() as cur:
        cur.execute(
            f"""INSERT INTO transfers (case_id, transfer_id, chain, tx_hash, block_time, kind, log_index, from_address,
                to_address, asset_key, amount_raw, amount, usd_value, status)
            SELECT $1, 'ethereum:' || {tx} || ':token:0', 'ethereum', {tx}, {t}, 'token', 0, {frm}, {to}, $2,
                   CAST(CAST({amount} * 1000000 AS BIGINT) AS VARCHAR), {amount}, {amount}, TRUE FROM range({extra}) r(i)""",
            [case_id, usdc],
        )
        cur.execute(
            f"""INSERT INTO transactions (case_id, chain, tx_hash, block_number, block_time, from_address, to_address,
                nonce, value, status, source)
            SELECT $1, 'ethereum', {tx}, 19000000 + i, {t}, {frm}, $2, i // {pool}, 0, TRUE, 'bench' FROM range({extra}) r(i)""",
            [case_id, usdc.split(":")[1]],
        )
        ws.cases.refresh_addresses(cur, case_id)
    return extra


def answer(ws: Workspace, case_id: str, n: int = 300, words: int = 5000, seed: int = 1) -> str:
    """A long answer citing ``n`` values of the case in every form, about one in ten wrong."""
    rnd = random.Random(seed)
    db = ws.cases
    txs = [
        r["tx_hash"]
        for r in db.rows(
            "SELECT tx_hash FROM transfers WHERE case_id = ? USING SAMPLE reservoir(200 ROWS) REPEATABLE (1)",
            [case_id],
        )
    ]
    rows = db.rows("SELECT t.amount, a.symbol, t.usd_value, t.block_time FROM transfers t JOIN assets a USING (asset_key) "
                   "WHERE t.case_id = ? AND t.amount IS NOT NULL USING SAMPLE reservoir(200 ROWS) REPEATABLE (1)", [case_id])  # fmt: skip
    addrs = [
        r["address"]
        for r in db.rows(
            "SELECT address FROM addresses WHERE case_id = ? USING SAMPLE reservoir(200 ROWS) REPEATABLE (1)",
            [case_id],
        )
    ]
    flags = [
        r["flag_id"]
        for r in db.rows("SELECT flag_id FROM anomaly_flags WHERE case_id = ? LIMIT 50", [case_id])
    ]
    labels = [r["label_id"] for r in db.rows("SELECT label_id FROM labels WHERE case_id = ?", [case_id])]
    blocks = [
        r["block_number"]
        for r in db.rows("SELECT block_number FROM transactions WHERE case_id = ? LIMIT 30", [case_id])
    ]
    makers: list[Callable[[], str]] = [
        lambda: f"tx `{rnd.choice(txs)}`",
        lambda: f"address {rnd.choice(addrs)}",
        lambda: f"({(a := rnd.choice(addrs))[:6]}…{a[-4:]})",
        lambda: f"**{float((r := rnd.choice(rows))['amount']):,.2f} {r['symbol']}**",
        lambda: f"worth ${float(rnd.choice(rows)['usd_value'] or 0):,.0f}",
        lambda: f"at {rnd.choice(rows)['block_time']:%Y-%m-%d %H:%M} UTC",
        lambda: f"flag {rnd.choice(flags)}",
        lambda: f"label {rnd.choice(labels)}",
        lambda: f"block {rnd.choice(blocks):,}",
        lambda: f"tx 0x{rnd.getrandbits(256):064x}",  # invented
        lambda: f"{(h := rnd.choice(txs))[:-1]}{'0' if h[-1] != '0' else '1'}",  # one character off
    ]
    # n distinct citations as the checker counts them (one per distinct value): a draw that repeats a
    # value already cited is drawn again.
    symbols = tuple(
        r["symbol"] for r in db.rows("SELECT DISTINCT symbol FROM assets WHERE symbol IS NOT NULL")
    )
    seen: set[tuple[str, str]] = set()
    cites: list[str] = []
    while len(seen) < n:
        c = rnd.choice(makers)()
        keys = {(f.kind, f.value) for f in find_citations(c, symbols)}
        if keys and not keys & seen and len(seen | keys) <= n:
            seen |= keys
            cites.append(c)
    per = max(1, round((words - sum(len(c.split()) for c in cites)) / n))  # filler words per citation
    parts = []
    for c in cites:
        parts.append(" ".join(rnd.choice(FILLER) for _ in range(per)) + " " + c + ".")
        if rnd.random() < 0.1:
            parts.append("\n\n- ")
    return " ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transfers", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(Path(tmp) / "bench.duckdb")
        cid = ws.load_sample_case()
        t0 = time.perf_counter()
        added = pad_case(ws, cid, args.transfers)
        total = ws.cases.scalar("SELECT count(*) FROM transfers WHERE case_id = ?", [cid])
        print(
            f"case: {total:,} transfers ({added:,} background rows written in {time.perf_counter() - t0:.1f} s)"
        )
        text = answer(ws, cid)
        t0 = time.perf_counter()
        verify_citations(ws.cases, text, cid)  # the first check of a case also builds its lookup index
        print(f"first check (builds the case's citation index): {time.perf_counter() - t0:.1f} s")
        best, median, result = timed(lambda: verify_citations(ws.cases, text, cid))
        print(f"answer: {len(text.split()):,} words, {result['counts']['total']} distinct citations "
              f"({result['line']})")  # fmt: skip
        print(
            f"verify_citations: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms (target <= 1000 ms)"
        )
        ws.close()

        ws = Workspace(Path(tmp) / "sample.duckdb")
        cid = ws.load_sample_case()
        s = ws.start_investigation(cid, user="bench")
        list(
            ws.ask(
                s,
                QUESTION.format(case_id=cid),
                backend=scripted_backend(ws, cid),
                model="scripted-investigator",
            )
        )
        best, median, rep = timed(lambda: ws.report(cid, path=Path(tmp) / "report.html"))
        size = (Path(tmp) / "report.html").stat().st_size
        print(f"report (sample case, 1 session): best {best:.2f} s, median {median:.2f} s (target <= 5 s); "
              f"{size / 1024:.0f} KB HTML, {len(rep.markdown) / 1024:.0f} KB Markdown")  # fmt: skip
        ws.close()


if __name__ == "__main__":
    main()
