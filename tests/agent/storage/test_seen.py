"""Conformance: what a session has seen, and a case's record rows written whole (issue 26
item 3), on both engines; and the DuckDB migration that moves ``case_session_seen`` in."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.storage.migrations import applied_migrations, apply_migrations
from tahrix_lab.agent.storage.schema import MIGRATIONS

T0 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def test_a_session_remembers_what_it_has_seen(store: TranscriptStore) -> None:
    assert store.mark_seen("s-1", "address", ["0xb", "0xa", "0xb"]) == set()
    assert store.mark_seen("s-1", "address", ["0xa", "0xc"]) == {"0xa"}
    assert store.mark_seen("s-1", "address", []) == set()
    assert store.mark_seen("s-2", "address", ["0xa"]) == set()  # per session
    assert store.mark_seen("s-1", "tx", ["0xa"]) == set()  # per kind
    assert store.seen("s-1", "address") == ["0xa", "0xb", "0xc"]  # first seen first, then by key
    rows = store.seen_rows(["s-1"])
    assert [(r["kind"], r["key"]) for r in rows] == [("address", "0xa"), ("address", "0xb"),
                                                     ("address", "0xc"), ("tx", "0xa")]  # fmt: skip
    assert {r["session_id"] for r in rows} == {"s-1"} and all(r["first_at"].tzinfo for r in rows)
    assert store.seen_rows(["nobody"]) == []


def test_case_rows_are_written_as_exported(store: TranscriptStore) -> None:
    access = {"case_id": "C-1", "user": "bob", "role": "viewer", "granted_by": "ana", "granted_at": T0}
    note = {"text": "ünïcode ✓", "n": [1, 2.5, None]}
    annotation = {"case_id": "C-1", "kind": "note", "key": "NOTE-1", "value": note, "updated_by": "ana",
                  "updated_at": T0}  # fmt: skip
    gone = {**annotation, "kind": "label", "key": "LBL-A-1", "value": None}
    audit = {"audit_id": "AUD-1", "at_time": T0, "actor": "ana", "session_id": "s-1", "case_id": "C-2",
             "action": "note", "target_kind": "note", "target_id": "NOTE-1", "before": None,
             "after": note, "reverted_by": "AUD-2"}  # fmt: skip
    seen = {"session_id": "s-1", "kind": "flag", "key": "FLG-1", "first_at": T0}
    with store.transaction():
        store.import_case_rows(access=[access], annotations=[annotation, gone], audit=[audit], seen=[seen])
    assert store.case_access(case_id="C-1") == [access]
    assert store.annotations("C-1") == [gone, annotation]
    assert store.audit_entries("C-2") == [audit]
    assert store.seen_rows(["s-1"]) == [seen]
    assert store.record_cases() == ["C-1", "C-2"]
    # a row whose key is there stays as it is
    store.import_case_rows(access=[{**access, "role": "owner"}])
    assert store.case_access(case_id="C-1") == [access]


def test_duckdb_workspace_seen_rows_are_migrated(tmp_path: Path) -> None:
    """A workspace made before 0007: what its sessions saw (the case package's table) is kept."""
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    apply_migrations(con, "transcript", MIGRATIONS[:6])
    con.execute(
        "CREATE TABLE case_session_seen (session_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, "
        "key VARCHAR NOT NULL, first_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (session_id, kind, key))"
    )
    con.execute(
        "INSERT INTO case_session_seen VALUES ('s-1', 'address', '0xa', TIMESTAMP '2026-01-02 03:04:05')"
    )
    con.close()
    store = TranscriptStore(str(path))
    try:
        assert "0007_session_seen" in applied_migrations(store.cursor(), "transcript")
        assert store.seen_rows(["s-1"]) == [
            {"session_id": "s-1", "kind": "address", "key": "0xa",
             "first_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}
        ]  # fmt: skip
        assert store.mark_seen("s-1", "address", ["0xa"]) == {"0xa"}
    finally:
        store.close()
