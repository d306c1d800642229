"""A lookup index for checking citations against a big case without scanning it per citation.

At a million transfers each scan of a hash or amount column costs about a
second on a busy machine, and an answer needs a dozen. This index keeps, per
case, sorted numpy arrays (the pattern of ``tracing_index``): 64-bit hashes of
the tx hashes of ``transactions`` and ``transfers`` (whole; first 16 and last
16 characters, for near misses; first 6, for shortened forms), and the transfers' amounts, USD values and
times, and the transactions' block numbers, each with its row id. A look-up is
a binary search plus one fetch by row id; the fetch re-reads the real values,
so a hash collision or a stale entry adds nothing. Built on first use, rebuilt
when the case's transfers or transactions change (count or highest row id).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tahrix_lab.case.db import CaseDB

HALF = 16  # a value one character off keeps its first or its last 16 characters
SHORT = 6  # the head of a shortened hash, "0x3373…": hashes are indexed by their first 6 characters too
TABLES = ("transactions", "transfers")
_LOCK = threading.Lock()
_CACHE: weakref.WeakKeyDictionary[CaseDB, dict[str, CitationIndex]] = weakref.WeakKeyDictionary()


@dataclass
class Sorted:
    """Sorted ``keys`` with the ``rowids`` (and ``tables``: 0 transactions, 1 transfers) they come from."""

    keys: np.ndarray[Any, Any]
    rowids: np.ndarray[Any, Any]
    tables: np.ndarray[Any, Any] | None = None
    extra: np.ndarray[Any, Any] | None = None  # amounts: the asset code of each row

    def equal(self, wanted: np.ndarray[Any, Any]) -> list[tuple[int, int, int]]:
        """(position in ``wanted``, table, rowid) of every entry whose key is in ``wanted``."""
        lo = np.searchsorted(self.keys, wanted, "left")
        hi = np.searchsorted(self.keys, wanted, "right")
        out = []
        for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            for j in range(a, min(b, a + 50)):  # a key shared by more rows: 50 are enough to show one
                out.append((i, int(self.tables[j]) if self.tables is not None else 0, int(self.rowids[j])))
        return out

    def within(self, lo: float, hi: float, limit: int = 200_000) -> np.ndarray[Any, Any]:
        """Positions of the keys in [lo, hi]."""
        a, b = np.searchsorted(self.keys, lo, "left"), np.searchsorted(self.keys, hi, "right")
        return np.arange(a, min(b, a + limit))


@dataclass
class CitationIndex:
    fingerprint: tuple[Any, ...]
    parts: dict[str, Sorted] = field(default_factory=dict)
    assets: dict[str, int] = field(default_factory=dict)  # asset_key -> code in the amount index


def fingerprint(db: CaseDB, case_id: str) -> tuple[Any, ...]:
    row = db.one(
        "SELECT (SELECT count(*) FROM transfers WHERE case_id = $1) AS a, (SELECT max(rowid) FROM transfers "
        "WHERE case_id = $1) AS b, (SELECT count(*) FROM transactions WHERE case_id = $1) AS c, "
        "(SELECT max(rowid) FROM transactions WHERE case_id = $1) AS d",
        [case_id],
    )
    return tuple((row or {}).values())


_CURRENT: contextvars.ContextVar[tuple[CaseDB, str, CitationIndex] | None] = contextvars.ContextVar(
    "citation_index", default=None
)


@contextlib.contextmanager
def one_check(db: CaseDB, case_id: str) -> Iterator[None]:
    """Within the block, the index is checked against the case once (one check of an answer)."""
    token = _CURRENT.set((db, case_id, citation_index(db, case_id)))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def citation_index(db: CaseDB, case_id: str) -> CitationIndex:
    current = _CURRENT.get()
    if current is not None and current[0] is db and current[1] == case_id:
        return current[2]
    fp = fingerprint(db, case_id)
    with _LOCK:
        found = _CACHE.setdefault(db, {}).get(case_id)
    if found is not None and found.fingerprint == fp:
        return found
    index = CitationIndex(fp)
    cur = db.cursor()
    parts = (("tx", "tx_hash"), ("head", f"left(tx_hash, {HALF})"), ("tail", f"right(tx_hash, {HALF})"),
             ("short", f"left(tx_hash, {SHORT})"))  # fmt: skip
    for name, expr in parts:
        a = cur.execute(
            f"SELECT hash({expr}) AS k, rowid AS r, 0::TINYINT AS t FROM transactions WHERE case_id = $1 UNION ALL "
            f"SELECT hash({expr}), rowid, 1::TINYINT FROM transfers WHERE case_id = $1 ORDER BY k",
            [case_id],
        ).fetchnumpy()
        index.parts[name] = Sorted(np.asarray(a["k"]), np.asarray(a["r"]), np.asarray(a["t"]))
    codes = cur.execute(
        "SELECT DISTINCT asset_key FROM transfers WHERE case_id = ? ORDER BY 1", [case_id]
    ).fetchall()
    index.assets = {r[0]: i for i, r in enumerate(codes)}
    a = cur.execute(
        "SELECT t.amount::DOUBLE AS k, t.rowid AS r, list_position($2::VARCHAR[], t.asset_key)::INTEGER AS x "
        "FROM transfers t WHERE t.case_id = $1 AND t.amount IS NOT NULL ORDER BY k",
        [case_id, list(index.assets)],
    ).fetchnumpy()
    index.parts["amount"] = Sorted(np.asarray(a["k"]), np.asarray(a["r"]), extra=np.asarray(a["x"]) - 1)
    for name, sql in (
        ("usd", "SELECT usd_value AS k, rowid AS r FROM transfers WHERE case_id = $1 AND usd_value IS NOT NULL ORDER BY k"),
        ("time", "SELECT epoch(block_time)::DOUBLE AS k, rowid AS r FROM transfers WHERE case_id = $1 ORDER BY k"),
        ("block", "SELECT block_number::DOUBLE AS k, rowid AS r FROM transactions WHERE case_id = $1 "
                  "AND block_number IS NOT NULL ORDER BY k"),
    ):  # fmt: skip
        a = cur.execute(sql, [case_id]).fetchnumpy()
        index.parts[name] = Sorted(np.asarray(a["k"], dtype=np.float64), np.asarray(a["r"]))
    with _LOCK:
        _CACHE.setdefault(db, {})[case_id] = index
    return index


def hashes(db: CaseDB, values: list[str]) -> np.ndarray[Any, Any]:
    """DuckDB's ``hash`` of each value (the same function the index was built with)."""
    found = db.cursor().execute("SELECT hash(unnest(?::VARCHAR[])) AS h", [values]).fetchnumpy()
    return np.asarray(found["h"], dtype=np.uint64)


def fetch(db: CaseDB, case_id: str, table: str, cols: str, rowids: list[int]) -> list[dict[str, Any]]:
    """Rows of ``table`` by row id, read fresh (the caller re-checks the values)."""
    if not rowids:
        return []
    return db.rows(
        f"SELECT {cols} FROM {table} t WHERE t.rowid = ANY(?::BIGINT[]) AND t.case_id = ?",
        [sorted(set(rowids)), case_id],
    )
