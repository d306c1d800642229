"""Moving a workspace loses nothing (issue 26 item 3): sessions, and what analysts and sessions
wrote on a case (access, flag decisions, roles, analysts' labels, notes, reverts, the audit log
with before and after, what each session saw) go from a DuckDB workspace into PostgreSQL and
back into DuckDB, every row equal, costs by case equal; as an analyst does it with the CLI; a
hostile file is refused naming its line, nothing written, on both engines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.case.investigator import QUESTION, scripted_backend
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.lab.costs import costs
from tahrix_lab.lab.transfer import export_sessions, import_sessions
from tests.agent.storage.pg_server import PASSWORD


def annotated_workspace(path: Path) -> tuple[str, list[str]]:
    """A one-analyst DuckDB workspace: an investigation that saw things and cost money, flags
    confirmed and dismissed, a role set, an analyst's label added then reverted, a note, access
    granted; a session on no case. Returns the case and the session ids."""
    with Workspace(path) as ws:
        case_id = ws.load_sample_case()
        s = ws.start_investigation(case_id, user="ana", grant={"may_write": True})
        for _ in ws.ask(s, QUESTION.format(case_id=case_id), backend=scripted_backend(ws, case_id),
                        model="gpt-4o-mini"):  # fmt: skip
            pass
        first, second = (f["flag_id"] for f in ws.flags(case_id)[:2])
        ws.annotate(case_id, "flag", first, "confirm_flag", {"note": "seen on the exchange ✓"}, analyst="ana")
        ws.annotate(case_id, "flag", second, "dismiss_flag", analyst="bob")
        [(chain, a1), (_, a2)] = (
            ws.cases.cursor()
            .execute(
                "SELECT chain, address FROM addresses WHERE case_id = ? ORDER BY address LIMIT 2", [case_id]
            )
            .fetchall()
        )
        ws.annotate(case_id, "address", a1, "set_role", {"role": "suspect", "note": "«hub»"}, analyst="ana",
                    chain=chain)  # fmt: skip
        label = ws.annotate(case_id, "address", a2, "add_label", {"label": "Mixer X", "category": "mixer"},
                            analyst="bob", chain=chain)  # fmt: skip
        ws.annotate(case_id, "address", a1, "add_label", {"label": "Hub", "category": "other"}, analyst="ana",
                    chain=chain)  # fmt: skip
        ws.revert(label["audit_id"], actor="ana")
        ws.annotate(case_id, "flag", first, "note", {"text": "look again\nlater"}, analyst="ana")
        ws.grant_case(case_id, "bob", "viewer", by="ana")
        ws.grant_case(case_id, "cy", "owner", by="ana")
        plain = ws.store.create_session(user="dee")
        return case_id, [s.id, plain.id]


def record(store: TranscriptStore, case_id: str) -> dict[str, Any]:
    """Every row of the record a move must keep."""
    ids = sorted(s.id for s in store.list_sessions())
    return {
        "sessions": [store.get_session(i).to_dict() for i in ids],
        "messages": [[m.to_dict() for m in store.load_messages(i)] for i in ids],
        "turn_ends": [store.load_turn_ends(i) for i in ids],
        "links": store.case_links(),
        "seen": store.seen_rows(ids),
        "access": store.case_access(case_id=case_id),
        "annotations": store.annotations(case_id),
        "audit": store.audit_entries(case_id),
        "manifest": store.case_manifest(case_id),
    }


def exported(store: TranscriptStore, **kwargs: Any) -> str:
    out = io.StringIO()
    export_sessions(store, out, **kwargs)
    return out.getvalue()


def evidence_view(ws: Workspace, case_id: str) -> dict[str, Any]:
    """What the analyst sees over the evidence: decisions, roles, analysts' labels, notes, audit."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return sorted(ws.cases.cursor().execute(sql, [case_id]).fetchall(), key=repr)

    return {
        "flags": rows(
            "SELECT flag_id, status, analyst_note, updated_by FROM anomaly_flags WHERE case_id = ?"
        ),
        "roles": rows("SELECT chain, address, role, note, added_by FROM case_addresses WHERE case_id = ?"),
        "labels": rows(
            "SELECT label_id, address, label, category, created_by FROM labels "
            "WHERE case_id = ? AND label_id LIKE 'LBL-A-%'"
        ),
        "notes": rows(
            "SELECT note_id, target_kind, target_id, text, created_by FROM notes WHERE case_id = ?"
        ),
        "audit": ws.audit_log(case_id),
    }


