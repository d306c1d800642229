"""The case report: reviewed findings, every citation checked, reproducible from the record."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.backends import FakeBackend
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.investigator import QUESTION, scripted_backend
from tahrix_lab.case.report import GENERATED
from tahrix_lab.case.report.findings import split_answer
from tahrix_lab.case.workspace import Workspace

THEFT = "0xa00e454744c27038e25604c3fa67aa83fc581ac37448e865275d2d96bdfd5efd"
FABRICATED = "0x" + "ab" * 32
SECTIONS = ["summary", "findings", "graph", "exposure", "timeline", "triage", "attribution",
            "appendix-citations", "appendix-evidence", "provenance"]  # fmt: skip


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """The sample case with the scripted investigation and one answer with two bad citations."""
    w = Workspace(tmp_path_factory.mktemp("report") / "ws.duckdb")
    cid = w.load_sample_case()
    s1 = w.start_investigation(cid, user="ana", title="scripted")
    list(
        w.ask(
            s1, QUESTION.format(case_id=cid), backend=scripted_backend(w, cid), model="scripted-investigator"
        )
    )
    s2 = w.start_investigation(cid, user="ana", title="bad answer")
    answer = (
        f"## Theft\n\n- The forged withdrawal {THEFT} moved 480,000 ETH.\n"
        f"- The rest went through {FABRICATED}.\n\nThe victim lost 21.5M USDC."
    )
    backend = FakeBackend([[tool_call("get_case_overview", {})], [text(answer)]])
    list(w.ask(s2, "What was stolen?", backend=backend, model="fake"))
    yield w
    w.close()


def strip_stamp(doc: str) -> str:
    return "\n".join(line for line in doc.splitlines() if GENERATED not in line)


def test_answers_split_into_findings() -> None:
    assert split_answer("## Head\n\nOne\ncontinued.\n\n- two\n- three\n\n---\n1. four") == [
        "One\ncontinued.", "two", "three", "four"
    ]  # fmt: skip


def test_every_section_and_the_checked_citations(ws: Workspace, tmp_path: Path) -> None:
    rep = ws.report("CASE-001", path=tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert html == rep.html
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in html
    assert "<svg" in html and html.count('class="g-node"') >= 10
    # the fabricated hash and the tenfold amount are marked in the finding and listed as not found
    assert re.search(rf'data-status="not_found"[^>]*>{FABRICATED}</a>', html)
    assert re.search(r'data-status="not_found"[^>]*>480,000 ETH</a>', html)
    assert re.search(rf'data-status="verified"[^>]*>{THEFT}</a>', html)
    citations = rep.sections[SECTIONS.index("appendix-citations")].blocks[0][2]
    status = {row[1][1]: row[3] for row in citations}
    assert status[FABRICATED] == "not found" and status["480,000 ETH"] == "not found"
    # the stolen USDC is cited by both answers; the appendix lists it once, as first written
    usdc_text = next(t for t in ("21,500,000 USDC", "21.5M USDC") if t in status)
    assert status[THEFT] == "verified" and status[usdc_text] == "verified"
    # beside a verified citation, the figures come from its evidence row
    evidence = rep.sections[SECTIONS.index("appendix-evidence")].blocks  # (anchor, table) pairs
    pairs = {head[2]: table[2] for head, table in zip(evidence[::2], evidence[1::2], strict=True)}
    usdc = next(rows for head, rows in pairs.items() if head.endswith(f": {usdc_text}"))
    fields = {row[0]: row[1][1] for row in usdc}
    assert fields["table"] == "transfers" and fields["symbol"] == "USDC" and fields["amount"] == "21500000"
    assert re.search(rf'<h3 id="ev-C\d+">C\d+: {re.escape(usdc_text)}</h3>', html)


def test_nothing_in_the_page_reaches_outside(ws: Workspace) -> None:
    html = ws.report("CASE-001").html
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.findall(r'(?:src|href)="(?!#)', html)  # only in-page anchors
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html


def test_the_same_record_gives_the_same_file(ws: Workspace) -> None:
    one, two = ws.report("CASE-001"), ws.report("CASE-001")
    assert one.html != "" and strip_stamp(one.html) == strip_stamp(two.html)
    assert strip_stamp(one.markdown) == strip_stamp(two.markdown)
    assert sum(GENERATED in line for line in one.html.splitlines()) == 1


def test_the_analyst_reviews_findings_before_export(ws: Workspace, tmp_path: Path) -> None:
    sessions = [s["session_id"] for s in ws.cases.sessions_of("CASE-001")]
    bad = sessions[1]
    found = ws.report_findings("CASE-001", sessions=[bad])
    assert [f["status"] for f in found] == ["not reviewed"] * 3
    first, second, third = found
    ws.review_finding("CASE-001", first["finding_id"], "edit", by="ana",
                      text=f"The forged withdrawal {THEFT} moved 48,000 ETH.")  # fmt: skip
    ws.review_finding("CASE-001", second["finding_id"], "drop", by="ana")
    ws.review_finding("CASE-001", third["finding_id"], "accept", by="bo")
    after = {f["finding_id"]: f for f in ws.report_findings("CASE-001", sessions=[bad])}
    assert (
        after[first["finding_id"]]["status"] == "edited"
        and after[first["finding_id"]]["review"]["by"] == "ana"
    )
    assert after[first["finding_id"]]["original"] == first["text"]
    assert after[third["finding_id"]]["review"]["at"].endswith("Z")
    rep = ws.report("CASE-001", sessions=[bad], path=tmp_path / "r.md")
    md = (tmp_path / "r.md").read_text()
    assert md == rep.markdown and "48,000 ETH" in md and FABRICATED not in md and "480,000 ETH" not in md
    assert "edited by ana at" in md and "accepted by bo at" in md
    assert "1 dropped by the analyst" in rep.html
    assert 'data-status="not_found"' not in rep.html.split('id="graph"')[0]  # every remaining citation holds


def test_reviews_are_refused_when_they_make_no_sense(ws: Workspace) -> None:
    with pytest.raises(UserFacingError, match="accepted, edited or dropped"):
        ws.review_finding("CASE-001", "FND-x", "approve", by="ana")
    with pytest.raises(UserFacingError, match="new text"):
        ws.review_finding("CASE-001", "FND-x", "edit", by="ana")
    with pytest.raises(UserFacingError, match="not sessions of case"):
        ws.report("CASE-001", sessions=["nope"])


def test_provenance_names_files_detectors_sessions_and_version(ws: Workspace) -> None:
    prov = ws.report("CASE-001").sections[-1]
    tables = [b for b in prov.blocks if b[0] == "table"]
    files, detectors, sessions = (t[2] for t in tables)
    assert {row[0][1] for row in files} >= {"transfers.csv", "labels.csv"}
    assert all(re.fullmatch(r"(now:)?[0-9a-f]{64}", row[3][1]) for row in files)
    assert {row[0] for row in detectors} >= {"peel_chain", "structuring"}
    models: dict[str, Any] = {row[1]: row for row in sessions}
    assert models["scripted"][4] == "scripted-investigator" and models["bad answer"][5] == "fake"
    assert any(b[0] == "p" and "tahrix_lab" in b[1] for b in prov.blocks)


def test_the_cli_writes_the_report(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tahrix_lab.app.cli import main

    monkeypatch.setenv("TAHRIX_DB", ws.path)  # --db sets it; this puts it back afterwards
    bad = [s["session_id"] for s in ws.cases.sessions_of("CASE-001")][1]
    out = tmp_path / "case.html"
    assert main(["--db", ws.path, "case", "report", "CASE-001", "--session", bad, "--out", str(out)]) == 0
    assert "Wrote" in capsys.readouterr().out and '<section id="provenance">' in out.read_text()
    assert main(["--db", ws.path, "case", "report", "CASE-001", "--out", str(tmp_path / "case.md")]) == 0
    assert (tmp_path / "case.md").read_text().startswith("# CASE-001")
