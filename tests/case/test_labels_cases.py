"""Cases see the label library: sanctions hits cite the list, analysts' labels travel between cases."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tahrix_lab.case.annotations import apply_annotation
from tahrix_lab.case.context import Grant, ToolContext
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.detectors import run_detectors
from tahrix_lab.case.labels import load_labels
from tahrix_lab.case.tools.case_data import lookup_address
from tahrix_lab.case.tools.exposure import screen_exposure
from tahrix_lab.cli import main

LISTED = "0x098B716B8Aaf21512996dC57EB0615e2383E2f96"
A, B, C = "0x" + "a1" * 20, "0x" + "b2" * 20, "0x" + "c3" * 20
NS = "https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/ADVANCED_XML"


@pytest.fixture
def db() -> Iterator[CaseDB]:
    conn = duckdb.connect(":memory:")
    yield CaseDB(conn)
    conn.close()


@pytest.fixture
def builder(build: Callable[[], Any], db: CaseDB) -> Callable[[str], Any]:
    cls = type(build())  # the shared CaseBuilder, on this test's own database
    return lambda case_id: cls(db, case_id)


def ofac_list(tmp: Path) -> Path:
    f = tmp / "sanctioned_addresses_ETH.json"
    f.write_text(json.dumps([LISTED, "0x" + "99" * 20]))
    return f


def flags_of(db: CaseDB, case_id: str, flag_type: str) -> list[dict[str, Any]]:
    return db.list_flags(case_id, flag_type=flag_type)[0]


def test_transfer_to_an_imported_ofac_address_is_flagged_naming_the_list(
    db: CaseDB, builder: Callable[[str], Any], tmp_path: Path
) -> None:
    b = builder("C-OFAC")
    b.transfer(A, LISTED.lower(), 50_000, 10)
    b.transfer(B, C, 5_000, 20)
    cid = b.done()
    run_detectors(db, cid, ["sanctions_exposure"])
    assert flags_of(db, cid, "sanctions_exposure") == []  # the library is empty yet
    load_labels(db, [ofac_list(tmp_path)], as_of="2024-05-01")
    run_detectors(db, cid, ["sanctions_exposure"])
    (flag,) = flags_of(db, cid, "sanctions_exposure")
    assert flag["address"] == A and flag["severity"] == "critical"
    ev = flag["evidence"]
    assert ev["lists"] == ["ofac-sdn (2024-05-01)"]
    (by,) = ev["listed_by"]
    assert (by["source"], by["source_version"], by["origin"], by["category"]) == (
        "ofac-sdn", "2024-05-01", "library", "sanction")  # fmt: skip
    assert (
        by["valid_from"] is None and by["valid_to"] is None
    )  # the window used: open, as the list gives none
    # screen_exposure and lookup_address cite the same list
    ctx = ToolContext(db=db, case_id=cid)
    hit = screen_exposure({"addresses": [{"address": A}], "lists": ["sanctions"], "max_hops": 0}, ctx)
    cited = hit["results"][0]["direct"]["hits"][0]["listed_by"]
    assert [(x["source"], x["source_version"]) for x in cited] == [("ofac-sdn", "2024-05-01")]
    seen = lookup_address({"address": LISTED}, ctx)["matches"][0]
    assert seen["best_label"]["source"] == "ofac-sdn" and seen["best_label"]["source_version"] == "2024-05-01"


def test_designation_date_is_the_validity_window_used(
    db: CaseDB, builder: Callable[[str], Any], tmp_path: Path
) -> None:
    xml = tmp_path / "sdn_advanced.xml"
    xml.write_text(f"""<?xml version="1.0"?><Sanctions xmlns="{NS}">
 <DateOfIssue><Year>2024</Year><Month>5</Month><Day>2</Day></DateOfIssue>
 <ReferenceValueSets><FeatureTypeValues><FeatureType ID="345">Digital Currency Address - ETH</FeatureType>
 </FeatureTypeValues></ReferenceValueSets>
 <DistinctParties><DistinctParty><Profile ID="7"><Identity><Alias Primary="true"><DocumentedName>
 <DocumentedNamePart><NamePartValue>LAZARUS GROUP</NamePartValue></DocumentedNamePart></DocumentedName></Alias>
 </Identity><Feature FeatureTypeID="345"><FeatureVersion><VersionDetail>{LISTED}</VersionDetail></FeatureVersion>
 </Feature></Profile></DistinctParty></DistinctParties>
 <SanctionsEntries><SanctionsEntry ProfileID="7"><EntryEvent><Date><Year>2024</Year><Month>3</Month><Day>1</Day>
 </Date></EntryEvent><SanctionsMeasure><Comment>DPRK3</Comment></SanctionsMeasure></SanctionsEntry></SanctionsEntries>
