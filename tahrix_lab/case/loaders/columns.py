"""The columns of each case-folder table: (SQL type, required, how to normalise).

``kind``: ``addr`` / ``hash`` (lower-cased on EVM chains; ``addr:src_chain`` names
the chain column), ``key`` (``<chain>:…`` keys, lower-cased on EVM chains) or ``""``.
"""

from __future__ import annotations

C = tuple[str, bool, str]
TABLE_COLUMNS: dict[str, dict[str, C]] = {
    "assets": {
        "asset_key": ("VARCHAR", True, "key"), "chain": ("VARCHAR", True, ""),
        "token_address": ("VARCHAR", False, "addr"), "symbol": ("VARCHAR", False, ""),
        "name": ("VARCHAR", False, ""), "decimals": ("INTEGER", False, ""), "standard": ("VARCHAR", False, ""),
        "canonical_asset": ("VARCHAR", False, ""), "is_spam": ("BOOLEAN", False, ""),
    },
    "prices": {
        "canonical_asset": ("VARCHAR", True, ""), "ts_hour": ("TIMESTAMP", True, ""),
        "usd": ("DOUBLE", True, ""), "source": ("VARCHAR", False, ""),
    },
    "transactions": {
        "chain": ("VARCHAR", True, ""), "tx_hash": ("VARCHAR", True, "hash"), "block_number": ("BIGINT", False, ""),
        "block_time": ("TIMESTAMP", True, ""), "tx_index": ("INTEGER", False, ""),
        "from_address": ("VARCHAR", False, "addr"), "to_address": ("VARCHAR", False, "addr"),
        "nonce": ("BIGINT", False, ""), "value_raw": ("VARCHAR", False, ""), "value": ("DECIMAL(38,18)", False, ""),
        "fee_raw": ("VARCHAR", False, ""), "fee": ("DECIMAL(38,18)", False, ""), "fee_usd": ("DOUBLE", False, ""),
        "status": ("BOOLEAN", False, ""), "method_selector": ("VARCHAR", False, ""),
        "method_name": ("VARCHAR", False, ""), "memo": ("VARCHAR", False, ""), "source": ("VARCHAR", False, ""),
    },
    "transfers": {
        "transfer_id": ("VARCHAR", True, "key"), "chain": ("VARCHAR", True, ""), "tx_hash": ("VARCHAR", True, "hash"),
        "block_time": ("TIMESTAMP", True, ""), "kind": ("VARCHAR", True, ""), "log_index": ("INTEGER", False, ""),
        "trace_address": ("VARCHAR", False, ""), "from_address": ("VARCHAR", False, "addr"),
        "to_address": ("VARCHAR", False, "addr"), "asset_key": ("VARCHAR", True, "key"),
        "amount_raw": ("VARCHAR", True, ""), "amount": ("DECIMAL(38,18)", True, ""),
        "usd_value": ("DOUBLE", False, ""), "status": ("BOOLEAN", False, ""),
        "token_id": ("VARCHAR", False, ""),
    },
    "utxo_io": {
        "chain": ("VARCHAR", True, ""), "tx_hash": ("VARCHAR", True, "hash"), "direction": ("VARCHAR", True, ""),
        "idx": ("INTEGER", True, ""), "address": ("VARCHAR", False, "addr"), "amount_sats": ("BIGINT", True, ""),
        "script_type": ("VARCHAR", False, ""), "prev_tx_hash": ("VARCHAR", False, "hash"),
        "prev_vout": ("INTEGER", False, ""), "spent_by_tx": ("VARCHAR", False, "hash"),
    },
    "bridge_events": {
        "bridge_event_id": ("VARCHAR", True, ""), "bridge_name": ("VARCHAR", True, ""),
        "bridge_version": ("VARCHAR", False, ""), "protocol_msg_id": ("VARCHAR", False, ""),
        "msg_id_kind": ("VARCHAR", False, ""), "src_chain": ("VARCHAR", True, ""),
        "src_tx_hash": ("VARCHAR", True, "hash:src_chain"), "src_log_index": ("INTEGER", False, ""),
        "src_time": ("TIMESTAMP", True, ""), "src_address": ("VARCHAR", False, "addr:src_chain"),
        "src_contract": ("VARCHAR", False, "addr:src_chain"), "src_asset_key": ("VARCHAR", False, ""),
        "src_amount": ("DECIMAL(38,18)", False, ""), "src_usd": ("DOUBLE", False, ""),
        "declared_dst_chain": ("VARCHAR", False, ""), "declared_recipient": ("VARCHAR", False, "addr:declared_dst_chain"),
        "dst_chain": ("VARCHAR", False, ""), "dst_tx_hash": ("VARCHAR", False, "hash:dst_chain"),
        "dst_log_index": ("INTEGER", False, ""), "dst_time": ("TIMESTAMP", False, ""),
        "dst_address": ("VARCHAR", False, "addr:dst_chain"), "dst_asset_key": ("VARCHAR", False, ""),
        "dst_amount": ("DECIMAL(38,18)", False, ""), "dst_usd": ("DOUBLE", False, ""),
        "relayer": ("VARCHAR", False, ""), "match_method": ("VARCHAR", False, ""),
        "match_confidence": ("DOUBLE", False, ""), "status": ("VARCHAR", False, ""),
    },
    "labels": {
        "label_id": ("VARCHAR", True, ""), "chain": ("VARCHAR", True, ""), "address": ("VARCHAR", True, "addr"),
        "label": ("VARCHAR", True, ""), "entity": ("VARCHAR", False, ""), "category": ("VARCHAR", True, ""),
        "abuse": ("VARCHAR", False, ""), "tag_type": ("VARCHAR", False, ""), "source": ("VARCHAR", True, ""),
        "confidence": ("VARCHAR", False, ""), "confidence_level": ("INTEGER", False, ""),
        "is_cluster_definer": ("BOOLEAN", False, ""), "valid_from": ("TIMESTAMP", False, ""),
        "valid_to": ("TIMESTAMP", False, ""), "created_by": ("VARCHAR", False, ""),
    },
}  # fmt: skip
