"""The case database schema: append-only migrations under the ``case`` namespace.

Adapted from DOMAIN.md §6. Changes made on purpose:

* every evidence table carries ``case_id`` so cases stay apart in one file and
  ``export_case`` writes exactly what was loaded;
* the big tables (transactions, transfers, utxo_io) have no PRIMARY KEY: the
  loaders de-duplicate on the natural key with an anti-join, which keeps
  million-row loads fast (an ART index per key costs more than the join);
* ``case_sessions`` linked chat sessions to a case with the assistant's grant
  until the links moved into the record (the store's ``session_cases``, which
  copies these rows when it migrates; this table is no longer written),
  ``case_session_seen`` remembered what a session already looked at until that
  moved into the record too (the store's ``session_seen``, migration
  ``0007_session_seen`` copies these rows; this table is no longer written),
  ``audit_log`` records every write (who, when, target, before, after) and
  ``notes`` holds analyst/agent notes.

Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

from tahrix_lab.agent.storage.migrations import Migration

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_case_core",
        """
        CREATE TABLE chains (chain VARCHAR PRIMARY KEY, family VARCHAR NOT NULL, evm_chain_id BIGINT,
          native_symbol VARCHAR NOT NULL, native_decimals INTEGER NOT NULL, address_format VARCHAR NOT NULL);
        INSERT INTO chains VALUES
          ('ethereum', 'evm', 1, 'ETH', 18, 'hex'),
          ('bsc', 'evm', 56, 'BNB', 18, 'hex'),
          ('polygon', 'evm', 137, 'POL', 18, 'hex'),
          ('arbitrum', 'evm', 42161, 'ETH', 18, 'hex'),
          ('optimism', 'evm', 10, 'ETH', 18, 'hex'),
          ('avalanche_c', 'evm', 43114, 'AVAX', 18, 'hex'),
          ('base', 'evm', 8453, 'ETH', 18, 'hex'),
          ('tron', 'tron', NULL, 'TRX', 6, 'base58'),
          ('bitcoin', 'utxo', NULL, 'BTC', 8, 'bech32');
        CREATE TABLE assets (asset_key VARCHAR PRIMARY KEY, chain VARCHAR NOT NULL, token_address VARCHAR,
          symbol VARCHAR, name VARCHAR, decimals INTEGER, standard VARCHAR, canonical_asset VARCHAR,
          is_spam BOOLEAN DEFAULT FALSE);
        CREATE TABLE prices (canonical_asset VARCHAR NOT NULL, ts_hour TIMESTAMP NOT NULL, usd DOUBLE NOT NULL,
          source VARCHAR, PRIMARY KEY (canonical_asset, ts_hour));
        CREATE TABLE cases (case_id VARCHAR PRIMARY KEY, title VARCHAR NOT NULL, incident_type VARCHAR,
          incident_time TIMESTAMP, reported_loss_usd DECIMAL(20,2), status VARCHAR DEFAULT 'open',
          summary VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp, updated_at TIMESTAMP);
        CREATE TABLE addresses (case_id VARCHAR NOT NULL, chain VARCHAR NOT NULL, address VARCHAR NOT NULL,
          address_type VARCHAR, first_seen TIMESTAMP, last_seen TIMESTAMP, n_tx_in INTEGER, n_tx_out INTEGER,
          total_in_usd DOUBLE, total_out_usd DOUBLE, first_out_nonce BIGINT);
        CREATE TABLE case_addresses (case_id VARCHAR NOT NULL, chain VARCHAR NOT NULL, address VARCHAR NOT NULL,
          role VARCHAR NOT NULL, added_by VARCHAR, added_at TIMESTAMP DEFAULT current_timestamp, note VARCHAR,
          PRIMARY KEY (case_id, chain, address));
        CREATE TABLE transactions (case_id VARCHAR NOT NULL, chain VARCHAR NOT NULL, tx_hash VARCHAR NOT NULL,
          block_number BIGINT, block_time TIMESTAMP NOT NULL, tx_index INTEGER, from_address VARCHAR,
          to_address VARCHAR, nonce BIGINT, value_raw VARCHAR, value DECIMAL(38,18), fee_raw VARCHAR,
          fee DECIMAL(38,18), fee_usd DOUBLE, status BOOLEAN, method_selector VARCHAR, method_name VARCHAR,
          memo VARCHAR, source VARCHAR);
        CREATE TABLE transfers (case_id VARCHAR NOT NULL, transfer_id VARCHAR NOT NULL, chain VARCHAR NOT NULL,
          tx_hash VARCHAR NOT NULL, block_time TIMESTAMP NOT NULL, kind VARCHAR NOT NULL, log_index INTEGER,
          trace_address VARCHAR, from_address VARCHAR, to_address VARCHAR, asset_key VARCHAR NOT NULL,
          amount_raw VARCHAR NOT NULL, amount DECIMAL(38,18) NOT NULL, usd_value DOUBLE,
          status BOOLEAN DEFAULT TRUE);
        CREATE TABLE utxo_io (case_id VARCHAR NOT NULL, chain VARCHAR NOT NULL, tx_hash VARCHAR NOT NULL,
          direction VARCHAR NOT NULL, idx INTEGER NOT NULL, address VARCHAR, amount_sats BIGINT NOT NULL,
          script_type VARCHAR, prev_tx_hash VARCHAR, prev_vout INTEGER, spent_by_tx VARCHAR);
        CREATE TABLE bridge_events (case_id VARCHAR NOT NULL, bridge_event_id VARCHAR NOT NULL,
          bridge_name VARCHAR NOT NULL, bridge_version VARCHAR, protocol_msg_id VARCHAR, msg_id_kind VARCHAR,
          src_chain VARCHAR NOT NULL, src_tx_hash VARCHAR NOT NULL, src_log_index INTEGER,
          src_time TIMESTAMP NOT NULL, src_address VARCHAR, src_contract VARCHAR, src_asset_key VARCHAR,
          src_amount DECIMAL(38,18), src_usd DOUBLE, declared_dst_chain VARCHAR, declared_recipient VARCHAR,
          dst_chain VARCHAR, dst_tx_hash VARCHAR, dst_log_index INTEGER, dst_time TIMESTAMP, dst_address VARCHAR,
          dst_asset_key VARCHAR, dst_amount DECIMAL(38,18), dst_usd DOUBLE, relayer VARCHAR,
          match_method VARCHAR, match_confidence DOUBLE, status VARCHAR,
          PRIMARY KEY (case_id, bridge_event_id));
        CREATE TABLE labels (case_id VARCHAR NOT NULL, label_id VARCHAR NOT NULL, chain VARCHAR NOT NULL,
          address VARCHAR NOT NULL, label VARCHAR NOT NULL, entity VARCHAR, category VARCHAR NOT NULL,
          abuse VARCHAR, tag_type VARCHAR, source VARCHAR NOT NULL, confidence VARCHAR,
          confidence_level INTEGER, is_cluster_definer BOOLEAN DEFAULT FALSE, valid_from TIMESTAMP,
          valid_to TIMESTAMP, created_by VARCHAR, lastmod TIMESTAMP DEFAULT current_timestamp,
          PRIMARY KEY (case_id, label_id));
        CREATE TABLE anomaly_flags (flag_id VARCHAR PRIMARY KEY, case_id VARCHAR NOT NULL,
          flag_type VARCHAR NOT NULL, severity VARCHAR NOT NULL, score DOUBLE, subject_kind VARCHAR NOT NULL,
          chain VARCHAR, address VARCHAR, tx_hash VARCHAR, window_start TIMESTAMP, window_end TIMESTAMP,
          evidence JSON, params JSON, detector_version VARCHAR, status VARCHAR DEFAULT 'new',
          analyst_note VARCHAR, detected_at TIMESTAMP DEFAULT current_timestamp, updated_by VARCHAR);
        CREATE TABLE case_sessions (case_id VARCHAR NOT NULL, session_id VARCHAR PRIMARY KEY,
          "grant" JSON NOT NULL, created_by VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp,
          updated_at TIMESTAMP);
        CREATE TABLE case_session_seen (session_id VARCHAR NOT NULL, kind VARCHAR NOT NULL,
          key VARCHAR NOT NULL, first_at TIMESTAMP DEFAULT current_timestamp,
          PRIMARY KEY (session_id, kind, key));
        CREATE TABLE audit_log (audit_id VARCHAR PRIMARY KEY, at_time TIMESTAMP NOT NULL, actor VARCHAR NOT NULL,
          session_id VARCHAR, case_id VARCHAR, action VARCHAR NOT NULL, target_kind VARCHAR NOT NULL,
          target_id VARCHAR NOT NULL, before JSON, after JSON, reverted_by VARCHAR);
        CREATE TABLE notes (note_id VARCHAR PRIMARY KEY, case_id VARCHAR NOT NULL, target_kind VARCHAR NOT NULL,
          target_id VARCHAR NOT NULL, text VARCHAR NOT NULL, created_by VARCHAR,
          created_at TIMESTAMP DEFAULT current_timestamp);
        """,
    ),
    Migration(
        "0002_case_movement_identity",
        # Identity and merging of movements from several exports (loaders/merge.py):
        # an amount or its base units may be unknown (NULL, never assumed); NFTs carry
        # their token id; ``occurrence`` numbers identical movements within a tx for
        # sources without a log index. Each loaded file leaves its report, and every
        # field two sources disagree on is kept in ``load_conflicts``.
        """
        ALTER TABLE transfers ALTER COLUMN amount_raw DROP NOT NULL;
        ALTER TABLE transfers ALTER COLUMN amount DROP NOT NULL;
        ALTER TABLE transfers ADD COLUMN token_id VARCHAR;
        ALTER TABLE transfers ADD COLUMN occurrence INTEGER;
        CREATE TABLE load_reports (case_id VARCHAR NOT NULL, file VARCHAR NOT NULL, format VARCHAR NOT NULL,
          loaded_at TIMESTAMP DEFAULT current_timestamp, report JSON NOT NULL, sha256 VARCHAR);
        CREATE TABLE load_conflicts (case_id VARCHAR NOT NULL, file VARCHAR NOT NULL, line BIGINT,
          table_name VARCHAR NOT NULL, key VARCHAR NOT NULL, field VARCHAR NOT NULL, existing VARCHAR,
          incoming VARCHAR, loaded_at TIMESTAMP DEFAULT current_timestamp);
        """,
    ),
    Migration(
        "0003_label_library",
        # The label library (case/labels): attribution is about addresses, not one case, so
        # the workspace holds it once. Each label keeps its source, the source's version or
        # date, the source's own category beside the normalised one, validity and who added
        # it; ``label_sources`` keeps one row per file loaded, with its report.
        # ``case_labels`` is what every reader of labels uses: the case's own labels, the
        # analysts' labels made on other cases (``LBL-A-`` ids, from annotations) and the
        # library's labels, each for the addresses the case holds. No key index: the
        # loader de-duplicates on ``label_id`` with a join (a million-row load stays fast).
        """
        CREATE TABLE label_library (label_id VARCHAR NOT NULL, chain VARCHAR NOT NULL, address VARCHAR NOT NULL,
          label VARCHAR, entity VARCHAR, category VARCHAR, source_category VARCHAR, abuse VARCHAR,
          source VARCHAR NOT NULL, source_version VARCHAR, confidence VARCHAR, confidence_level INTEGER,
          valid_from TIMESTAMP, valid_to TIMESTAMP, program VARCHAR, asset VARCHAR, added_by VARCHAR,
          overrides BOOLEAN NOT NULL DEFAULT FALSE, file VARCHAR, line BIGINT, loaded_at TIMESTAMP NOT NULL,
          updated_at TIMESTAMP NOT NULL);
        CREATE TABLE label_sources (source VARCHAR NOT NULL, source_version VARCHAR, format VARCHAR NOT NULL,
          file VARCHAR NOT NULL, sha256 VARCHAR, loaded_at TIMESTAMP NOT NULL, loaded_by VARCHAR,
          report JSON NOT NULL);
        CREATE VIEW case_labels AS
        WITH case_addrs AS (SELECT case_id, chain, address FROM addresses
                            UNION SELECT case_id, chain, address FROM case_addresses)
        SELECT l.case_id, l.label_id, l.chain, l.address, l.label, l.entity, l.category,
               NULL::VARCHAR AS source_category, l.abuse, l.source, NULL::VARCHAR AS source_version, l.confidence,
               CASE WHEN l.confidence = 'override' THEN 100 ELSE l.confidence_level END AS confidence_level,
               coalesce(l.is_cluster_definer, FALSE) AS is_cluster_definer, l.valid_from, l.valid_to,
               l.created_by, l.lastmod, NULL::VARCHAR AS program, NULL::VARCHAR AS asset,
               l.confidence = 'override' AS overrides,
               CASE WHEN l.label_id LIKE 'LBL-A-%' THEN 'analyst' ELSE 'case' END AS origin,
               l.case_id AS from_case
        FROM labels l
        UNION ALL
        SELECT a.case_id, l.label_id, l.chain, l.address, l.label, l.entity, l.category, NULL, l.abuse, l.source,
               NULL, l.confidence,
               CASE WHEN l.confidence = 'override' THEN 100 ELSE l.confidence_level END,
               coalesce(l.is_cluster_definer, FALSE), l.valid_from, l.valid_to, l.created_by, l.lastmod, NULL, NULL,
               l.confidence = 'override', 'analyst', l.case_id
        FROM labels l JOIN case_addrs a ON a.chain = l.chain AND a.address = l.address AND a.case_id <> l.case_id
        WHERE l.label_id LIKE 'LBL-A-%'
        UNION ALL
        SELECT a.case_id, b.label_id, b.chain, b.address, coalesce(b.label, b.entity, b.source_category, b.source),
               b.entity, b.category, b.source_category, b.abuse, b.source, b.source_version, b.confidence,
               CASE WHEN b.overrides THEN 100 ELSE b.confidence_level END, FALSE, b.valid_from, b.valid_to,
               b.added_by, b.updated_at, b.program, b.asset, b.overrides, 'library', NULL
        FROM label_library b JOIN case_addrs a ON a.chain = b.chain AND a.address = b.address;
        """,
    ),
    Migration(
        "0004_case_unknown_block_time",
        # A movement whose block time no file gave yet is evidence all the same: it is held with an
        # unknown time (NULL) and gains it when its block or transaction arrives (loaders/merge.py).
        """
        ALTER TABLE transfers ALTER COLUMN block_time DROP NOT NULL;
        ALTER TABLE transactions ALTER COLUMN block_time DROP NOT NULL;
        """,
    ),
)

# The evidence tables a case folder holds, in load order, with their natural keys.
FOLDER_TABLES: dict[str, tuple[str, ...]] = {
    "assets": ("asset_key",),
    "prices": ("canonical_asset", "ts_hour"),
    "transactions": ("chain", "tx_hash"),
    "transfers": ("transfer_id",),
    "utxo_io": ("chain", "tx_hash", "direction", "idx"),
    "bridge_events": ("bridge_event_id",),
    "labels": ("label_id",),
}
# Global (not per case) tables among them.
GLOBAL_TABLES = frozenset({"assets", "prices"})

# Tables the read-only SQL tool may read.
SQL_TABLES = frozenset(
    {
        "chains",
        "assets",
        "prices",
        "cases",
        "addresses",
        "case_addresses",
        "transactions",
        "transfers",
        "utxo_io",
        "bridge_events",
        "labels",
        "case_labels",
        "anomaly_flags",
        "notes",
    }
)

FLAG_TYPES = (
    "peel_chain",
    "mixer_exposure",
    "mixer_bulk_deposit",
    "chain_hopping",
    "structuring",
    "repeated_amount",
    "dusting",
    "address_poisoning",
    "fresh_address_funding",
    "pass_through",
    "sanctions_exposure",
)
SEVERITIES = ("info", "low", "medium", "high", "critical")
