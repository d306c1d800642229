"""The batched evidence look-ups behind ``verify_citations``: one parameterised query per kind and source.

Each function sets ``status``, ``match`` and ``note`` on the citations it is
given. Hashes and EVM addresses are compared lower-case (the loaders store
them so); Tron and Bitcoin base58 addresses as written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import numpy as np

from tahrix_lab.case.citations_find import Citation
from tahrix_lab.case.citations_index import HALF, SHORT, TABLES, Sorted, citation_index, fetch, hashes
from tahrix_lab.case.db import CaseDB, jdict

# Where a tx hash can be found besides the indexed transactions and transfers (small tables, plain SQL).
_TX_SOURCES = (
    ("bridge_events", "SELECT b.src_tx_hash AS v, b.src_chain AS chain, b.bridge_event_id, b.bridge_name, "
     "b.src_time AS time, 'src' AS leg FROM bridge_events b WHERE b.case_id = $1 AND b.src_tx_hash IN "
     "(SELECT unnest($2::VARCHAR[])) UNION ALL SELECT b.dst_tx_hash, b.dst_chain, b.bridge_event_id, b.bridge_name, "
     "b.dst_time, 'dst' FROM bridge_events b WHERE b.case_id = $1 AND b.dst_tx_hash IN (SELECT unnest($2::VARCHAR[]))"),
    ("utxo_io", "SELECT DISTINCT u.tx_hash AS v, u.chain, u.tx_hash FROM utxo_io u WHERE u.case_id = $1 "
     "AND u.tx_hash IN (SELECT unnest($2::VARCHAR[]))"),
)  # fmt: skip
# The columns a reader checks beside a cited transaction, per indexed table (``t`` the row).
_TX_COLS = {
    "transactions": "t.tx_hash AS v, t.chain, t.tx_hash, t.block_number, t.block_time AS time, "
    "t.from_address AS from, t.to_address AS to, t.value, t.status",
    "transfers": "t.tx_hash AS v, t.chain, t.tx_hash, t.transfer_id, t.block_time AS time, "
    "t.from_address AS from, t.to_address AS to, t.amount, t.asset_key, t.usd_value",
}
_ADDRESS_SOURCES = (
    ("addresses", "SELECT a.address AS v, a.chain, a.address, a.first_seen, a.last_seen, a.n_tx_in, a.n_tx_out, "
     "a.total_in_usd, a.total_out_usd FROM addresses a WHERE a.case_id = $1 AND a.address IN "
     "(SELECT unnest($2::VARCHAR[]))"),
    ("case_addresses", "SELECT c.address AS v, c.chain, c.address, c.role, c.note FROM case_addresses c "
     "WHERE c.case_id = $1 AND c.address IN (SELECT unnest($2::VARCHAR[]))"),
    ("labels", "SELECT l.address AS v, l.chain, l.address, l.label_id, l.label, l.category, l.source FROM case_labels l "
     "WHERE l.case_id = $1 AND l.address IN (SELECT unnest($2::VARCHAR[]))"),
    ("utxo_io", "SELECT DISTINCT u.address AS v, u.chain, u.address FROM utxo_io u WHERE u.case_id = $1 "
     "AND u.address IN (SELECT unnest($2::VARCHAR[]))"),
)  # fmt: skip
# Every stored address, for near misses and shortened forms (tx hashes go through the index).
_ALL = {
    "address": "SELECT chain, address AS val FROM addresses WHERE case_id = $1 UNION SELECT chain, address FROM "
    "labels WHERE case_id = $1 UNION SELECT chain, address FROM case_addresses WHERE case_id = $1",
}
_IDS = {
    "FLG-": ("anomaly_flags", "flag_id", "flag_type, severity, status, chain, address, tx_hash"),
    "LBL-": ("labels", "label_id", "chain, address, label, category, source"),
    "BR-": ("bridge_events", "bridge_event_id", "bridge_name, src_chain, src_tx_hash, dst_chain, dst_tx_hash, status"),
    "AUD-": ("audit_log", "audit_id", "action, actor, target_kind, target_id, at_time"),
    "NOTE-": ("notes", "note_id", "target_kind, target_id, created_by, created_at"),
}  # fmt: skip


def _row(table: str, r: dict[str, Any]) -> dict[str, Any]:
    return jdict({"table": table, **{k: v for k, v in r.items() if k != "v" and v is not None}})


def lookup_values(db: CaseDB, case_id: str, kind: str, cits: list[Citation]) -> None:
    """Full hashes or addresses: every source, then near misses for the rest."""
    values = [c.value for c in cits]
    rows: dict[str, list[dict[str, Any]]] = _indexed_tx(db, case_id, values) if kind == "tx" else {}
    for table, sql in _TX_SOURCES if kind == "tx" else _ADDRESS_SOURCES:
        todo = [v for v in values if v not in rows or table in ("case_addresses", "labels")]
        if not todo:
            continue
        for r in db.rows(sql, [case_id, todo]):
            rows.setdefault(r["v"], []).append(_row(table, r))
    for c in cits:
        found = rows.get(c.value)
        if not found:
            continue
        on_chain = [r for r in found if c.chain is None or r.get("chain") == c.chain]
        if on_chain:
            c.status, c.match = "verified", _merged(on_chain)
        else:
            c.status, c.match = "close", _merged(found)
            c.note = f"found on {found[0]['chain']}, the text names {c.chain}"
    missing = [c for c in cits if c.status == "not_found"]
    if kind == "tx":
        _tx_near_misses(db, case_id, missing)
    else:
        _near_misses(db, case_id, kind, missing)


def _indexed_tx(db: CaseDB, case_id: str, values: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The transactions and transfers rows of the cited hashes (one of each per chain), through the index."""
    hits = citation_index(db, case_id).parts["tx"].equal(hashes(db, values))
    out: dict[str, list[dict[str, Any]]] = {}
    for code, table in enumerate(TABLES):
        got = fetch(db, case_id, table, _TX_COLS[table], [r for _, t, r in hits if t == code])
        seen: set[tuple[str, str]] = set()
        for r in sorted(got, key=lambda r: (r["v"], r["chain"], r.get("transfer_id") or "")):
            if (r["v"], r["chain"]) not in seen and (
                code == 0 or not any(x.get("chain") == r["chain"] for x in out.get(r["v"], []))
            ):
                seen.add((r["v"], r["chain"]))
                out.setdefault(r["v"], []).append(_row(table, r))
    return out


