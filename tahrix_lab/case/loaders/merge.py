"""The shared core: identify movements by content, merge them into the case, report.

A source loader stages its rows in three temp tables (``_mv`` movements,
``_tx`` transactions, ``_as`` assets; columns below) and calls ``merge_all``.

Identity: a movement's ``transfer_id`` is ``<chain>:<tx>:<kind>:<position>``
where the source gives a position (log index, trace address); otherwise a
canonical key ``<chain>:<tx>:<kind>:k<hash of from|to|asset|token id|amount>.<n>``
where ``n`` numbers identical movements within the transaction. Besides its
id, a movement also matches an existing one with the same chain, tx, kind,
from, to, asset, token id, amount and occurrence (so an Etherscan row without
a log index meets the ethereum-etl row of the same transfer; the id then
becomes the positional one). Matched rows merge: a field the case lacks is
filled, a field both have with different values is a conflict (kept as it
was, reported with both values). Everything is set-based SQL.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from tahrix_lab.case.loaders.report import Conflict, FileReport
from tahrix_lab.case.loaders.sqlparts import decimal_from_raw, fetch_value, q, raw_from_decimal

MV_COLUMNS = {
    "transfer_id": "VARCHAR", "chain": "VARCHAR", "tx_hash": "VARCHAR", "block_time": "TIMESTAMP",
    "kind": "VARCHAR", "log_index": "INTEGER", "trace_address": "VARCHAR", "from_address": "VARCHAR",
    "to_address": "VARCHAR", "asset_key": "VARCHAR", "token_id": "VARCHAR", "amount_raw": "VARCHAR",
    "amount": "DECIMAL(38,18)", "usd_value": "DOUBLE", "status": "BOOLEAN", "_line": "BIGINT", "_file": "INTEGER",
}  # fmt: skip
TX_COLUMNS = {
    "chain": "VARCHAR", "tx_hash": "VARCHAR", "block_number": "BIGINT", "block_time": "TIMESTAMP",
    "tx_index": "INTEGER", "from_address": "VARCHAR", "to_address": "VARCHAR", "nonce": "BIGINT",
    "value_raw": "VARCHAR", "value": "DECIMAL(38,18)", "fee_raw": "VARCHAR", "fee": "DECIMAL(38,18)",
    "fee_usd": "DOUBLE", "status": "BOOLEAN", "method_selector": "VARCHAR", "method_name": "VARCHAR",
    "source": "VARCHAR", "_line": "BIGINT", "_file": "INTEGER",
}  # fmt: skip
AS_COLUMNS = {
    "asset_key": "VARCHAR", "chain": "VARCHAR", "token_address": "VARCHAR", "symbol": "VARCHAR",
    "name": "VARCHAR", "decimals": "INTEGER", "standard": "VARCHAR", "canonical_asset": "VARCHAR",
    "_file": "INTEGER",
}  # fmt: skip

# fields compared on a match (conflict) and filled where the case lacks them
MV_MERGE = ("block_time", "log_index", "trace_address", "amount_raw", "amount", "usd_value", "status")
TX_MERGE = ("block_number", "block_time", "tx_index", "from_address", "to_address", "nonce", "value_raw",
            "value", "fee_raw", "fee", "fee_usd", "status", "method_selector", "method_name")  # fmt: skip
AS_MERGE = ("token_address", "symbol", "name", "decimals", "standard", "canonical_asset")
AS_CONFLICT = ("decimals", "standard")
_KEY = ("chain", "tx_hash", "kind", "from_address", "to_address", "asset_key", "token_id")
# a canonical id gives way to the positional one of the same movement
_UPGRADE = (
    "({p}e_log_index IS NULL AND {p}e_trace_address IS NULL "
    "AND ({p}n_log_index IS NOT NULL OR {p}n_trace_address IS NOT NULL))"
)
_MAX_CONFLICTS = 500  # kept per file in the report; all are counted


def create_stages(cur: duckdb.DuckDBPyConnection) -> None:
    for name, cols in (("_mv", MV_COLUMNS), ("_tx", TX_COLUMNS), ("_as", AS_COLUMNS)):
        cur.execute(
            f"CREATE OR REPLACE TEMP TABLE {name} ({', '.join(f'{q(c)} {t}' for c, t in cols.items())})"
        )


def drop_stages(cur: duckdb.DuckDBPyConnection) -> None:
    for name in ("_mv", "_tx", "_as", "_mv_k", "_mv_n", "_mv_p", "_tx_n", "_tx_p", "_as_n", "_as_l"):
        cur.execute(f"DROP TABLE IF EXISTS {name}")


def _differs(a: str, b: str, field: str) -> str:
    if field in ("usd_value", "fee_usd"):  # explorers round USD to the cent
        return f"abs({a} - {b}) > 0.005 + 1e-6 * abs({a})"
    return f"{a} <> {b}"


def _record(reports: list[FileReport], table: str, rows: list[tuple[Any, ...]]) -> dict[int, int]:
    """Conflict rows ``(_file, line, key, field, kept, incoming)`` into their files' reports;
    return per file how many distinct keys conflict."""
    keys: dict[int, set[str]] = {}
    for f, line, key, field, old, new in rows:
        fr = reports[f]
        if len(fr.conflicts) < _MAX_CONFLICTS:
            fr.conflicts.append(Conflict(table, key, field, old, new, line))
        keys.setdefault(f, set()).add(key)
    return {f: len(k) for f, k in keys.items()}


def _conflicts(
    cur: duckdb.DuckDBPyConnection,
    source: str,
    key: str,
    fields: tuple[str, ...],
    *,
    cols: tuple[str, str, str, str] = ("_file", "_line", "e_{f}", "n_{f}"),
    where: str = "TRUE",
) -> list[tuple[Any, ...]]:
    """Rows ``(file, line, key, field, kept, incoming)`` where both values of a field are known and differ.

    ``cols`` name the file and line columns and the kept / incoming value of field ``{f}``."""
    file_col, line_col, old, new = cols
    parts = []
    for f in fields:
        o, n = old.format(f=f), new.format(f=f)
        parts.append(
            f"SELECT {file_col}, {line_col}, {key} AS k, '{f}' AS field, CAST({o} AS VARCHAR), CAST({n} AS VARCHAR) "
            f"FROM {source} WHERE {where} AND {o} IS NOT NULL AND {n} IS NOT NULL AND {_differs(o, n, f)}"
        )
    sql = f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY 1, 2, 3, 4"
    return [tuple(r) for r in cur.execute(sql).fetchall()]


def _batch(
    cur: duckdb.DuckDBPyConnection,
    stage: str,
    keys: tuple[str, ...],
    fields: list[str],
    checked: tuple[str, ...],
    out: str,
    determined: tuple[str, ...] = (),
) -> list[tuple[Any, ...]]:
    """One row per key for a batch of files: each field's smallest value (so a field one file lacks is
    filled from another, the same whatever the order); fields whose files disagree are conflicts,
    charged to the latest file. ``determined`` fields are part of the key's text (a transfer id
    starts with chain, tx and kind): any row's value is theirs, without comparing strings."""
    aggs = ", ".join(f"{'any_value' if c in determined else 'min'}({c}) AS {c}" for c in fields)
    spread = ", ".join(f"max({c}) AS _max_{c}" for c in checked)
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE {out} AS SELECT {", ".join(keys)}, min(_file) AS _file, max(_file) AS _last,
              arg_min(_line, _file) AS _line, count(*) AS _n, {aggs}, {spread} FROM {stage} GROUP BY {", ".join(keys)}"""
    )
    key = " || ':' || ".join(f"coalesce(CAST({k} AS VARCHAR), '')" for k in keys)
    return _conflicts(
        cur, out, key, checked, cols=("_last", "NULL::BIGINT", "{f}", "_max_{f}"), where="_n > 1"
    )


def _per_file(cur: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> dict[int, tuple[int, ...]]:
    return {int(r[0]): tuple(int(v or 0) for v in r[1:]) for r in cur.execute(sql, params or {}).fetchall()}


def merge_movements(cur: duckdb.DuckDBPyConnection, case_id: str, reports: list[FileReport]) -> None:
    amt = "CASE WHEN amount IS NOT NULL THEN CAST(amount AS VARCHAR) ELSE 'raw:' || amount_raw END"
    canonical = (
        "chain || ':' || tx_hash || ':' || kind || ':k' || left(md5(concat_ws('|', coalesce(from_address, ''), "
        "coalesce(to_address, ''), asset_key, coalesce(token_id, ''), _amt)), 12) || '.' || occurrence"
    )
    # The occurrence number counts identical movements within a file. Nearly all movements are
    # alone in their group: only the groups of more than one go through the window (a window over
    # every row costs a partition and sort of the whole batch).
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _mv_k AS
        WITH m AS MATERIALIZED (SELECT *, {amt} AS _amt, hash({", ".join(_KEY)}, {amt}) AS _h FROM _mv),
             d AS (SELECT _file, _h FROM m GROUP BY _file, _h HAVING count(*) > 1)
        SELECT * EXCLUDE (_h) REPLACE (coalesce(transfer_id, {canonical}) AS transfer_id) FROM (
          SELECT *, row_number() OVER (PARTITION BY _file, _h
                                       ORDER BY log_index NULLS LAST, trace_address NULLS LAST, _line) - 1 AS occurrence
          FROM (SELECT m.* FROM m SEMI JOIN d USING (_file, _h))
          UNION ALL
          SELECT m.*, 0 AS occurrence FROM m ANTI JOIN d USING (_file, _h))"""
    )
    for f, (total, distinct) in _per_file(
        cur, "SELECT _file, count(*), count(DISTINCT transfer_id) FROM _mv_k GROUP BY _file"
    ).items():
        reports[f].skip("the same movement again in this file", total - distinct)
    fields = [c for c in MV_COLUMNS if c not in ("transfer_id", "_line", "_file")] + ["occurrence", "_amt"]
    inner = _batch(
        cur,
        "_mv_k",
        ("transfer_id",),
        fields,
        (*MV_MERGE, "from_address", "to_address", "asset_key"),
        "_mv_n",
        determined=("chain", "tx_hash", "kind"),
    )
    for f, n in _record(reports, "transfers", inner).items():
        reports[f].conflicting += n
    e_cols = ", ".join(f"e.{c} AS e_{c}" for c in MV_MERGE)
    n_cols = ", ".join(f"n.{c} AS n_{c}" for c in MV_MERGE)
    same_key = " AND ".join(f"e.{c} IS NOT DISTINCT FROM n.{c}" for c in _KEY)
    e_amt = "CASE WHEN e.amount IS NOT NULL THEN CAST(e.amount AS VARCHAR) ELSE 'raw:' || e.amount_raw END"
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _mv_p AS
        WITH by_id AS (
          SELECT n._file, n._line, n.transfer_id AS new_id, e.transfer_id AS old_id, {e_cols}, {n_cols}
          FROM _mv_n n JOIN transfers e ON e.case_id = $case AND e.transfer_id = n.transfer_id),
        by_key AS (
          SELECT n._file, n._line, n.transfer_id AS new_id, e.transfer_id AS old_id, {e_cols}, {n_cols}
          FROM (SELECT * FROM _mv_n ANTI JOIN by_id ON by_id.new_id = _mv_n.transfer_id) n
          JOIN (SELECT * FROM transfers WHERE case_id = $case AND occurrence IS NOT NULL
                AND tx_hash IN (SELECT tx_hash FROM _mv_n)) e
            ON {same_key} AND e.occurrence = n.occurrence AND {e_amt} = n._amt
          WHERE e.transfer_id NOT IN (SELECT old_id FROM by_id)
            AND (e.log_index IS NULL OR n.log_index IS NULL OR e.log_index = n.log_index)
            AND (e.trace_address IS NULL OR n.trace_address IS NULL OR e.trace_address = n.trace_address))
        SELECT * FROM by_id UNION ALL SELECT * FROM by_key""",
        {"case": case_id},
    )
    for f, n in _record(reports, "transfers", _conflicts(cur, "_mv_p", "old_id", MV_MERGE)).items():
        reports[f].conflicting += n
    fills = " OR ".join(f"(e_{c} IS NULL AND n_{c} IS NOT NULL)" for c in MV_MERGE)
    upgrade = _UPGRADE.format(p="")
    for f, (filled,) in _per_file(
        cur,
        f"SELECT _file, count(*) FROM _mv_p WHERE {fills} OR (old_id <> new_id AND {upgrade}) GROUP BY _file",
    ).items():
        reports[f].filled += filled
    sets = ", ".join(f"{c} = coalesce(t.{c}, p.n_{c})" for c in MV_MERGE)
    cur.execute(
        f"""UPDATE transfers t SET {sets},
              transfer_id = CASE WHEN p.old_id <> p.new_id AND {_UPGRADE.format(p="p.")}
                                 THEN p.new_id ELSE t.transfer_id END
            FROM (SELECT * FROM _mv_p WHERE {fills} OR (old_id <> new_id AND {upgrade})) p
            WHERE t.case_id = $case AND t.transfer_id = p.old_id""",
        {"case": case_id},
    )
    cols = [c for c in MV_COLUMNS if c not in ("_line", "_file")] + ["occurrence"]
    cur.execute(
        f"""INSERT INTO transfers (case_id, {", ".join(cols)})
        SELECT $case, {", ".join(cols)} FROM _mv_n ANTI JOIN _mv_p ON _mv_p.new_id = _mv_n.transfer_id""",
        {"case": case_id},
    )
    # per file: new to the case (first file of the batch to hold it), already there, unpriced, unknown decimals
    counts = _per_file(
        cur,
        """SELECT k._file,
                  count(*) FILTER (WHERE p.new_id IS NULL AND k._file = n._file),
                  count(*) FILTER (WHERE p.new_id IS NOT NULL OR k._file > n._file),
                  count(*) FILTER (WHERE coalesce(p.e_usd_value, n.usd_value) IS NULL AND n.status IS NOT FALSE),
                  count(*) FILTER (WHERE coalesce(p.e_amount, n.amount) IS NULL OR coalesce(p.e_amount_raw, n.amount_raw) IS NULL)
           FROM (SELECT DISTINCT _file, transfer_id FROM _mv_k) k JOIN _mv_n n USING (transfer_id)
           LEFT JOIN _mv_p p ON p.new_id = k.transfer_id GROUP BY k._file""",
    )
    for f, (ins, merged, unpriced, unknown) in counts.items():
        fr = reports[f]
        fr.inserted += ins
        fr.merged += merged
        fr.unpriced += unpriced
        fr.unknown_decimals += unknown


def merge_transactions(cur: duckdb.DuckDBPyConnection, case_id: str, reports: list[FileReport]) -> None:
    fields = [c for c in TX_COLUMNS if c not in ("chain", "tx_hash", "_line", "_file")]
    inner = _batch(cur, "_tx", ("chain", "tx_hash"), fields, TX_MERGE, "_tx_n")
    _record(reports, "transactions", inner)
    e_cols = ", ".join(f"e.{c} AS e_{c}" for c in TX_MERGE)
    n_cols = ", ".join(f"n.{c} AS n_{c}" for c in TX_MERGE)
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _tx_p AS
        SELECT n._file, n._line, n.chain, n.tx_hash, n.chain || ':' || n.tx_hash AS k, {e_cols}, {n_cols}
        FROM _tx_n n JOIN transactions e ON e.case_id = $case AND e.chain = n.chain AND e.tx_hash = n.tx_hash""",
        {"case": case_id},
    )
    _record(reports, "transactions", _conflicts(cur, "_tx_p", "k", TX_MERGE))
    fills = " OR ".join(f"(e_{c} IS NULL AND n_{c} IS NOT NULL)" for c in TX_MERGE)
    sets = ", ".join(f"{c} = coalesce(t.{c}, p.n_{c})" for c in TX_MERGE)
    cur.execute(
        f"""UPDATE transactions t SET {sets} FROM (SELECT * FROM _tx_p WHERE {fills}) p
            WHERE t.case_id = $case AND t.chain = p.chain AND t.tx_hash = p.tx_hash""",
        {"case": case_id},
    )
    cols = [c for c in TX_COLUMNS if c not in ("_line", "_file")]
    cur.execute(
        f"""INSERT INTO transactions (case_id, {", ".join(cols)})
        SELECT $case, {", ".join(cols)} FROM _tx_n n ANTI JOIN _tx_p p ON p.chain = n.chain AND p.tx_hash = n.tx_hash""",
        {"case": case_id},
    )
    for f, (n,) in _per_file(
        cur, "SELECT _file, count(*) FROM _tx_n ANTI JOIN _tx_p USING (chain, tx_hash) GROUP BY _file"
    ).items():
        reports[f].tables["transactions"] = reports[f].tables.get("transactions", 0) + n