def test_duckdb_to_postgresql_and_back_every_row_equal(tmp_path: Path, pg_url: str) -> None:
    case_id, ids = annotated_workspace(tmp_path / "ws.duckdb")
    duck = Workspace(tmp_path / "ws.duckdb")
    want = record(duck.store, case_id)
    # the workspace has what the move must carry
    assert len(want["access"]) == 2 and len(want["seen"]) > 0 and len(want["audit"]) >= 7
    assert {a["kind"] for a in want["annotations"]} == {"flag", "role", "label", "note"}
    assert any(a["value"] is None for a in want["annotations"])  # the reverted label
    assert any(e["reverted_by"] for e in want["audit"]) and any(e["before"] for e in want["audit"])
    assert [s["kind"] for s in want["manifest"]] == ["load", "detect"]
    text = exported(duck.store)
    assert {json.loads(line)["format"] for line in text.splitlines()} == {
        "tahrix-session/1", "tahrix-case-access/1", "tahrix-annotation/1", "tahrix-audit/1", "tahrix-manifest/1",
    }  # fmt: skip

    pg = TranscriptStore(pg_url)
    report = import_sessions(pg, io.StringIO(text))
    assert sorted(report.imported) == sorted(ids) and report.case_rows_skipped == 0
    assert record(pg, case_id) == want
    assert exported(pg) == text  # byte for byte: timestamps to the microsecond, before/after kept

    back = Workspace(tmp_path / "back.duckdb")
    # the record first; its manifest says how the evidence was made, and open makes it so
    assert import_sessions(back.store, io.StringIO(exported(pg))).missing_cases == [case_id]
    assert back.open_case(case_id)["status"] == "rebuilt"
    assert back.open_case(case_id, verify=True)["status"] == "identical"
    again = import_sessions(back.store, io.StringIO(exported(pg)), on_conflict="skip")  # laid over it
    assert again.missing_cases == [] and again.case_rows == 0
    assert record(back.store, case_id) == want
    assert exported(back.store) == text
    assert evidence_view(back, case_id) == evidence_view(duck, case_id)
    assert back.cases.seen(ids[0], "address") == duck.cases.seen(ids[0], "address")

    by_case = costs(duck.store, by="case")
    assert by_case["cost_usd"].notna().any()
    pd.testing.assert_frame_equal(costs(pg, by="case"), by_case)
    pd.testing.assert_frame_equal(costs(back.store, by="case"), by_case)
    duck.close()
    back.close()


@pytest.mark.parametrize("engine", ["duckdb", "postgresql"])
def test_importing_again_is_refused_or_skipped_row_by_row(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    case_id, _ = annotated_workspace(tmp_path / "ws.duckdb")
    with TranscriptStore(tmp_path / "ws.duckdb") as duck:
        text = exported(duck, case=case_id)
    target = str(tmp_path / "t.duckdb") if engine == "duckdb" else request.getfixturevalue("pg_url")
    store = TranscriptStore(target)
    first = import_sessions(store, io.StringIO(text))
    assert len(first.imported) == 1  # --case: the case's session, not the one on no case
    # the same rows again: refused naming each clash, or left as they are
    row_line = next(i for i, line in enumerate(text.splitlines(), 1) if "tahrix-audit/1" in line)
    with pytest.raises(ConfigurationError, match=rf"line {row_line}: audit_id: AUD-\S+ is already in"):
        import_sessions(store, io.StringIO(text))
    again = import_sessions(store, io.StringIO(text), on_conflict="skip")
    assert again.imported == [] and again.case_rows == 0 and again.case_rows_skipped == first.case_rows
    assert exported(store, case=case_id) == text


GOOD_ROW = {"format": "tahrix-annotation/1", "case_id": "C-1", "kind": "note", "key": "NOTE-1",
            "value": {"text": "x"}, "updated_by": "ana", "updated_at": "2026-03-04T05:06:07.123456+00:00"}  # fmt: skip


def _with(**changes: Any) -> str:
    return json.dumps({**GOOD_ROW, **changes})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_with()[:-20], "line 2: column .*: not valid JSON"),  # a truncated line
        (_with(format="tahrix-annotation/9"), "line 2: format: not a Tahrix session record or case row"),
        (_with(format="tahrix-audit/1"), "line 2: key: not a field of a tahrix-audit/1 row"),  # another kind
        (_with(updated_at="yesterday"), 'line 2: updated_at: "yesterday" is not a timestamp'),
        (
            _with(updated_at="2026-03-04T05:06:07"),
            "line 2: updated_at: .* not a timestamp with its time zone",
        ),
        (_with(kind="colour"), "line 2: kind: .* is not one of flag, role"),
        (_with(value=[1]), r"line 2: value: \[1\] is not an object or null"),
        (_with(extra=1), "line 2: extra: not a field of a tahrix-annotation/1 row"),
        (
            json.dumps({k: v for k, v in GOOD_ROW.items() if k != "updated_by"}),
            "line 2: updated_by: missing",
        ),
        (
            json.dumps(
                {
                    "format": "tahrix-case-access/1",
                    "case_id": "C-1",
                    "user": "bob",
                    "role": "boss",
                    "granted_by": None,
                    "granted_at": GOOD_ROW["updated_at"],
                }
            ),
            'line 2: role: "boss" is not one of viewer',
        ),
    ],
)
def test_a_hostile_file_is_refused_naming_the_line_nothing_written(
    store_target: str, tmp_path: Path, bad: str, message: str
) -> None:
    source = TranscriptStore(tmp_path / "src.duckdb")
    s = source.create_session(user="ana")
    source.mark_seen(s.id, "address", ["0xa"])
    text = exported(source) + bad + "\n" + json.dumps(GOOD_ROW) + "\n"
    store = TranscriptStore(store_target)
    with pytest.raises(ConfigurationError, match=message) as info:
        import_sessions(store, io.StringIO(text))
    assert str(info.value).startswith("Nothing was imported") and "1 bad record(s) of 3" in str(info.value)
    assert store.list_sessions() == [] and store.record_cases() == [] and store.seen_rows([s.id]) == []
    source.close()


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", *args], env=env, capture_output=True, text=True, timeout=180
    )


