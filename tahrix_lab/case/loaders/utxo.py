"""UTXO transactions: address-to-address transfers derived from inputs and outputs."""

from __future__ import annotations

import duckdb

from tahrix_lab.case.loaders.sqlparts import fetch_value


def derive_utxo_transfers(cur: duckdb.DuckDBPyConnection, case_id: str) -> int:
    """Address-to-address ``utxo`` transfers for UTXO transactions that have inputs/outputs but none yet.

    Each output is split over the input addresses in proportion to what they put in
    (integer satoshis, floor); change back to an input address is not a transfer.
    USD comes from the nearest earlier price of the chain's native asset.
    """
    before = int(fetch_value(cur, "SELECT count(*) FROM transfers WHERE case_id = ?", [case_id]) or 0)
    cur.execute(
        """
        INSERT INTO transfers (case_id, transfer_id, chain, tx_hash, block_time, kind, from_address, to_address,
                               asset_key, amount_raw, amount, usd_value, status)
        WITH todo AS (
          SELECT DISTINCT u.chain, u.tx_hash FROM utxo_io u JOIN chains c ON c.chain = u.chain AND c.family = 'utxo'
          WHERE u.case_id = $case
          EXCEPT SELECT chain, tx_hash FROM transfers WHERE case_id = $case AND kind = 'utxo'),
        ins AS (SELECT u.chain, u.tx_hash, u.address, sum(u.amount_sats) AS sats, min(u.idx) AS first_idx
                FROM utxo_io u SEMI JOIN todo USING (chain, tx_hash)
                WHERE u.case_id = $case AND u.direction = 'in' AND u.address IS NOT NULL GROUP BY ALL),
        tot AS (SELECT chain, tx_hash, sum(sats) AS total FROM ins GROUP BY ALL),
        outs AS (SELECT u.chain, u.tx_hash, u.address, u.amount_sats, u.idx FROM utxo_io u SEMI JOIN todo USING (chain, tx_hash)
                 WHERE u.case_id = $case AND u.direction = 'out' AND u.address IS NOT NULL AND u.amount_sats > 0),
        edges AS (
          SELECT o.chain, o.tx_hash, i.address AS src, o.address AS dst, o.amount_sats * i.sats // t.total AS part,
                 row_number() OVER (PARTITION BY o.chain, o.tx_hash ORDER BY o.idx, i.first_idx) - 1 AS k
          FROM outs o JOIN ins i USING (chain, tx_hash) JOIN tot t USING (chain, tx_hash)
          WHERE i.address <> o.address AND t.total > 0),
        timed AS (
          SELECT e.*, x.block_time, ch.native_decimals AS dec, ch.native_symbol AS sym FROM edges e
          JOIN transactions x ON x.case_id = $case AND x.chain = e.chain AND x.tx_hash = e.tx_hash
          JOIN chains ch ON ch.chain = e.chain),
        priced AS (
          SELECT timed.*, p.usd FROM timed ASOF LEFT JOIN prices p
            ON p.canonical_asset = timed.sym AND p.ts_hour <= timed.block_time)
        SELECT $case, chain || ':' || tx_hash || ':utxo:' || k, chain, tx_hash, block_time, 'utxo', src, dst,
               chain || ':native', CAST(part AS VARCHAR), CAST(part AS DECIMAL(38,18)) / 10 ** dec,
               round(part / 10 ** dec * usd, 2), TRUE
        FROM priced
        """,
        {"case": case_id},
    )
    return int(fetch_value(cur, "SELECT count(*) FROM transfers WHERE case_id = ?", [case_id]) or 0) - before