def merge_assets(cur: duckdb.DuckDBPyConnection, reports: list[FileReport]) -> None:
    cur.execute(
        "UPDATE _as SET canonical_asset = coalesce(_as.canonical_asset, k.canonical) FROM _known k "
        "WHERE k.asset_key = _as.asset_key"
    )
    fields = [c for c in AS_COLUMNS if c not in ("asset_key", "_file")]
    cur.execute("CREATE OR REPLACE TEMP TABLE _as_l AS SELECT *, 0 AS _line FROM _as")
    _record(reports, "assets", _batch(cur, "_as_l", ("asset_key",), fields, AS_CONFLICT, "_as_n"))
    e_cols = ", ".join(f"e.{c} AS e_{c}" for c in AS_MERGE)
    n_cols = ", ".join(f"n.{c} AS n_{c}" for c in AS_MERGE)
    pair = f"(SELECT n._file, NULL::BIGINT AS _line, n.asset_key, {e_cols}, {n_cols} FROM _as_n n JOIN assets e USING (asset_key))"
    _record(reports, "assets", _conflicts(cur, pair, "asset_key", AS_CONFLICT))
    sets = ", ".join(f"{c} = coalesce(assets.{c}, n.{c})" for c in AS_MERGE)
    cur.execute(f"UPDATE assets SET {sets} FROM _as_n n WHERE assets.asset_key = n.asset_key")
    cols = [c for c in AS_COLUMNS if c != "_file"]
    for f, (n,) in _per_file(
        cur, "SELECT _file, count(*) FROM _as_n ANTI JOIN assets USING (asset_key) GROUP BY _file"
    ).items():
        reports[f].tables["assets"] = reports[f].tables.get("assets", 0) + n
    cur.execute(
        f"INSERT INTO assets ({', '.join(cols)}) SELECT {', '.join(cols)} FROM _as_n ANTI JOIN assets USING (asset_key)"
    )


