"""The label library's loaders: each real format with its quirks, idempotence, the load report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.labels import find, load_labels, sources
from tahrix_lab.case.labels.formats import sniff

RONIN = "0x098B716B8Aaf21512996dC57EB0615e2383E2f96"  # OFAC SDN since 2022-04-14
POOL = "0x47CE0C6eD5B0Ce3d3A51fdb1C52DC66a7c3c2936"  # Tornado Cash 1 ETH pool
SENDER = "0xCEC8F07014D889442D7CF3B477B8F72F8179EA09"
BTC = "1AjZPMsnmpdK2Rv9KQNfMurTXinscVro9V"
TRX = "TUoixKFaWVsHxGWgnYyMzpkrT22YqU7VvH"
NS = "https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/ADVANCED_XML"


@pytest.fixture
def db() -> Iterator[CaseDB]:
    conn = duckdb.connect(":memory:")
    yield CaseDB(conn)
    conn.close()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def eth_labels(tmp: Path) -> list[Path]:
    """eth-labels JSON per slug: one address in two categories, upper and lower case."""
    return [
        write(tmp / "airdrop-distributor.json", json.dumps([
            {"address": SENDER, "nameTag": "CoinTool: MultiSender"},
            {"address": "0x0345f8208f90f65a8430a8f77c614a9a4ab7ede0", "nameTag": "AdsByWiFi: WADS Airdrop"}])),
        write(tmp / "tornado-cash.json", json.dumps([{"address": POOL.lower(), "nameTag": "Tornado.Cash: 1 ETH"}])),
        write(tmp / "phish-hack.json", json.dumps([{"address": RONIN.upper().replace("0X", "0x"),
                                                    "nameTag": "Ronin Bridge Exploiter"}, {"address": "0x12"}])),
    ]  # fmt: skip


def sdn_advanced(tmp: Path) -> Path:
    return write(
        tmp / "sdn_advanced.xml",
        f"""<?xml version="1.0" encoding="utf-8"?>
<Sanctions xmlns="{NS}">
  <DateOfIssue><Year>2024</Year><Month>5</Month><Day>2</Day></DateOfIssue>
  <ReferenceValueSets><FeatureTypeValues>
    <FeatureType ID="25">Location</FeatureType>
    <FeatureType ID="345">Digital Currency Address - ETH</FeatureType>
    <FeatureType ID="344">Digital Currency Address - XBT</FeatureType>
    <FeatureType ID="887">Digital Currency Address - USDT</FeatureType>
  </FeatureTypeValues></ReferenceValueSets>
  <DistinctParties><DistinctParty FixedRef="900"><Profile ID="900" PartySubTypeID="3">
    <Identity><Alias Primary="false"><DocumentedName><DocumentedNamePart><NamePartValue>APT38</NamePartValue>
    </DocumentedNamePart></DocumentedName></Alias>
    <Alias Primary="true"><DocumentedName><DocumentedNamePart><NamePartValue>LAZARUS GROUP</NamePartValue>
    </DocumentedNamePart></DocumentedName></Alias></Identity>
    <Feature ID="1" FeatureTypeID="25"><FeatureVersion><VersionLocation LocationID="1"/></FeatureVersion></Feature>
    <Feature ID="2" FeatureTypeID="345"><FeatureVersion><VersionDetail>{RONIN}</VersionDetail></FeatureVersion></Feature>
    <Feature ID="3" FeatureTypeID="344"><FeatureVersion><VersionDetail>{BTC}</VersionDetail></FeatureVersion></Feature>
    <Feature ID="4" FeatureTypeID="887"><FeatureVersion><VersionDetail>{TRX}</VersionDetail></FeatureVersion></Feature>
  </Profile></DistinctParty></DistinctParties>
  <SanctionsEntries><SanctionsEntry ID="1" ProfileID="900">
    <EntryEvent><Date><Year>2022</Year><Month>4</Month><Day>14</Day></Date></EntryEvent>
    <SanctionsMeasure><Comment>DPRK3</Comment></SanctionsMeasure>
    <SanctionsMeasure><Comment>CYBER2</Comment></SanctionsMeasure>
  </SanctionsEntry></SanctionsEntries>