</Sanctions>""")
    load_labels(db, [xml])
    b = builder("C-WINDOW")  # the builder's T0 is 2024-03-01 00:00: one transfer before, one after
    b.transfer(A, LISTED.lower(), 1_000, -60)
    b.transfer(B, LISTED.lower(), 1_000, 60)
    cid = b.done()
    run_detectors(db, cid, ["sanctions_exposure"])
    (flag,) = flags_of(db, cid, "sanctions_exposure")
    assert flag["address"] == B
    (by,) = flag["evidence"]["listed_by"]
    assert (by["entity"], by["program"], by["valid_from"], by["source_version"]) == (
        "LAZARUS GROUP", "DPRK3", "2024-03-01T00:00:00Z", "2024-05-02")  # fmt: skip


def test_an_analysts_label_on_one_case_is_seen_on_another(
    db: CaseDB, builder: Callable[[str], Any], tmp_path: Path
) -> None:
    one = builder("C-ONE")
    one.transfer(A, B, 2_000, 1)
    c1 = one.done()
    two = builder("C-TWO")
    two.transfer(C, B, 3_000, 1)
    c2 = two.done()
    ctx1 = ToolContext(db=db, case_id=c1, grant=Grant(may_write=True))
    apply_annotation(ctx1, {"action": "add_label", "target_kind": "address", "target": B,
                            "payload": {"label": "OTC desk seen in case one", "category": "otc"}})  # fmt: skip
    seen = lookup_address({"address": B}, ToolContext(db=db, case_id=c2))["matches"][0]
    best = seen["best_label"]
    assert (best["label"], best["origin"], best["from_case"]) == ("OTC desk seen in case one", "analyst", c1)
    assert db.category_map(c2)[("ethereum", B)] == "otc"  # the label's own spelling: annotations store it so
    # an imported list ranks above an analyst's label unless the analyst marks theirs as overriding
    f = tmp_path / "exchanges.csv"
    f.write_text(
        f"address,chain,name,category,confidence\n{B},ethereum,ExchangeX deposit,exchange,service_api\n"
    )
    load_labels(db, [f], source="vendor")
    got = lookup_address({"address": B}, ToolContext(db=db, case_id=c2))["matches"][0]
    assert got["best_label"]["source"] == "vendor" and got["label_conflict"]
    assert {lab["source"] for lab in got["labels"]} == {"vendor", "annotation by agent"}
    over = tmp_path / "ours.csv"
    over.write_text(f"address,chain,name,category,overrides\n{B},ethereum,Our finding,otc_desk,yes\n")
    load_labels(db, [over], source="team")
    assert db.labels_for(c2, [("ethereum", B)])[("ethereum", B)]["best"]["source"] == "team"


def test_cli_labels_load_find_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dbfile = str(tmp_path / "cli.duckdb")
    f = ofac_list(tmp_path)
    assert main(["--db", dbfile, "labels", "load", str(f), "--as-of", "2024-05-01"]) == 0
    out = capsys.readouterr().out
    assert "sanctioned_addresses_ETH.json" in out and "ofac-list" in out
    assert main(["--db", dbfile, "labels", "load", str(f), "--as-of", "2024-05-01", "--json"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert (totals["new"], totals["unchanged"]) == (0, 2)
    assert main(["--db", dbfile, "labels", "find", LISTED.upper().replace("0X", "0x")]) == 0
    out = capsys.readouterr().out
    assert LISTED.lower() in out and "ofac-sdn 2024-05-01" in out and "sanction" in out
    assert main(["--db", dbfile, "labels", "find", "0x" + "00" * 20]) == 1
    capsys.readouterr()
    assert main(["--db", dbfile, "labels", "sources"]) == 0
    out = capsys.readouterr().out
    assert "ofac-sdn" in out and "2024-05-01" in out and "sanctioned_addresses_ETH.json" in out


def test_a_case_database_from_before_the_library_migrates(tmp_path: Path) -> None:
    from tahrix_lab.agent.storage.migrations import applied_migrations, apply_migrations
    from tahrix_lab.case.schema import MIGRATIONS

    conn = duckdb.connect(str(tmp_path / "old.duckdb"))
    apply_migrations(conn, "case", MIGRATIONS[:2])  # the schema before the label library
    conn.execute("INSERT INTO cases (case_id, title) VALUES ('OLD', 'old')")
    conn.execute(
        "INSERT INTO labels (case_id, label_id, chain, address, label, category, source) "
        "VALUES ('OLD', 'L1', 'ethereum', ?, 'x', 'exchange', 'folder')",
        [A],
    )
    conn.execute(
        "INSERT INTO case_addresses (case_id, chain, address, role) VALUES ('OLD', 'ethereum', ?, 'suspect')",
        [A],
    )
    db = CaseDB(conn)
    assert applied_migrations(conn, "case") == [m.name for m in MIGRATIONS]
    assert db.labels_for("OLD", [("ethereum", A)])[("ethereum", A)]["best"]["origin"] == "case"
    conn.execute(  # a movement whose block time is not known yet can be held
        "INSERT INTO transfers (case_id, transfer_id, chain, tx_hash, block_time, kind, asset_key) "
        "VALUES ('OLD', 't', 'ethereum', '0x1', NULL, 'token', 'ethereum:native')"
    )
    conn.close()


def test_trace_endpoints_name_their_sources_and_conflicts(
    db: CaseDB, builder: Callable[[str], Any], tmp_path: Path
) -> None:
    from tahrix_lab.case.tracing import trace_funds

    b = builder("C-TRACE")
    b.transfer(A, B, 40_000, 1)
    b.transfer(B, C, 39_000, 30)
    cid = b.done()
    vendor = tmp_path / "vendor.csv"
    vendor.write_text(
        f"address,chain,name,category,confidence\n{C},ethereum,ExchangeX: deposit,exchange,service_api\n"
    )
    crawl = tmp_path / "otc-desk.json"  # an eth-labels file that says otherwise
    crawl.write_text(json.dumps([{"address": C.upper().replace("0X", "0x"), "nameTag": "Some OTC"}]))
    load_labels(db, [vendor], source="vendor-x", as_of="2024-02-01")
    load_labels(db, [crawl])
    result = trace_funds(db, cid, [A])
    (ep,) = [e for eps in result["endpoints"].values() for e in eps if e["address"] == C]
    assert ep["category"] == "exchange" and ep["source"] == "vendor-x" and ep["label_conflict"]
    assert [(x["source"], x.get("source_version"), x["category"]) for x in ep["attribution"]] == [
        ("vendor-x", "2024-02-01", "exchange"), ("eth-labels", None, "otc_desk")]  # fmt: skip
    assert result["summary"]["top_endpoints"][0]["source"] == "vendor-x"