def test_an_analyst_moves_a_workspace_with_the_cli(tmp_path: Path, pg_url: str) -> None:
    case_id, ids = annotated_workspace(tmp_path / "ws.duckdb")
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "NO_COLOR": "1", "COLUMNS": "200"}
    duck_env = {**base, "TAHRIX_DB": str(tmp_path / "ws.duckdb")}
    pg_env = {**base, "TAHRIX_DB": pg_url}
    dump = tmp_path / "ws.jsonl"
    out = run_cli(duck_env, "export", "-o", str(dump))
    assert out.returncode == 0, out.stderr
    out = run_cli(pg_env, "import", str(dump))
    assert out.returncode == 0, out.stderr
    assert f"Imported {len(ids)} sessions" in out.stdout and "case rows" in out.stdout
    assert PASSWORD not in out.stdout + out.stderr

    one_case = [run_cli(env, "export", "--case", case_id) for env in (duck_env, pg_env)]
    assert all(r.returncode == 0 for r in one_case) and one_case[0].stdout == one_case[1].stdout
    by_case = [run_cli(env, "costs", "--by", "case", "--json") for env in (duck_env, pg_env)]
    assert by_case[0].returncode == 0 and by_case[0].stdout == by_case[1].stdout
    assert case_id in by_case[1].stdout

    # and back into a fresh DuckDB file, through stdin
    back_env = {**base, "TAHRIX_DB": str(tmp_path / "back.duckdb")}
    out = subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", "import", "-"], env=back_env, input=run_cli(pg_env, "export").stdout,
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert run_cli(back_env, "export").stdout == dump.read_text(encoding="utf-8")
    assert run_cli(back_env, "costs", "--by", "case", "--json").stdout == by_case[0].stdout
    again = run_cli(pg_env, "import", "--skip-existing", str(dump))
    assert again.returncode == 0 and "skipped" in again.stdout and "case rows already there" in again.stdout


def test_an_export_made_before_case_rows_travelled_still_imports(store_target: str) -> None:
    """Older exports carried a session's audit entries and seen rows from the DuckDB case tables
    (naive UTC times): they land in the record's tables."""
    old = {"format": "tahrix-session/1", "session": {"id": "s-old", "user": "ana", "purpose": "investigation",
           "created_at": "2026-01-02T03:04:05+00:00"}, "messages": [],
           "case": {"case_sessions": [{"session_id": "s-old", "case_id": "C-9", "grant": {"may_write": True},
                                       "created_by": "ana", "created_at": "2026-01-02T03:04:05", "updated_at": None}],
                    "case_session_seen": [{"session_id": "s-old", "kind": "address", "key": "0xa",
                                           "first_at": "2026-01-02T03:04:06"}],
                    "audit_log": [{"audit_id": "AUD-old", "at_time": "2026-01-02T03:04:07.5", "actor": "agent:s-old",
                                   "session_id": "s-old", "case_id": "C-9", "action": "note", "target_kind": "note",
                                   "target_id": "NOTE-1", "before": None, "after": {"text": "x"},
                                   "reverted_by": None}]}}  # fmt: skip
    store = TranscriptStore(store_target)
    report = import_sessions(store, io.StringIO(json.dumps(old) + "\n"))
    assert report.imported == ["s-old"] and report.case_rows == 3
    [seen] = store.seen_rows(["s-old"])
    assert seen["first_at"] == datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)
    [entry] = store.audit_entries("C-9")
    assert entry["at_time"] == datetime(2026, 1, 2, 3, 4, 7, 500000, tzinfo=UTC) and entry["after"] == {
        "text": "x"
    }
    # a bad time in a session's seen rows is named by its place in the line
    old["session"]["id"] = "s-other"  # type: ignore[index]
    old["case"]["case_sessions"] = []  # type: ignore[index]
    old["case"]["case_session_seen"] = [{"kind": "address", "key": "0xb", "first_at": "soon"}]  # type: ignore[index]
    with pytest.raises(ConfigurationError, match=r"line 1: case\.case_session_seen\[0\]\.first_at: \"soon\""):
        import_sessions(store, io.StringIO(json.dumps(old) + "\n"))