</Sanctions>""",
    )


def test_each_format_is_recognised_by_content(tmp_path: Path) -> None:
    files = {
        "eth-labels-json": eth_labels(tmp_path)[0],
        "eth-labels-csv": write(tmp_path / "accounts.csv", "address,chainId,label,nameTag\n"),
        "etherscan-export": write(tmp_path / "export.csv", '"address";"nametag";"labels";"labels_slug"\n'),
        "ofac-list": write(tmp_path / "sanctioned_addresses_ETH.json", json.dumps([RONIN])),
        "ofac-sdn-xml": sdn_advanced(tmp_path),
        "ofac-sdn-csv": write(
            tmp_path / "sdn.csv", '36,"AEROCARIBBEAN AIRLINES","-0- ","CUBA","-0- ","-0- "\n'
        ),
        "labels-csv": write(tmp_path / "mine.csv", "address,chain,name,category,source\n"),
    }
    for fmt, path in files.items():
        assert sniff(path) == fmt, path.name
    txt = write(tmp_path / "sanctioned_addresses_XBT.txt", f"{BTC}\n")
    assert sniff(txt) == "ofac-list"


def test_eth_labels_json_category_from_file_name_and_quirks(db: CaseDB, tmp_path: Path) -> None:
    report = load_labels(db, eth_labels(tmp_path), as_of="2024-03-01")
    by_file = {Path(f.file).name: f for f in report.files}
    assert by_file["airdrop-distributor.json"].new == 2
    assert by_file["phish-hack.json"].bad == [f"{tmp_path / 'phish-hack.json'}, line 2, column 'address': "
                                              "not an EVM address: '0x12'"]  # fmt: skip
    got = find(db, RONIN)  # found in any case spelling, stored lower-case
    assert [(e["address"], e["best"]["category"], e["best"]["source_category"]) for e in got] == [
        (RONIN.lower(), "phishing", "phish-hack")
    ]
    sender = find(db, SENDER.lower())[0]["best"]
    assert (sender["category"], sender["entity"], sender["source"], sender["source_version"]) == (
        "airdrop_distributor", "CoinTool", "eth-labels", "2024-03-01")  # fmt: skip
    assert find(db, POOL)[0]["best"]["category"] == "mixing_service"


def test_reload_changes_nothing_and_a_new_version_updates(db: CaseDB, tmp_path: Path) -> None:
    files = [*eth_labels(tmp_path), sdn_advanced(tmp_path)]
    first = load_labels(db, files, as_of=None)
    count = db.scalar("SELECT count(*) FROM label_library")
    snapshot = db.rows("SELECT * FROM label_library ORDER BY label_id")
    again = load_labels(db, files)
    assert again.total("new") == again.total("updated") == 0
    assert again.total("unchanged") == first.total("new") == count
    assert db.rows("SELECT * FROM label_library ORDER BY label_id") == snapshot
    assert db.scalar("SELECT count(*) FROM label_sources") == len(files)
    newer = load_labels(db, files[:1], as_of="2024-06-01")  # the same list, a new version
    assert newer.total("updated") == 2 and newer.total("new") == 0
    assert db.scalar("SELECT count(*) FROM label_library") == count
    versions = {(s["source"], s["source_version"]) for s in sources(db)}
    assert ("eth-labels", "2024-06-01") in versions and ("ofac-sdn", "2024-05-02") in versions


def test_ofac_lists_chain_and_asset_from_the_file_name(db: CaseDB, tmp_path: Path) -> None:
    eth = write(tmp_path / "sanctioned_addresses_ETH.json", json.dumps([RONIN, RONIN.lower(), POOL]))
    xbt = write(tmp_path / "sanctioned_addresses_XBT.txt", f"{BTC}\n\n{BTC.lower()}\n")
    usdt = write(tmp_path / "sanctioned_addresses_USDT.json", json.dumps([TRX, "0x" + "ab" * 20]))
    report = load_labels(db, [eth, xbt, usdt], as_of="2024-05-01")
    by = {Path(f.file).name: f for f in report.files}
    assert (by[eth.name].read, by[eth.name].new, by[eth.name].duplicates) == (
        3,
        2,
        1,
    )  # one address, two spellings
    assert by[xbt.name].new == 2  # Bitcoin keeps its case: a lower-cased form is another string
    ronin = find(db, RONIN)[0]
    assert ronin["chain"] == "ethereum" and ronin["best"]["category"] == "sanction"
    assert ronin["best"]["abuse"] == "sanction" and ronin["best"]["source"] == "ofac-sdn"
    assert find(db, BTC)[0]["chain"] == "bitcoin" and find(db, BTC)[0]["address"] == BTC
    assert find(db, TRX)[0]["chain"] == "tron"  # a token list: chain from the address's form
    assert find(db, "0x" + "AB" * 20)[0]["best"]["asset"] == "USDT"


def test_sdn_advanced_xml_gives_entity_program_and_designation_date(db: CaseDB, tmp_path: Path) -> None:
    report = load_labels(db, [sdn_advanced(tmp_path)])
    assert report.files[0].source_version == "2024-05-02" and report.total("new") == 3
    lab = find(db, RONIN)[0]["best"]
    assert lab["entity"] == "LAZARUS GROUP" and lab["program"] == "CYBER2; DPRK3"
    assert lab["valid_from"] == "2022-04-14T00:00:00Z" and lab["valid_to"] is None
    assert find(db, BTC)[0]["chain"] == "bitcoin" and find(db, TRX)[0]["chain"] == "tron"


def test_classic_sdn_xml_and_sdn_csv_remarks(db: CaseDB, tmp_path: Path) -> None:
    classic = write(
        tmp_path / "sdn.xml",
        f"""<?xml version="1.0"?>
