from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.taxonomy import normalise_category
from tahrix_lab.case.workspace import Workspace, sample_case_dir


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return sample_case_dir()


@pytest.fixture(scope="session")
def ground_truth(sample_dir: Path) -> dict[str, Any]:
    return json.loads((sample_dir / "ground_truth.json").read_text())


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A workspace with the sample case loaded and detected, shared by read-only tests."""
    ws = Workspace(tmp_path_factory.mktemp("ws") / "shared.duckdb")
    ws.load_sample_case()
    yield ws
    ws.close()


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """A fresh workspace with the sample case, for tests that write."""
    w = Workspace(tmp_path / "t.duckdb")
    w.load_sample_case()
    yield w
    w.close()


class CaseBuilder:
    """Writes a small case straight into the tables, for fixtures the tests build themselves.

    ``transfer(frm, to, usd, minute, ...)`` adds one movement (its own transaction unless ``tx`` is
    given); ``bridge(...)`` a bridge event; ``label``/``role`` what the case knows about an address.
    ``done()`` writes it and rebuilds the address profiles.
    """

    T0 = datetime(2024, 3, 1)  # noqa: DTZ001 - the case tables hold naive UTC

    def __init__(self, db: CaseDB, case_id: str) -> None:
        self.db, self.case_id = db, case_id
        self.transfers: list[dict[str, Any]] = []
        self.bridges: list[dict[str, Any]] = []
        self.labels: list[dict[str, Any]] = []
        self.roles: list[tuple[str, str, str]] = []
        self.txs: list[dict[str, Any]] = []

    def transfer(self, frm: str | None, to: str | None, usd: float | None, minute: float, *, chain: str = "ethereum",
                 tx: str | None = None, status: bool | None = True, amount: float | None = None,
                 asset: str = "ethereum:native", raw: str | None = None) -> str:  # fmt: skip
        n = len(self.transfers)
        tx = tx or f"0x{self.case_id.lower()}{n:06d}"
        tid = f"{chain}:{tx}:native:{n}"
        amt = amount if amount is not None else (usd / 1000 if usd is not None else 1.0)
        self.transfers.append({
            "transfer_id": tid, "chain": chain, "tx_hash": tx, "block_time": self.T0 + timedelta(minutes=minute),
            "kind": "native", "from_address": frm, "to_address": to, "asset_key": asset,
            "amount_raw": raw if raw is not None else str(int(amt * 10**6)), "amount": amt, "usd_value": usd,
            "status": status})  # fmt: skip
        return tid

    def bridge(self, bid: str, src_chain: str, src_tx: str, src_addr: str, minute: float, dst_chain: str | None = None,
               dst_tx: str | None = None, dst_addr: str | None = None, dst_minute: float | None = None,
               contract: str | None = None) -> None:  # fmt: skip
        self.bridges.append({
            "bridge_event_id": bid, "bridge_name": "testbridge", "src_chain": src_chain, "src_tx_hash": src_tx,
            "src_time": self.T0 + timedelta(minutes=minute), "src_address": src_addr, "src_contract": contract,
            "dst_chain": dst_chain, "dst_tx_hash": dst_tx, "dst_address": dst_addr,
            "dst_time": None if dst_minute is None else self.T0 + timedelta(minutes=dst_minute),
            "status": "matched" if dst_tx else "pending", "declared_dst_chain": dst_chain})  # fmt: skip

    def label(
        self, address: str, category: str, *, chain: str = "ethereum", entity: str | None = None
    ) -> None:
        # the loaders normalise categories on load; so does this (the raw spelling stays in the label text)
        self.labels.append({"label_id": f"L{len(self.labels)}", "chain": chain, "address": address,
                            "label": f"{category} {address[:8]}", "entity": entity,
                            "category": normalise_category(category)[0],
                            "source": "test"})  # fmt: skip

    def role(self, address: str, role: str, *, chain: str = "ethereum") -> None:
        self.roles.append((chain, address, role))

    def tx(
        self, tx_hash: str, frm: str, to: str, minute: float, *, chain: str = "ethereum", nonce: int = 0
    ) -> None:
        self.txs.append({"chain": chain, "tx_hash": tx_hash, "block_time": self.T0 + timedelta(minutes=minute),
                         "from_address": frm, "to_address": to, "nonce": nonce, "status": True})  # fmt: skip

    def done(self) -> str:
        db, cid = self.db, self.case_id
        with db.write() as cur:
            cur.execute("INSERT INTO cases (case_id, title) VALUES (?, ?)", [cid, f"test {cid}"])
            for table, rows in (("transfers", self.transfers), ("bridge_events", self.bridges),
                                ("labels", self.labels), ("transactions", self.txs)):  # fmt: skip
                for r in rows:
                    cols = ["case_id", *r]
                    cur.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                [cid, *r.values()])  # fmt: skip
            for chain, address, role in self.roles:
                cur.execute("INSERT INTO case_addresses (case_id, chain, address, role) VALUES (?, ?, ?, ?)",
                            [cid, chain, address, role])  # fmt: skip
            db.refresh_addresses(cur, cid)
        return cid


@pytest.fixture(scope="module")
def case_db() -> Iterator[CaseDB]:
    conn = duckdb.connect(":memory:")
    yield CaseDB(conn)
    conn.close()


@pytest.fixture(scope="module")
def build(case_db: CaseDB) -> Callable[[], CaseBuilder]:
    counter = itertools.count()
    return lambda: CaseBuilder(case_db, f"T{next(counter):05d}")
