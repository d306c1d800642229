"""Conformance: who may open which case (issue 31 item 3), on both engines."""

from __future__ import annotations

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError


def test_grant_revoke_and_list(store: TranscriptStore) -> None:
    assert store.cases_granted("alice") == {}
    store.grant_case("CASE-1", "alice", "owner", granted_by="admin")
    store.grant_case("CASE-2", "alice")  # investigator by default
    store.grant_case("CASE-1", "bob", "viewer", granted_by="alice")
    assert store.cases_granted("alice") == {"CASE-1": "owner", "CASE-2": "investigator"}
    assert store.cases_granted("bob") == {"CASE-1": "viewer"}
    rows = store.case_access(case_id="CASE-1")
    assert [(r["user"], r["role"], r["granted_by"]) for r in rows] == [
        ("alice", "owner", "admin"),
        ("bob", "viewer", "alice"),
    ]
    assert all(r["granted_at"] is not None and r["granted_at"].tzinfo is not None for r in rows)
    assert store.case_access(case_id="CASE-1", user="bob")[0]["case_id"] == "CASE-1"
    assert len(store.case_access()) == 3

    # granting again changes the role (and who granted it), never a second row
    store.grant_case("CASE-1", "bob", "investigator", granted_by="carol")
    again = store.case_access(case_id="CASE-1", user="bob")
    assert [(r["role"], r["granted_by"]) for r in again] == [("investigator", "carol")]

    assert store.revoke_case("CASE-1", "bob") is True
    assert store.revoke_case("CASE-1", "bob") is False  # nothing left to revoke
    assert store.cases_granted("bob") == {}
    assert store.cases_granted("alice") == {"CASE-1": "owner", "CASE-2": "investigator"}


def test_an_unknown_role_is_refused(store: TranscriptStore) -> None:
    with pytest.raises(ConfigurationError, match="admin"):
        store.grant_case("CASE-1", "alice", "admin")
    assert store.case_access() == []


def test_grants_are_shared_by_every_store_on_the_record(store_target: str) -> None:
    """A grant written by one process's store is what another's reads (the team store shares it)."""
    with TranscriptStore(store_target) as one:
        one.grant_case("CASE-9", "dana", "owner", granted_by="dana")
    with TranscriptStore(store_target) as two:
        assert two.cases_granted("dana") == {"CASE-9": "owner"}
