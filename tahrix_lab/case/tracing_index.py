"""A lookup index for the tracer: which transfer rows a set of addresses (or tx hashes) touches.

A hop is a lookup of the frontier's movements. Scanning the transfers table
for them costs a full column scan per hop (hundreds of ms at a million
rows); this index keeps, per case and column, the sorted 64-bit hashes of
``chain|address`` (or the tx hash) with their row ids, in numpy arrays
(16 bytes a row), so a hop is a binary search plus one fetch by row id.

It is built on first use and rebuilt when the case's transfers change
(count or highest row id). Lookups can only miss, never invent: the fetch
re-checks the real column values, so a hash collision or a stale entry
adds nothing, and every fetched row is read fresh (status, USD).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from tahrix_lab.case.db import CaseDB

COLUMNS = ("from_address", "to_address", "tx_hash")


@dataclass
class _Sorted:
    fingerprint: tuple[Any, ...]
    hashes: np.ndarray[Any, Any]
    rowids: np.ndarray[Any, Any]


_LOCK = threading.Lock()
_CACHE: weakref.WeakKeyDictionary[CaseDB, dict[tuple[str, str], _Sorted]] = weakref.WeakKeyDictionary()


def _key_sql(column: str) -> str:
    return "tx_hash" if column == "tx_hash" else f"chain || '|' || {column}"


class TraceIndex:
    """The index for one trace: the fingerprint is read once, sorted columns are built lazily."""

    def __init__(self, db: CaseDB, case_id: str) -> None:
        self.db, self.case_id = db, case_id
        row = (
            db.cursor()
            .execute("SELECT count(*), max(rowid) FROM transfers WHERE case_id = ?", [case_id])
            .fetchone()
        )
        self.fingerprint = tuple(row or ())

    def _sorted(self, column: str) -> _Sorted:
        with _LOCK:
            entry = _CACHE.setdefault(self.db, {}).get((self.case_id, column))
        if entry is not None and entry.fingerprint == self.fingerprint:
            return entry
        arrays = (
            self.db.cursor()
            .execute(
                f"SELECT hash({_key_sql(column)}) AS h, rowid AS r FROM transfers "
                f"WHERE case_id = ? AND {column} IS NOT NULL ORDER BY h",
                [self.case_id],
            )
            .fetchnumpy()
        )
        entry = _Sorted(self.fingerprint, np.asarray(arrays["h"]), np.asarray(arrays["r"]))
        with _LOCK:
            _CACHE.setdefault(self.db, {})[(self.case_id, column)] = entry
        return entry

    def rowids(self, column: str, keys: list[str]) -> list[int]:
        """Row ids whose ``column`` may equal one of ``keys`` (``chain|address``, or a tx hash)."""
        if not keys:
            return []
        entry = self._sorted(column)
        found = self.db.cursor().execute("SELECT hash(unnest(?::VARCHAR[])) AS h", [keys]).fetchnumpy()
        hashes = np.asarray(found["h"], dtype=entry.hashes.dtype)
        lo = np.searchsorted(entry.hashes, hashes, "left")
        hi = np.searchsorted(entry.hashes, hashes, "right")
        parts = [entry.rowids[a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True) if b > a]
        return sorted(set(np.concatenate(parts).tolist())) if parts else []

    def fetch(
        self, column: str, keys: list[str], cols: str, where: str = "TRUE", params: list[Any] | None = None
    ) -> list[dict[str, Any]]:
        """The rows ``rowids`` names, read fresh, with ``where`` applied (the caller re-checks the keys)."""
        ids = self.rowids(column, keys)
        if not ids:
            return []
        return self.db.rows(
            f"SELECT {cols} FROM transfers t WHERE t.rowid = ANY(?::BIGINT[]) AND t.case_id = ? AND {where}",
            [ids, self.case_id, *(params or [])],
        )
