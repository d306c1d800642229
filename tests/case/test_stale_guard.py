"""A stale host cannot fork a shared case's evidence history (issue 26): a load or detector
run on a copy that lacks steps of the record's manifest is refused before anything is loaded,
naming the case and who recorded the last step, and telling the analyst to run ``tahrix case
open``; after that the same load is recorded. Loading the very files of the manifest's next
step (or running its detectors) on a copy at the step before is the same evidence: it is done,
checked against that step's fingerprint, and not recorded again. On PostgreSQL and on a
DuckDB record file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.case.detectors import DETECTORS
from tahrix_lab.case.loaders.manifest import StaleCopy, fingerprint
from tahrix_lab.case.workspace import SAMPLE_CASE_ID as CASE
from tahrix_lab.case.workspace import Workspace
from tests.agent.storage.conftest import pg_server, pg_url  # noqa: F401
from tests.case.loaders.export_fixtures import ERC20_HEADER, a, erc20_row, write_csv
from tests.case.test_case_open import OVERRIDE, evidence, hosts  # noqa: F401

Hosts = tuple[Workspace, Workspace, Path]


def steps(ws: Workspace) -> list[tuple[int, str, str | None]]:
    return [(s["step"], s["kind"], s["recorded_by"]) for s in ws.store.case_manifest(CASE)]


def test_a_load_on_a_copy_that_never_opened_the_case_is_refused(
    hosts: Hosts,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, ws_b, copy = hosts
    before = steps(ws_b)
    monkeypatch.setenv("TAHRIX_USER", "bob")
    with pytest.raises(StaleCopy) as info:
        ws_b.load_file(CASE, copy / "usdt.csv", chain="ethereum")  # not what step 0 did
    message = str(info.value)
    assert f"Case {CASE!r} has 3 steps" in message and "there is no copy of it here" in message
    assert f"tahrix case open {CASE}" in message and "Nothing was loaded" in message
    assert not ws_b.cases.case_exists(CASE) and steps(ws_b) == before


def test_a_copy_behind_the_manifest_is_refused_then_recorded_after_open(
    hosts: Hosts,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws_a, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)
    monkeypatch.setenv("TAHRIX_USER", "ana")
    ws_a.run_detectors(CASE, ["repeated_amount"], OVERRIDE)  # step 3, on A only
    monkeypatch.setenv("TAHRIX_USER", "bob")
    more = copy / "more.csv"
    write_csv(more, ERC20_HEADER, [erc20_row(i, a(3000 + i), a(4000 + i), "7", "$7.00") for i in range(1, 4)])
    held = fingerprint(ws_b.cases, CASE)
    for attempt in (
        lambda: ws_b.load_file(CASE, more, chain="ethereum"),
        lambda: ws_b.run_detectors(CASE, ["repeated_amount"]),  # not step 3's parameters
    ):
        with pytest.raises(
            StaleCopy, match=r"the last, step 3, recorded by ana\); the copy here is at step 2"
        ):
            attempt()
    assert fingerprint(ws_b.cases, CASE) == held and len(steps(ws_b)) == 4  # nothing loaded or recorded

    assert ws_b.open_case(CASE, files=copy)["status"] == "caught up"
    ws_b.load_file(CASE, more, chain="ethereum")
    assert steps(ws_b)[-1] == (4, "load", "bob")
    assert ws_a.open_case(CASE, files=copy)["status"] == "caught up"  # A replays B's step
    assert evidence(ws_a) == evidence(ws_b)


def test_loading_the_same_files_is_the_same_evidence_and_no_new_step(
    hosts: Hosts,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """B does on its own what A did (its own copy of the files, the same detectors): each
    action repeats the manifest's next step, so B ends with A's evidence and nothing is added."""
    ws_a, ws_b, copy = hosts
    before = ws_b.store.case_manifest(CASE)
    monkeypatch.setenv("TAHRIX_USER", "bob")
    ws_b.load_case_folder(copy / "case")
    ws_b.load_file(CASE, copy / "usdt.csv", chain="ethereum")
    ws_b.run_detectors(CASE)
    assert ws_b.store.case_manifest(CASE) == before
    assert evidence(ws_b) == evidence(ws_a)
    assert ws_b.open_case(CASE, verify=True)["status"] == "identical"
    ws_b.run_detectors(CASE, ["repeated_amount"], OVERRIDE)  # up to date now: a new step, B's
    assert steps(ws_b)[-1] == (3, "detect", "bob")


def test_an_analysts_label_is_no_step_so_detectors_run_again_on_the_same_copy(
    hosts: Hosts,  # noqa: F811
) -> None:
    """An analyst's label is an annotation (it lives in the record and reaches every host), not
    evidence a load made: labelling an address leaves the copy at its step, and detectors run."""
    ws_a, _, _ = hosts
    before = fingerprint(ws_a.cases, CASE)
    address = (
        ws_a.cases.cursor()
        .execute("SELECT to_address FROM transfers WHERE case_id = ? AND chain = 'ethereum' LIMIT 1", [CASE])
        .fetchone()[0]
    )
    ws_a.annotate(CASE, "address", address, "add_label", {"label": "seen at a desk", "category": "otc"},
                  analyst="ana", chain="ethereum")  # fmt: skip
    assert fingerprint(ws_a.cases, CASE) == before
    ws_a.run_detectors(CASE, ["repeated_amount"], OVERRIDE)  # no StaleCopy
    assert steps(ws_a)[-1][1] == "detect"


def test_the_same_work_again_on_the_same_evidence_adds_no_step(hosts: Hosts) -> None:  # noqa: F811
    """A notebook run twice runs the same detectors again: the evidence is unchanged, so the
    manifest does not grow a step for each run; other parameters do make one."""
    ws_a, _, _ = hosts
    ws_a.run_detectors(CASE, ["repeated_amount"], OVERRIDE)
    once = steps(ws_a)
    ws_a.run_detectors(CASE, ["repeated_amount"], OVERRIDE)
    assert steps(ws_a) == once
    ws_a.run_detectors(CASE, ["repeated_amount"], {"repeated_amount": {"min_count": 4}})
    assert len(steps(ws_a)) == len(once) + 1


def test_a_flag_an_analyst_decided_is_kept_by_a_stricter_run_and_every_host_rebuilds_it(
    hosts: Hosts,  # noqa: F811
) -> None:
    """A detector run keeps the flags analysts decided on even when they no longer hold with its
    parameters; which ones it kept is part of its step, so a host replaying it keeps the same
    ones (its copy has no decisions yet while it replays) and ends with the same evidence."""
    ws_a, ws_b, copy = hosts
    flag = next(f for f in ws_a.flags(CASE) if f["flag_type"] == "repeated_amount" and f["status"] == "new")
    ws_a.annotate(CASE, "flag", flag["flag_id"], "confirm_flag", {"note": "the desk again"}, analyst="ana")
    strict = {"repeated_amount": {"min_count": 1000}}  # nothing repeats that often: every flag lapses
    ws_a.run_detectors(CASE, ["repeated_amount"], strict)
    kept = [f["flag_id"] for f in ws_a.flags(CASE) if f["flag_type"] == "repeated_amount"]
    assert kept == [flag["flag_id"]]  # the decided one stays, with its decision
    assert ws_a.store.case_manifest(CASE)[-1]["entry"]["kept"] == kept

    assert ws_b.open_case(CASE, files=copy)["status"] == "rebuilt"
    assert evidence(ws_b) == evidence(ws_a)
    assert [(f["flag_id"], f["status"]) for f in ws_b.flags(CASE) if f["flag_type"] == "repeated_amount"] == [
        (flag["flag_id"], "confirmed")
    ]
    # B repeating A's run on its own copy (the same detectors and parameters) is the same step
    assert ws_b.run_detectors(CASE, ["repeated_amount"], strict) and len(ws_b.store.case_manifest(CASE)) == 4


def roles(ws: Workspace) -> list[tuple[str, str, str]]:
    rows = ws.cases.cursor().execute(
        "SELECT chain, address, role FROM case_addresses WHERE case_id = ? ORDER BY ALL", [CASE]
    )
    return rows.fetchall()


def test_a_run_after_an_analysts_role_and_label_rebuilds_the_same_on_every_host(
    hosts: Hosts,  # noqa: F811
) -> None:
    """Detectors read the case's roles (a funded address that is one of the case's) and its
    analysts' labels (a category given by hand): neither is evidence, both change what a run
    finds. Its step records them, so a host replaying it reads the same and ends with the same
    flags, and then shows the roles and labels as the record has them now."""
    ws_a, ws_b, copy = hosts
    funded = next(
        f
        for f in ws_a.flags(CASE)
        if f["flag_type"] == "fresh_address_funding" and not f["evidence"]["case_address"]
    )
    role = ws_a.annotate(CASE, "address", funded["address"], "set_role", {"role": "suspect"}, analyst="ana",
                         chain=funded["chain"])  # fmt: skip
    ws_a.annotate(CASE, "address", funded["evidence"]["funder"], "add_label",
                  {"label": "Desk 9", "category": "mixing_service"}, analyst="ana", chain=funded["chain"])  # fmt: skip
    ws_a.run_detectors(CASE, ["fresh_address_funding", "mixer_exposure"])
    after = {f["flag_id"]: f for f in ws_a.flags(CASE)}
    assert after[funded["flag_id"]]["evidence"]["case_address"] is True  # the run read the role
    assert after[funded["flag_id"]]["evidence"]["funder_category"] == "mixing_service"  # and the label
    # later the analyst takes the role back: the record changes, the recorded run does not
    ws_a.revert(role["audit_id"], actor="ana")

    assert ws_b.open_case(CASE, files=copy)["status"] == "rebuilt"
    assert evidence(ws_b) == evidence(ws_a)
    ws_b.flags(CASE)  # a read lays the record over the copy
    assert roles(ws_b) == roles(ws_a) and (funded["chain"], funded["address"], "suspect") not in roles(ws_b)


def test_a_replay_that_fails_leaves_the_records_roles_not_the_steps(
    hosts: Hosts,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rebuild lays a step's roles over the copy to replay it; if the replay fails, the copy
    still shows the roles the record has now, not the step's."""
    ws_a, ws_b, copy = hosts
    ws_b.open_case(CASE, files=copy)  # B at step 2
    address = (
        ws_a.cases.cursor()
        .execute(
            "SELECT to_address FROM transfers WHERE case_id = ? AND chain = 'ethereum' ORDER BY 1 LIMIT 1",
            [CASE],
        )
        .fetchone()[0]
    )
    role = ws_a.annotate(
        CASE, "address", address, "set_role", {"role": "suspect"}, analyst="ana", chain="ethereum"
    )
    ws_a.run_detectors(CASE, ["repeated_amount"], OVERRIDE)  # step 3 read the role
    ws_a.revert(role["audit_id"], actor="ana")  # the record has no role there now

    def broken(*args: Any) -> Any:
        raise RuntimeError("a detector failed mid-replay")

    monkeypatch.setitem(DETECTORS, "repeated_amount", broken)
    with pytest.raises(RuntimeError, match="mid-replay"):
        ws_b.open_case(CASE, files=copy)
    assert ("ethereum", address, "suspect") not in roles(ws_b)
    assert roles(ws_b) == roles(ws_a)
