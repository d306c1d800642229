"""The batched evidence look-ups behind ``verify_citations``: one parameterised query per kind and source.

Each function sets ``status``, ``match`` and ``note`` on the citations it is
given. Hashes and EVM addresses are compared lower-case (the loaders store
them so); Tron and Bitcoin base58 addresses as written.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from tahrix_lab.case.citations_find import Citation
from tahrix_lab.case.db import CaseDB, jdict

# Where a tx hash or an address can be found, most informative first: (table, SQL giving v + the row).
_TX_SOURCES = (
    ("transactions", "SELECT t.tx_hash AS v, t.chain, t.tx_hash, t.block_number, t.block_time AS time, "
     "t.from_address AS from, t.to_address AS to, t.value, t.status FROM transactions t "
     "WHERE t.case_id = $1 AND t.tx_hash IN (SELECT unnest($2::VARCHAR[]))"),
    ("transfers", "SELECT DISTINCT ON (t.chain, t.tx_hash) t.tx_hash AS v, t.chain, t.tx_hash, t.transfer_id, "
     "t.block_time AS time, t.from_address AS from, t.to_address AS to, t.amount, t.asset_key, t.usd_value "
     "FROM transfers t WHERE t.case_id = $1 AND t.tx_hash IN (SELECT unnest($2::VARCHAR[])) "
     "ORDER BY t.chain, t.tx_hash, t.transfer_id"),
    ("bridge_events", "SELECT b.src_tx_hash AS v, b.src_chain AS chain, b.bridge_event_id, b.bridge_name, "
     "b.src_time AS time, 'src' AS leg FROM bridge_events b WHERE b.case_id = $1 AND b.src_tx_hash IN "
     "(SELECT unnest($2::VARCHAR[])) UNION ALL SELECT b.dst_tx_hash, b.dst_chain, b.bridge_event_id, b.bridge_name, "
     "b.dst_time, 'dst' FROM bridge_events b WHERE b.case_id = $1 AND b.dst_tx_hash IN (SELECT unnest($2::VARCHAR[]))"),
    ("utxo_io", "SELECT DISTINCT u.tx_hash AS v, u.chain, u.tx_hash FROM utxo_io u WHERE u.case_id = $1 "
     "AND u.tx_hash IN (SELECT unnest($2::VARCHAR[]))"),
)  # fmt: skip
_ADDRESS_SOURCES = (
    ("addresses", "SELECT a.address AS v, a.chain, a.address, a.first_seen, a.last_seen, a.n_tx_in, a.n_tx_out, "
     "a.total_in_usd, a.total_out_usd FROM addresses a WHERE a.case_id = $1 AND a.address IN "
     "(SELECT unnest($2::VARCHAR[]))"),
    ("case_addresses", "SELECT c.address AS v, c.chain, c.address, c.role, c.note FROM case_addresses c "
     "WHERE c.case_id = $1 AND c.address IN (SELECT unnest($2::VARCHAR[]))"),
    ("labels", "SELECT l.address AS v, l.chain, l.address, l.label_id, l.label, l.category, l.source FROM labels l "
     "WHERE l.case_id = $1 AND l.address IN (SELECT unnest($2::VARCHAR[]))"),
    ("utxo_io", "SELECT DISTINCT u.address AS v, u.chain, u.address FROM utxo_io u WHERE u.case_id = $1 "
     "AND u.address IN (SELECT unnest($2::VARCHAR[]))"),
)  # fmt: skip
# Every stored value of a kind, for near misses and shortened forms.
_ALL = {
    "tx": "SELECT chain, tx_hash AS val FROM transactions WHERE case_id = $1 UNION SELECT chain, tx_hash FROM "
    "transfers WHERE case_id = $1 UNION SELECT chain, tx_hash FROM utxo_io WHERE case_id = $1",
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
    rows: dict[str, list[dict[str, Any]]] = {}
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
    _near_misses(db, case_id, kind, [c for c in cits if c.status == "not_found"])


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
    """One character off: same length, half the value equal, edit distance 1."""
    if not cits:
        return
    values = [c.value for c in cits]
    sql = f"""
        WITH c AS (SELECT unnest($2::VARCHAR[]) AS v), x AS ({_ALL[kind]})
        SELECT DISTINCT c.v, x.chain, x.val FROM c JOIN x
          ON left(x.val, length(c.v) // 2) = left(c.v, length(c.v) // 2) AND levenshtein(x.val, c.v) = 1
        UNION
        SELECT DISTINCT c.v, x.chain, x.val FROM c JOIN x
          ON right(x.val, length(c.v) // 2) = right(c.v, length(c.v) // 2) AND levenshtein(x.val, c.v) = 1
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
    for c in cits:
        head, tail = c.value.split("…")
        sql = f"""
            WITH x AS ({_ALL["tx"]} UNION {_ALL["address"]})
            SELECT DISTINCT chain, val FROM x WHERE starts_with(val, $2) AND ends_with(val, $3) ORDER BY 1, 2 LIMIT 5
        """
        found = db.rows(sql, [case_id, head, tail])
        if len(found) == 1:
            c.status, c.match = (
                "verified",
                {"table": "shortened", "chain": found[0]["chain"], "value": found[0]["val"]},
            )
        elif found:
            c.status, c.match = (
                "close",
                {"table": "shortened", "chain": found[0]["chain"], "value": found[0]["val"]},
            )
            c.note = f"fits {len(found)}{'+' if len(found) == 5 else ''} values; cite it in full"


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


def lookup_blocks(db: CaseDB, case_id: str, cits: list[Citation]) -> None:
    nums = [int(c.number or 0) for c in cits]
    rows = db.rows(
        "SELECT DISTINCT ON (c.n) c.n, t.chain, t.block_number, t.tx_hash, t.block_time AS time "
        "FROM (SELECT unnest($2::BIGINT[]) AS n) c JOIN transactions t ON t.block_number BETWEEN c.n - 1 AND c.n + 1 "
        "WHERE t.case_id = $1 ORDER BY c.n, abs(t.block_number - c.n), t.chain, t.tx_hash",
        [case_id, nums],
    )
    by_n = {r["n"]: r for r in rows}
    for c, n in zip(cits, nums, strict=True):
        if n in by_n:
            r = by_n[n]
            c.status = "verified" if r["block_number"] == n else "close"
            c.match = _row("transactions", r | {"n": None})
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
    rows = db.rows(
        """
        WITH c AS (SELECT unnest($2::INTEGER[]) AS i, unnest($3::TIMESTAMP[]) AS s, unnest($4::INTEGER[]) AS u),
        x AS (SELECT 'transfers' AS tbl, transfer_id AS key, chain, tx_hash, block_time AS t FROM transfers WHERE case_id = $1
              UNION ALL SELECT 'bridge_events', bridge_event_id || ':src', src_chain, src_tx_hash, src_time FROM bridge_events WHERE case_id = $1
              UNION ALL SELECT 'bridge_events', bridge_event_id || ':dst', dst_chain, dst_tx_hash, dst_time FROM bridge_events WHERE case_id = $1
              UNION ALL SELECT 'cases', case_id, NULL, NULL, incident_time FROM cases WHERE case_id = $1)
        SELECT c.i, x.tbl, x.key, x.chain, x.tx_hash, x.t AS time, x.t >= c.s AND x.t < c.s + to_seconds(c.u) AS inside
        FROM c JOIN x ON x.t >= c.s - to_seconds(c.u) AND x.t < c.s + to_seconds(2 * c.u)
        QUALIFY row_number() OVER (PARTITION BY c.i ORDER BY inside DESC, abs(epoch(x.t) - epoch(c.s)), x.tbl, x.key) = 1
        """,
        [case_id, list(range(len(cits))), starts, units],
    )  # fmt: skip
    for r in rows:
        c = cits[r["i"]]
        c.status = "verified" if r["inside"] else "close"
        c.match = _row(r["tbl"], {k: r[k] for k in ("key", "chain", "tx_hash", "time")})
        if not r["inside"]:
            c.note = f"the nearest recorded time is {c.match['time']}"


def _figure_sources(kind: str) -> str:
    """Each candidate figure as (tbl, key, x); ``$1`` the case, ``$2`` the symbol (amounts)."""
    if kind == "amount":
        return """
          SELECT 'transfers' AS tbl, t.transfer_id AS key, t.amount::DOUBLE AS x FROM transfers t
            JOIN assets a USING (asset_key) WHERE t.case_id = $1 AND upper(a.symbol) = $2 AND t.amount IS NOT NULL
          UNION ALL SELECT 'bridge_events', b.bridge_event_id || ':src', b.src_amount::DOUBLE FROM bridge_events b
            JOIN assets a ON a.asset_key = b.src_asset_key WHERE b.case_id = $1 AND upper(a.symbol) = $2
          UNION ALL SELECT 'bridge_events', b.bridge_event_id || ':dst', b.dst_amount::DOUBLE FROM bridge_events b
            JOIN assets a ON a.asset_key = b.dst_asset_key WHERE b.case_id = $1 AND upper(a.symbol) = $2"""
    return """
          SELECT 'transfers' AS tbl, transfer_id AS key, usd_value AS x FROM transfers
            WHERE case_id = $1 AND usd_value IS NOT NULL AND $2 = ''
          UNION ALL SELECT 'bridge_events', bridge_event_id || ':src', src_usd FROM bridge_events WHERE case_id = $1
          UNION ALL SELECT 'bridge_events', bridge_event_id || ':dst', dst_usd FROM bridge_events WHERE case_id = $1
          UNION ALL SELECT 'addresses', chain || ':' || address || ':in', total_in_usd FROM addresses WHERE case_id = $1
          UNION ALL SELECT 'addresses', chain || ':' || address || ':out', total_out_usd FROM addresses WHERE case_id = $1
          UNION ALL SELECT 'cases', case_id, reported_loss_usd::DOUBLE FROM cases WHERE case_id = $1"""


def lookup_amounts(db: CaseDB, case_id: str, cits: list[Citation], close_fraction: Decimal) -> None:
    """Amounts per asset symbol and USD figures: the nearest evidence figure within the close window."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(cits):
        groups.setdefault((c.kind, c.symbol or ""), []).append(i)
    for (kind, symbol), idx in groups.items():
        vs = [cits[i].number or Decimal(0) for i in idx]
        tols = [
            max(cits[i].unit or Decimal(1), abs(v) * close_fraction) for i, v in zip(idx, vs, strict=True)
        ]
        rows = db.rows(
            f"""
            WITH c AS (SELECT unnest($3::INTEGER[]) AS i, unnest($4::DOUBLE[]) AS v, unnest($5::DOUBLE[]) AS tol),
            x AS ({_figure_sources(kind)})
            SELECT c.i, x.tbl, x.key, x.x, abs(x.x - c.v) AS d FROM c JOIN x ON x.x BETWEEN c.v - c.tol AND c.v + c.tol
            QUALIFY row_number() OVER (PARTITION BY c.i ORDER BY abs(x.x - c.v), x.tbl, x.key) = 1
            """,
            [case_id, symbol, idx, [float(v) for v in vs], [float(t) for t in tols]],
        )
        for r in rows:
            c = cits[r["i"]]
            half = float((c.unit or Decimal(1)) / 2) * (1 + 1e-9)
            c.status = "verified" if r["d"] <= half else "close"
            c.match = _figure_row(db, case_id, r["tbl"], r["key"], r["x"])
            if c.status == "close":
                c.note = (
                    f"the evidence says {r['x']:,.6g}"
                    if abs(r["x"]) < 1e6
                    else f"the evidence says {r['x']:,.2f}"
                )


def _figure_row(db: CaseDB, case_id: str, table: str, key: str, x: float) -> dict[str, Any]:
    """The evidence row behind a figure, with what a reader checks beside it."""
    if table == "transfers":
        r = db.one(
            "SELECT t.transfer_id, t.chain, t.tx_hash, t.block_time AS time, t.from_address AS from, "
            "t.to_address AS to, t.amount, a.symbol, t.usd_value FROM transfers t LEFT JOIN assets a USING (asset_key) "
            "WHERE t.case_id = ? AND t.transfer_id = ?",
            [case_id, key],
        )
        return _row(table, r or {"key": key})
    return _row(table, {"key": key, "value": x})


__all__ = [
    "lookup_amounts",
    "lookup_blocks",
    "lookup_ids",
    "lookup_shorts",
    "lookup_times",
    "lookup_values",
    "parse_time",
]