def _tx_near_misses(db: CaseDB, case_id: str, cits: list[Citation]) -> None:
    """A hash one character off a stored one: same head or tail (index), then exactly one character differs."""
    if not cits:
        return
    idx = citation_index(db, case_id)
    heads = idx.parts["head"].equal(hashes(db, [c.value[:HALF] for c in cits]))
    tails = idx.parts["tail"].equal(hashes(db, [c.value[-HALF:] for c in cits]))
    cands: dict[int, set[tuple[int, int]]] = {}
    for i, t, rid in heads + tails:
        cands.setdefault(i, set()).add((t, rid))
    rows = {
        (code, r["rid"]): r
        for code, table in enumerate(TABLES)
        for r in fetch(db, case_id, table, "t.rowid AS rid, t.chain, t.tx_hash",
                       [rid for group in cands.values() for t, rid in group if t == code])
    }  # fmt: skip
    for i, c in enumerate(cits):
        near = sorted(
            (r["tx_hash"], r["chain"])
            for key in cands.get(i, ())
            if (r := rows.get(key)) and _one_off(r["tx_hash"], c.value)
        )
        if near:
            c.status, c.match = "close", {"table": "tx", "chain": near[0][1], "value": near[0][0]}
            c.note = f"one character off {near[0][0]}"


def _one_off(a: str, b: str) -> bool:
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1


