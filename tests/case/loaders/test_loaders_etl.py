"""ethereum-etl output as it really comes: a folder of its files loads as one set."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from export_fixtures import ERC20_HEADER, NINE, T0, USDT, a, erc20_row, h, write_csv

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.loaders import load_etl_csv, load_file, load_path, recognise
from tahrix_lab.case.loaders.etl import TRANSFER_TOPIC

UNKNOWN = "0x" + "5" * 40  # no tokens.csv row, not in the shipped table


def etl_folder(root: Path) -> Path:
    """ethereum-etl's own CSVs (export_blocks_and_transactions, export_token_transfers, export_traces,
    export_receipts_and_logs, export_tokens, export_contracts): no block_timestamp, no receipt_status."""
    f = root / "etl"
    f.mkdir()
    (f / "blocks.csv").write_text(
        "number,hash,parent_hash,nonce,sha3_uncles,logs_bloom,transactions_root,state_root,receipts_root,miner,"
        "difficulty,total_difficulty,size,extra_data,gas_limit,gas_used,timestamp,transaction_count,base_fee_per_gas\n"
        + "".join(f"{100 + i},{h(900 + i)},{h(899 + i)},0x0,0x,0x,0x,0x,0x,{a(7)},0,0,1000,0x,30000000,21000,{T0 + 12 * i},2,7\n"
                  for i in range(3))
    )  # fmt: skip
    (f / "transactions.csv").write_text(
        "hash,nonce,block_hash,block_number,transaction_index,from_address,to_address,value,gas,gas_price,input,"
        "max_fee_per_gas,max_priority_fee_per_gas,transaction_type\n"
        f"{h(1)},0,{h(900)},100,0,{a(1)},{a(2)},1500000000000000000,21000,20000000000,0x,,,0\n"
        f"{h(2)},1,{h(901)},101,0,{a(1)},{USDT},0,60000,20000000000,0xa9059cbb0000,,,2\n"
        f"{h(3)},2,{h(902)},102,0,{a(1)},{a(3)},7,21000,20000000000,0x,,,0\n"
    )
    (f / "receipts.csv").write_text(
        "transaction_hash,transaction_index,block_hash,block_number,cumulative_gas_used,gas_used,contract_address,"
        "root,status,effective_gas_price\n"
        f"{h(1)},0,{h(900)},100,21000,21000,,,1,10000000000\n"
        f"{h(2)},0,{h(901)},101,50000,50000,,,1,10000000000\n"
    )  # h(3) has no receipt: its status stays unknown
    (f / "token_transfers.csv").write_text(
        "token_address,from_address,to_address,value,transaction_hash,log_index,block_number\n"
        f"{USDT},{a(1)},{a(4)},2500000,{h(2)},7,101\n"
        f"{NINE},{a(1)},{a(4)},1123456789,{h(2)},8,101\n"
        f"{UNKNOWN},{a(1)},{a(4)},123456789012345678901234567890,{h(2)},9,101\n"
    )
    (f / "tokens.csv").write_text(
        f"address,symbol,name,decimals,total_supply,block_number\n{NINE},NINE,Nine,9,10,1\n"
    )
    (f / "traces.csv").write_text(
        "block_number,transaction_hash,transaction_index,from_address,to_address,value,input,output,trace_type,"
        "call_type,reward_type,gas,gas_used,subtraces,trace_address,error,status,trace_id\n"
        f"101,{h(2)},0,{a(1)},{USDT},0,0x,0x,call,call,,60000,50000,2,,,1,call_{h(2)}\n"
        f"101,{h(2)},0,{USDT},{a(5)},300000000000000000,0x,0x,call,call,,1000,900,0,0,,1,call_{h(2)}_0\n"
        f"101,{h(2)},0,{USDT},{a(6)},5,0x,0x,call,delegatecall,,1000,900,0,1,,1,call_{h(2)}_1\n"
        f'101,{h(2)},0,{USDT},{a(6)},9,0x,0x,call,call,,1000,900,0,"1,0",Reverted,0,call_{h(2)}_1_0\n'
        f"101,,,,{a(7)},2000000000000000000,,,reward,,block,,,0,,,1,reward_101\n"
    )
    (f / "logs.csv").write_text(
        "log_index,transaction_hash,transaction_index,block_hash,block_number,address,data,topics\n"
        f'7,{h(2)},0,{h(901)},101,{USDT},0x{2500000:064x},"{TRANSFER_TOPIC},0x{a(1)[2:]:0>64},0x{a(4)[2:]:0>64}"\n'
    )
    (f / "contracts.csv").write_text(
        f"address,bytecode,function_sighashes,is_erc20,is_erc721,block_number\n{USDT},0x60,,True,False,1\n"
    )
    return f


def test_every_etl_file_is_recognised(tmp_path: Path) -> None:
    folder = etl_folder(tmp_path)
    kinds = {recognise(p)[1] for p in folder.iterdir()}
    assert kinds == {
        "blocks",
        "transactions",
        "receipts",
        "token_transfers",
        "tokens",
        "traces",
        "logs",
        "contracts",
    }


def test_a_folder_of_etl_outputs_loads_as_one_set(db: CaseDB, tmp_path: Path) -> None:
    report = load_path(db, etl_folder(tmp_path), case_id="C")
    by = {Path(f.file).name: f for f in report.files}
    tx = {r["tx_hash"]: r for r in db.rows("SELECT * FROM transactions WHERE case_id = 'C'")}
    assert tx[h(1)]["block_time"].timestamp() == T0 and tx[h(1)]["status"] is True
    assert tx[h(1)]["fee_raw"] == str(21000 * 10_000_000_000)  # effective gas price from receipts
    assert tx[h(3)]["status"] is None  # no receipt: unknown, not success
    assert any("unknown (NULL)" in n for n in by["transactions.csv"].notes)
    tr = {r["transfer_id"]: r for r in db.rows("SELECT * FROM transfers WHERE case_id = 'C'")}
    assert tr[f"ethereum:{h(1)}:native:0"]["amount"] == Decimal("1.5")
    assert tr[f"ethereum:{h(2)}:token:7"]["amount"] == Decimal("2.5")  # USDT: shipped table, 6 decimals
    assert tr[f"ethereum:{h(2)}:token:8"]["amount"] == Decimal("1.123456789")  # tokens.csv: 9 decimals
    unknown = tr[f"ethereum:{h(2)}:token:9"]
    assert unknown["amount"] is None and unknown["amount_raw"] == "123456789012345678901234567890"
    assert by["token_transfers.csv"].unknown_decimals == 1
    # traces: only the value-moving sub-calls; the reverted one is kept and marked failed
    internal = {k: v for k, v in tr.items() if v["kind"] == "internal"}
    assert set(internal) == {f"ethereum:{h(2)}:internal:0", f"ethereum:{h(2)}:internal:1,0"}
    assert internal[f"ethereum:{h(2)}:internal:1,0"]["status"] is False
    assert by["traces.csv"].skipped == {
        "block or uncle reward (no transaction)": 1,
        "top-level call: the transaction's own value (loaded from transactions)": 1,
        "delegate/static call: moves no value of its own": 1,
    }
    assert by["logs.csv"].skipped == {"token_transfers.csv of the same set carries these transfers": 1}
    assert db.scalar("SELECT decimals FROM assets WHERE asset_key = ?", [f"ethereum:{NINE}"]) == 9
    again = load_path(db, tmp_path / "etl", case_id="C")
    assert sum(f.inserted for f in again.files) == 0 and sum(f.conflicting for f in again.files) == 0


def test_transfers_from_logs_when_no_token_transfers_file(db: CaseDB, tmp_path: Path) -> None:
    folder = etl_folder(tmp_path)
    (folder / "token_transfers.csv").unlink()
    load_path(db, folder, case_id="C")
    row = db.one("SELECT * FROM transfers WHERE kind = 'token'")
    assert (row["transfer_id"], row["from_address"], row["to_address"], row["amount_raw"]) == (
        f"ethereum:{h(2)}:token:7", a(1), a(4), "2500000")  # fmt: skip


def test_token_transfers_alone_are_held_with_unknown_times_until_their_blocks_arrive(
    db: CaseDB, tmp_path: Path
) -> None:
    folder = etl_folder(tmp_path)
    report = load_etl_csv(db, "C", folder / "token_transfers.csv")  # held, never refused
    assert report.files[0].inserted == 3 and "unknown time" in " ".join(report.files[0].notes)
    times = db.cursor().execute("SELECT block_time FROM transfers WHERE case_id = 'C'").fetchall()
    assert times == [(None,)] * 3
    filled = load_etl_csv(db, "C", folder / "blocks.csv")
    assert "gained" in " ".join(filled.files[0].notes)
    got = (
        db.cursor().execute("SELECT DISTINCT epoch(block_time) FROM transfers WHERE case_id = 'C'").fetchall()
    )
    assert got == [(T0 + 12,)]  # block 101


def test_token_transfers_use_block_times_the_case_already_holds(db: CaseDB, tmp_path: Path) -> None:
    folder = etl_folder(tmp_path)
    load_path(db, folder / "transactions.csv", case_id="C")  # without blocks.csv: times unknown
    load_etl_csv(db, "C", folder / "blocks.csv")  # the blocks arrive: the transactions gain their times
    assert db.scalar("SELECT count(*) FROM transactions WHERE case_id = 'C' AND block_time IS NULL") == 0
    other = tmp_path / "more"
    other.mkdir()
    (other / "token_transfers.csv").write_text(  # another transaction of block 101, loaded alone afterwards
        "token_address,from_address,to_address,value,transaction_hash,log_index,block_number\n"
        f"{USDT},{a(8)},{a(9)},700000,{h(77)},3,101\n"
    )
    report = load_etl_csv(db, "C", other / "token_transfers.csv")
    assert not [n for n in report.files[0].notes if "unknown time" in n]
    row = db.one("SELECT epoch(block_time) AS t FROM transfers WHERE case_id = 'C' AND tx_hash = ?", [h(77)])
    assert row == {"t": T0 + 12}


def test_bigquery_form_with_timestamps_loads_alone(db: CaseDB, tmp_path: Path) -> None:
    tok = tmp_path / "bq_token_transfers.csv"
    tok.write_text(
        "token_address,from_address,to_address,value,transaction_hash,log_index,block_timestamp,block_number,block_hash\n"
        f"{USDT},{a(1)},{a(4)},2500000,{h(2)},7,2024-03-12 02:14:00 UTC,101,{h(901)}\n"
    )
    txs = tmp_path / "bq_transactions.csv"
    txs.write_text(
        "hash,nonce,transaction_index,from_address,to_address,value,gas,gas_price,input,receipt_gas_used,"
        "receipt_status,block_timestamp,block_number\n"
        f"{h(2)},0,3,{a(1).upper().replace('0X', '0x')},{USDT},0,60000,20000000000,0xa9059cbb00,50000,0,"
        "2024-03-12 02:14:00 UTC,101\n"
    )
    load_file(db, "C", tok)
    report = load_file(db, "C", txs)
    t = db.one("SELECT * FROM transactions")
    assert t["from_address"] == a(1) and t["method_selector"] == "0xa9059cbb" and t["fee"] is not None
    assert db.one("SELECT amount FROM transfers")["amount"] == Decimal("2.5")
    # a token Transfer log means the tx succeeded; this file says it failed: reported, not overwritten
    (c,) = report.files[0].conflicts
    assert (c.table, c.field, c.existing, c.incoming, c.line) == (
        "transactions",
        "status",
        "true",
        "false",
        2,
    )
    assert t["status"] is True
    stored = db.one("SELECT table_name, field, existing, incoming FROM load_conflicts WHERE case_id = 'C'")
    assert stored == {
        "table_name": "transactions",
        "field": "status",
        "existing": "true",
        "incoming": "false",
    }
    assert "conflict in transactions" in report.table()


@pytest.mark.parametrize("etl_first", [True, False])
def test_etl_and_etherscan_rows_of_one_transfer_merge(db: CaseDB, tmp_path: Path, etl_first: bool) -> None:
    """Etherscan's token export has no log index; ethereum-etl's has: one movement, in either order."""
    tok = tmp_path / "bq.csv"
    tok.write_text(
        "token_address,from_address,to_address,value,transaction_hash,log_index,block_timestamp,block_number\n"
        f"{USDT},{a(1)},{a(2)},1000000,{h(1)},3,{T0 + 12},19000001\n"
        f"{USDT},{a(1)},{a(2)},1000000,{h(1)},4,{T0 + 12},19000001\n"
    )
    es = write_csv(tmp_path / "es.csv", ERC20_HEADER, [erc20_row(1, a(1), a(2), "1", "$1.00")] * 2)
    for f in (tok, es) if etl_first else (es, tok):
        load_file(db, "C", f)
    rows = db.rows("SELECT transfer_id, log_index, usd_value FROM transfers ORDER BY transfer_id")
    assert [r["transfer_id"] for r in rows] == [f"ethereum:{h(1)}:token:3", f"ethereum:{h(1)}:token:4"]
    assert [r["usd_value"] for r in rows] == [1.0, 1.0]  # the price only Etherscan gave