def fill_known_decimals(cur: duckdb.DuckDBPyConnection, case_id: str, fr: FileReport) -> None:
    """Once a token's decimals are known (this file's assets), complete the movements that lacked them."""
    amount_text = "rtrim(rtrim(CAST(t.amount AS VARCHAR), '0'), '.')"
    known = "(SELECT asset_key, decimals FROM assets WHERE decimals IS NOT NULL AND asset_key IN (SELECT asset_key FROM _as))"
    before = int(
        fetch_value(
            cur,
            "SELECT count(*) FROM transfers WHERE case_id = ? AND (amount IS NULL OR amount_raw IS NULL)",
            [case_id],
        )
        or 0
    )
    if not before:
        return
    cur.execute(
        f"""UPDATE transfers t SET amount_raw = coalesce(t.amount_raw, {raw_from_decimal(amount_text, "k.decimals")}),
                                   amount = coalesce(t.amount, {decimal_from_raw("t.amount_raw", "k.decimals")})
            FROM {known} k WHERE t.case_id = $case AND t.asset_key = k.asset_key AND t.token_id IS NULL
              AND (t.amount IS NULL OR t.amount_raw IS NULL)""",
        {"case": case_id},
    )
    after = int(
        fetch_value(
            cur,
            "SELECT count(*) FROM transfers WHERE case_id = ? AND (amount IS NULL OR amount_raw IS NULL)",
            [case_id],
        )
        or 0
    )
    if before > after:
        fr.notes.append(f"{before - after} movements loaded earlier without decimals are now exact")