def _merged(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The first row, with the role and label of an address added from the other sources."""
    out = dict(found[0])
    for r in found[1:]:
        if r["chain"] != out["chain"]:
            continue
        for k in ("role", "label", "label_id", "category", "source"):
            if k in r and k not in out:
                out[k] = r[k]
    return out


def _near_misses(db: CaseDB, case_id: str, kind: str, cits: list[Citation]) -> None:
    """One character off: the first or the last ``HALF`` characters equal (a hash join), edit distance 1."""
    if not cits:
        return
    values = [c.value for c in cits]
    sql = f"""
        WITH c AS (SELECT unnest($2::VARCHAR[]) AS v),
        x AS (SELECT chain, val, left(val, {HALF}) AS head, right(val, {HALF}) AS tail FROM ({_ALL[kind]}))
        SELECT DISTINCT c.v, x.chain, x.val FROM c JOIN x ON x.head = left(c.v, {HALF}) WHERE levenshtein(x.val, c.v) = 1
        UNION
        SELECT DISTINCT c.v, x.chain, x.val FROM c JOIN x ON x.tail = right(c.v, {HALF}) WHERE levenshtein(x.val, c.v) = 1
        ORDER BY 1, 2, 3
    """
    near: dict[str, dict[str, Any]] = {}
    for r in db.rows(sql, [case_id, values]):
        near.setdefault(
            r["v"], {"table": "tx" if kind == "tx" else "address", "chain": r["chain"], "value": r["val"]}
        )
    for c in cits:
        if c.value in near:
            c.status, c.match = "close", near[c.value]
            c.note = f"one character off {near[c.value]['value']}"


def lookup_shorts(db: CaseDB, case_id: str, cits: list[Citation]) -> None:
    """``0x3373…3eb2``: the stored hashes and addresses with that head and tail."""
    heads = [c.value.split("…")[0] for c in cits]
    tails = [c.value.split("…")[1] for c in cits]
    found: dict[int, set[tuple[str, str]]] = {}
    for n in sorted({len(h) for h in heads}):  # addresses: the small tables, one query per head length
        mine = [i for i, h in enumerate(heads) if len(h) == n]
        rows = db.rows(
            f"""WITH c AS (SELECT unnest($2::INTEGER[]) AS i, unnest($3::VARCHAR[]) AS head, unnest($4::VARCHAR[]) AS tail)
            SELECT DISTINCT c.i, x.chain, x.val FROM c JOIN (SELECT chain, val, left(val, {n}) AS head FROM ({_ALL["address"]})) x
              ON x.head = c.head WHERE ends_with(x.val, c.tail)""",
            [case_id, mine, [heads[i] for i in mine], [tails[i] for i in mine]],
        )  # fmt: skip
        for r in rows:
            found.setdefault(r["i"], set()).add((r["chain"], r["val"]))
    long_heads = [i for i, h in enumerate(heads) if len(h) >= SHORT]  # tx hashes: through the index
    hits = (
        citation_index(db, case_id).parts["short"].equal(hashes(db, [heads[i][:SHORT] for i in long_heads]))
    )
    for code, table in enumerate(TABLES):
        got = fetch(
            db,
            case_id,
            table,
            "t.rowid AS rid, t.chain, t.tx_hash AS val",
            [r for _, t, r in hits if t == code],
        )
        by_rid = {r["rid"]: r for r in got}
        for k, t, rid in hits:
            i, row = long_heads[k], by_rid.get(rid) if t == code else None
            if row and row["val"].startswith(heads[i]) and row["val"].endswith(tails[i]):
                found.setdefault(i, set()).add((row["chain"], row["val"]))
    for i, c in enumerate(cits):
        hits_i = sorted(found.get(i, ()))
        values = {v for _, v in hits_i}
        if hits_i:
            c.match = {"table": "shortened", "chain": hits_i[0][0], "value": hits_i[0][1]}
            c.status = "verified" if len(values) == 1 else "close"
            if len(values) > 1:
                c.note = f"fits {len(values)} values; cite it in full"


def lookup_ids(db: CaseDB, case_id: str, cits: list[Citation]) -> None:
    for prefix, (table, key, cols) in _IDS.items():
        mine = [c for c in cits if c.value.startswith(prefix)]
        if not mine:
            continue
        ids = db.rows(f"SELECT {key} AS v, {cols} FROM {table} WHERE case_id = ? ORDER BY {key}", [case_id])
        by_id = {r["v"]: r for r in ids}
        for c in mine:
            if c.value in by_id:
                c.status, c.match = "verified", _row(table, {key: c.value, **by_id[c.value]})
                continue
            near = [
                v
                for v in by_id
                if len(v) == len(c.value) and sum(a != b for a, b in zip(v, c.value, strict=True)) == 1
            ]
            if near:
                c.status, c.match = "close", _row(table, {key: near[0], **by_id[near[0]]})
                c.note = f"one character off {near[0]}"


def _nearest(part: Sorted, lo: float, hi: float, target: float, keep: Any = None) -> tuple[float, int] | None:
    """(distance, row id) of the indexed value in [lo, hi] nearest ``target`` (``keep``: a mask on ``extra``)."""
    pos = part.within(lo, hi)
    if keep is not None and part.extra is not None and len(pos):
        pos = pos[np.isin(part.extra[pos], keep)]
    if not len(pos):
        return None
    d = np.abs(part.keys[pos] - target)
    best = pos[np.lexsort((part.rowids[pos], d))[0]]
    return float(abs(part.keys[best] - target)), int(part.rowids[best])


def lookup_blocks(db: CaseDB, case_id: str, cits: list[Citation]) -> None:
    part = citation_index(db, case_id).parts["block"]
    best = {i: _nearest(part, n - 1, n + 1, n) for i, c in enumerate(cits) if (n := int(c.number or 0))}
    rows = {r["rid"]: r for r in fetch(db, case_id, "transactions", "t.rowid AS rid, t.chain, t.block_number, "
            "t.tx_hash, t.block_time AS time", [b[1] for b in best.values() if b])}  # fmt: skip
    for i, b in best.items():
        r = rows.get(b[1]) if b else None
        if r is None:
            continue
        c = cits[i]
        c.status = "verified" if b is not None and b[0] == 0 else "close"
        c.match = _row("transactions", {k: v for k, v in r.items() if k != "rid"})
        if c.status == "close":
            c.note = f"the nearest block in the case is {r['block_number']}"


def parse_time(value: str) -> datetime:
    """``2024-03-12 02:14`` (a minute) or with seconds, naive UTC as the case stores times."""
    fmt = "%Y-%m-%d %H:%M:%S" if value.count(":") == 2 else "%Y-%m-%d %H:%M"
    return datetime.strptime(value, fmt)  # noqa: DTZ007 - the case stores naive UTC


def lookup_times(db: CaseDB, case_id: str, cits: list[Citation]) -> None:
    """A time shown to the minute is verified by a movement within that minute; one unit either side is close."""
    starts = [parse_time(c.value) for c in cits]
    units = [int(c.unit or 60) for c in cits]
    small = db.rows(
        """
        WITH c AS (SELECT unnest($2::INTEGER[]) AS i, unnest($3::TIMESTAMP[]) AS s, unnest($4::INTEGER[]) AS u),
        x AS (SELECT 'bridge_events' AS tbl, bridge_event_id || ':src' AS key, src_chain AS chain, src_tx_hash AS tx_hash, src_time AS t FROM bridge_events WHERE case_id = $1
              UNION ALL SELECT 'bridge_events', bridge_event_id || ':dst', dst_chain, dst_tx_hash, dst_time FROM bridge_events WHERE case_id = $1
              UNION ALL SELECT 'cases', case_id, NULL, NULL, incident_time FROM cases WHERE case_id = $1)
        SELECT c.i, x.tbl, x.key, x.chain, x.tx_hash, x.t AS time, epoch(x.t) AS e FROM c JOIN x
          ON x.t >= c.s - to_seconds(c.u) AND x.t < c.s + to_seconds(2 * c.u)
        """,
        [case_id, list(range(len(cits))), starts, units],
    )  # fmt: skip
    part = citation_index(db, case_id).parts["time"]
    cands: dict[int, list[tuple[bool, float, str, str, Any]]] = {}
    for r in small:
        s0 = starts[r["i"]].replace(tzinfo=UTC).timestamp()
        inside = s0 <= r["e"] < s0 + units[r["i"]]
        cands.setdefault(r["i"], []).append((not inside, abs(r["e"] - s0), r["tbl"], r["key"], r))
    moved: dict[int, int] = {}
    for i, (s, u) in enumerate(zip(starts, units, strict=True)):
        s0 = s.replace(tzinfo=UTC).timestamp()
        inside = _nearest(part, s0, s0 + u - 1e-6, s0 + u / 2)
        best = inside or _nearest(part, s0 - u, s0 + 2 * u - 1e-6, s0)
        if best:
            moved[i] = best[1]
            cands.setdefault(i, []).append((inside is None, best[0], "transfers", "", best[1]))
    rows = {r["rid"]: r for r in fetch(db, case_id, "transfers", "t.rowid AS rid, t.transfer_id AS key, t.chain, "
            "t.tx_hash, t.block_time AS time", list(moved.values()))}  # fmt: skip
    for i, options in cands.items():
        outside, _, tbl, _, ref = min(options, key=lambda o: o[:4])
        hit = rows.get(ref) if tbl == "transfers" else ref
        if hit is None:
            continue
        c = cits[i]
        c.status = "close" if outside else "verified"
        c.match = _row(tbl, {k: hit[k] for k in ("key", "chain", "tx_hash", "time")})
        if outside:
            c.note = f"the nearest recorded time is {c.match['time']}"


def _figure_sources(kind: str) -> str:
    """The small tables' candidate figures as (tbl, key, x); ``$1`` the case, ``$2`` the symbol (amounts).
    Transfers go through the index."""
    if kind == "amount":
        return """
          SELECT 'bridge_events' AS tbl, b.bridge_event_id || ':src' AS key, b.src_amount::DOUBLE AS x FROM bridge_events b
            JOIN assets a ON a.asset_key = b.src_asset_key WHERE b.case_id = $1 AND upper(a.symbol) = $2
          UNION ALL SELECT 'bridge_events', b.bridge_event_id || ':dst', b.dst_amount::DOUBLE FROM bridge_events b
            JOIN assets a ON a.asset_key = b.dst_asset_key WHERE b.case_id = $1 AND upper(a.symbol) = $2"""
    return """
          SELECT 'bridge_events' AS tbl, bridge_event_id || ':src' AS key, src_usd AS x FROM bridge_events
            WHERE case_id = $1 AND $2 = ''
          UNION ALL SELECT 'bridge_events', bridge_event_id || ':dst', dst_usd FROM bridge_events WHERE case_id = $1
          UNION ALL SELECT 'addresses', chain || ':' || address || ':in', total_in_usd FROM addresses WHERE case_id = $1
          UNION ALL SELECT 'addresses', chain || ':' || address || ':out', total_out_usd FROM addresses WHERE case_id = $1
          UNION ALL SELECT 'cases', case_id, reported_loss_usd::DOUBLE FROM cases WHERE case_id = $1"""


def lookup_amounts(db: CaseDB, case_id: str, cits: list[Citation], close_fraction: Decimal) -> None:
    """Amounts per asset symbol and USD figures: the nearest evidence figure within the close window."""
    index = citation_index(db, case_id)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(cits):
        groups.setdefault((c.kind, c.symbol or ""), []).append(i)
    for (kind, symbol), idx in groups.items():
        vs = [float(cits[i].number or 0) for i in idx]
        tols = [
            float(max(cits[i].unit or Decimal(1), abs(cits[i].number or Decimal(0)) * close_fraction))
            for i in idx
        ]
        cands: dict[int, list[tuple[float, str, str, Any]]] = {}
        for r in db.rows(
            f"""WITH c AS (SELECT unnest($3::INTEGER[]) AS i, unnest($4::DOUBLE[]) AS v, unnest($5::DOUBLE[]) AS tol),
            x AS ({_figure_sources(kind)})
            SELECT c.i, x.tbl, x.key, x.x, abs(x.x - c.v) AS d FROM c JOIN x ON x.x BETWEEN c.v - c.tol AND c.v + c.tol""",
            [case_id, symbol, idx, vs, tols],
        ):  # fmt: skip
            cands.setdefault(r["i"], []).append((r["d"], r["tbl"], r["key"], r["x"]))
        keys = [
            r["asset_key"] for r in db.rows("SELECT asset_key FROM assets WHERE upper(symbol) = ?", [symbol])
        ]
        keep = [index.assets[k] for k in keys if k in index.assets] if kind == "amount" else None
        part = index.parts["amount" if kind == "amount" else "usd"]
        picked: dict[int, int] = {}
        for i, v, tol in zip(idx, vs, tols, strict=True):
            best = None if keep == [] else _nearest(part, v - tol, v + tol, v, keep)
            if best:
                picked[i] = best[1]
                cands.setdefault(i, []).append((best[0], "transfers", "", best[1]))
        rows = {r["rid"]: r for r in fetch(db, case_id, "transfers", _TRANSFER_COLS, list(picked.values()))}
        for i, options in cands.items():
            d, tbl, key, ref = min(options, key=lambda o: o[:3])
            c = cits[i]
            hit = rows.get(ref) if tbl == "transfers" else None
            x = float(hit["amount"] if kind == "amount" else hit["usd_value"]) if hit else float(ref)
            half = float((c.unit or Decimal(1)) / 2) * (1 + 1e-9)
            c.status = "verified" if d <= half else "close"
            c.match = (
                _row("transfers", {k: v for k, v in hit.items() if k != "rid"})
                if hit
                else _row(tbl, {"key": key, "value": x})
            )
            if c.status == "close":
                c.note = f"the evidence says {x:,.6g}" if abs(x) < 1e6 else f"the evidence says {x:,.2f}"


_TRANSFER_COLS = (
    "t.rowid AS rid, t.transfer_id, t.chain, t.tx_hash, t.block_time AS time, t.from_address AS from, "
    "t.to_address AS to, t.amount, (SELECT symbol FROM assets a WHERE a.asset_key = t.asset_key) AS symbol, t.usd_value"
)


__all__ = [
    "lookup_amounts",
    "lookup_blocks",
    "lookup_ids",
    "lookup_shorts",
    "lookup_times",
    "lookup_values",
    "parse_time",
]