<sdnList xmlns="http://tempuri.org/sdnList.xsd">
 <publshInformation><Publish_Date>05/02/2024</Publish_Date></publshInformation>
 <sdnEntry><uid>1</uid><lastName>SINBAD.IO</lastName><programList><program>CYBER2</program></programList>
  <idList><id><idType>Digital Currency Address - ETH</idType><idNumber>{POOL}</idNumber></id>
  <id><idType>Website</idType><idNumber>sinbad.io</idNumber></id></idList></sdnEntry>
</sdnList>""",
    )
    csv_ = write(tmp_path / "sdn.csv", (
        '12345,"GARANTEX EUROPE OU","-0- ","CYBER2] [RUSSIA-EO14024","-0- ","-0- ","-0- ","-0- ","-0- ","-0- ","-0- ",'
        f'"Digital Currency Address - XBT {BTC}; alt. Digital Currency Address - ETH {RONIN}; Website garantex.io."\n'
        '\x1a\n'))  # fmt: skip
    report = load_labels(db, [classic, csv_])
    assert [f.format for f in report.files] == ["ofac-sdn-xml", "ofac-sdn-csv"]
    assert report.files[0].source_version == "2024-05-02"
    pool = find(db, POOL)[0]["best"]
    assert (pool["entity"], pool["program"], pool["category"]) == ("SINBAD.IO", "CYBER2", "sanction")
    ronin = find(db, RONIN)[0]["best"]
    assert ronin["entity"] == "GARANTEX EUROPE OU" and ronin["program"] == "CYBER2; RUSSIA-EO14024"
    assert find(db, BTC)[0]["best"]["asset"] == "XBT"


def test_etherscan_export_one_label_per_slug(db: CaseDB, tmp_path: Path) -> None:
    export = write(tmp_path / "export.csv", (
        '"address";"nametag";"internal_nametag";"url";"shortdescription";"notes_1";"notes_2";"labels";"labels_slug";'
        '"reputation";"other_attributes";"lastupdatedtimestamp"\n'
        f'"{POOL}";"Tornado.Cash: Router";"";"";"";"";"";"Tornado.Cash, OFAC Sanctioned";"tornado-cash,ofac-sanctioned";'
        '"1";"";"1711418316"\n'
        f'"{SENDER.lower()}";"Fake_Phishing589039";"";"";"";"";"";"Phish / Hack";"phish-hack";"2";"";"1728292621"\n'))  # fmt: skip
    report = load_labels(db, [export])
    assert report.files[0].format == "etherscan-export" and report.total("new") == 3
    pool = find(db, POOL)[0]
    assert pool["conflict"] and {lab["category"] for lab in pool["labels"]} == {"mixing_service", "sanction"}
    assert all(lab["source"] == "etherscan" and lab["entity"] == "Tornado.Cash" for lab in pool["labels"])


def test_eth_labels_csv_and_own_csv_with_bad_rows_named(db: CaseDB, tmp_path: Path) -> None:
    accounts = write(tmp_path / "accounts.csv", (
        "address,chainId,label,nameTag\n"
        f'"{SENDER}",1,"multisender","CoinTool: MultiSender"\n'
        f'"{SENDER.lower()}",1,"multisender","CoinTool : MultiSender"\n'
        f'"{POOL}",56,"tornado-cash","Tornado.Cash: BSC"\n'
        f'"{POOL}",999,"tornado-cash","x"\n'))  # fmt: skip
    own = write(tmp_path / "mine.csv", (
        "address,chain,name,category,source,valid_from,overrides\n"
        f"{RONIN},eth,Ronin exploiter (our case),Hacker,team-notes,2022-03-23,true\n"
        f"{BTC},btc,Peel chain end,Weird Thing,team-notes,,\n"
        f"{BTC},dogecoin,x,exchange,team-notes,,\n"
        f"{RONIN},ethereum,x,exchange,team-notes,not a date,\n"))  # fmt: skip
    report = load_labels(db, [accounts, own])
    acc, mine = report.files
    assert (acc.new, acc.duplicates) == (2, 1)
    assert acc.bad == [f"{accounts}, line 5, column 'chainId': unknown chain '999'"]
    assert mine.bad == [f"{own}, line 4, column 'chain': unknown chain 'dogecoin'",
                        f"{own}, line 5, column 'valid_from': not a date"]  # fmt: skip
    assert report.unknown_categories == {"Weird Thing": 1}
    assert find(db, POOL, "bsc")[0]["best"]["category"] == "mixing_service"
    ronin = find(db, RONIN)[0]["best"]
    assert (ronin["category"], ronin["source"], ronin["overrides"], ronin["confidence_level"]) == (
        "perpetrator", "team-notes", True, 100)  # fmt: skip
    assert "Weird Thing" in report.table() and "line 4" in report.table()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text("0123456789abcdef", min_size=40, max_size=40), st.lists(st.booleans(), min_size=40, max_size=40)
)
def test_any_spelling_of_an_evm_address_is_one_label(tmp_path: Path, hexpart: str, upper: list[bool]) -> None:
    db = CaseDB(duckdb.connect(":memory:"))
    mixed = "0x" + "".join(c.upper() if u else c for c, u in zip(hexpart, upper, strict=True))
    f = write(
        tmp_path / "sanctioned_addresses_ETH.json", json.dumps([mixed, "0x" + hexpart, mixed.upper()[2:]])
    )
    report = load_labels(db, [f])
    assert report.total("new") == 1 and len(report.bad) == 1  # the one without 0x is named, not guessed
    assert [e["address"] for e in find(db, "0x" + hexpart.upper())] == ["0x" + hexpart]


def test_an_sdn_xml_with_entities_is_refused_by_name_not_expanded(db: CaseDB, tmp_path: Path) -> None:
    """A list file is attacker-reachable (a mirror, a download): entity expansion is never attempted."""
    bomb = write(
        tmp_path / "sdn.xml",
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>\n'
        '<sdnList xmlns="http://tempuri.org/sdnList.xsd"><sdnEntry><lastName>&lol2;</lastName></sdnEntry></sdnList>',
    )
    report = load_labels(db, [bomb])
    assert report.total("new") == 0
    (bad,) = report.files[0].bad
    assert bad.startswith(f"{bomb}") and "cannot be read as ofac-sdn-xml" in bad and "Entit" in bad