def merge_all(cur: duckdb.DuckDBPyConnection, case_id: str, reports: list[FileReport]) -> None:
    """Merge a batch of staged files (``_file`` = index into ``reports``) and store their reports."""
    merge_assets(cur, reports)
    fill_known_decimals(cur, case_id, reports[-1])
    merge_transactions(cur, case_id, reports)
    merge_movements(cur, case_id, reports)
    filled = fill_times(cur, case_id)
    if filled:
        reports[-1].notes.append(f"{filled} movements loaded earlier without a block time gained it")
    for fr in reports:
        if fr.rows_read or fr.inserted or fr.merged or fr.skipped or fr.notes or fr.tables:
            store_report(cur, case_id, fr)


def fill_times(cur: duckdb.DuckDBPyConnection, case_id: str) -> int:
    """Give movements and transactions held with an unknown block time the time their block has
    now: from a load's block times (``_block_times``: chain, block_number, block_time, when a
    loader staged them) or another transaction of the case in the same block; a movement takes
    its transaction's. Return how many movements gained a time."""
    if not fetch_value(
        cur, "SELECT count(*) FROM transactions WHERE case_id = ? AND block_time IS NULL", [case_id]
    ) and not fetch_value(
        cur, "SELECT count(*) FROM transfers WHERE case_id = ? AND block_time IS NULL", [case_id]
    ):
        return 0
    staged = fetch_value(
        cur, "SELECT count(*) FROM duckdb_tables() WHERE table_name = '_block_times' AND temporary"
    )
    extra = "UNION SELECT chain, block_number, block_time FROM _block_times" if staged else ""
    cur.execute(
        f"""UPDATE transactions SET block_time = k.block_time
        FROM (SELECT chain, block_number, min(block_time) AS block_time FROM (
                SELECT chain, block_number, block_time FROM transactions
                WHERE case_id = $case AND block_time IS NOT NULL AND block_number IS NOT NULL {extra})
              GROUP BY ALL) k
        WHERE transactions.case_id = $case AND transactions.block_time IS NULL
          AND k.chain = transactions.chain AND k.block_number = transactions.block_number""",
        {"case": case_id},
    )
    before = fetch_value(
        cur, "SELECT count(*) FROM transfers WHERE case_id = ? AND block_time IS NULL", [case_id]
    )
    cur.execute(
        """UPDATE transfers SET block_time = x.block_time
        FROM (SELECT chain, tx_hash, min(block_time) AS block_time FROM transactions
              WHERE case_id = $case AND block_time IS NOT NULL GROUP BY ALL) x
        WHERE transfers.case_id = $case AND transfers.block_time IS NULL
          AND x.chain = transfers.chain AND x.tx_hash = transfers.tx_hash""",
        {"case": case_id},
    )
    after = fetch_value(
        cur, "SELECT count(*) FROM transfers WHERE case_id = ? AND block_time IS NULL", [case_id]
    )
    return int(before or 0) - int(after or 0)


def store_report(cur: duckdb.DuckDBPyConnection, case_id: str, fr: FileReport) -> None:
    """Keep the file's report and its conflicts in the case (``load_reports``, ``load_conflicts``)."""
    summary: dict[str, Any] = fr.row() | {
        "skipped_by_reason": fr.skipped,
        "tables": fr.tables,
        "notes": fr.notes,
    }
    cur.execute(
        "INSERT INTO load_reports (case_id, file, format, report, sha256) VALUES (?, ?, ?, ?, ?)",
        [case_id, fr.file, fr.format, json.dumps(summary), fr.sha256],
    )
    if fr.conflicts:
        cur.execute(
            """INSERT INTO load_conflicts (case_id, file, line, table_name, key, field, existing, incoming)
            SELECT $case, $file, unnest($line), unnest($t), unnest($k), unnest($f), unnest($e), unnest($i)""",
            {"case": case_id, "file": fr.file, "line": [c.line for c in fr.conflicts],
             "t": [c.table for c in fr.conflicts], "k": [c.key for c in fr.conflicts],
             "f": [c.field for c in fr.conflicts], "e": [c.existing for c in fr.conflicts],
             "i": [c.incoming for c in fr.conflicts]},
        )  # fmt: skip
