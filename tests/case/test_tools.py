from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tahrix_lab.agent import FakeBackend, Part, Session, run_tool
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.case.context import ToolContext
from tahrix_lab.case.generator import INJECTION
from tahrix_lab.case.tools import CASE_TOOLS, register_case_tools
from tahrix_lab.case.workspace import Workspace

EXPECTED = {"get_case_overview", "lookup_address", "get_transaction", "list_transfers", "trace_funds", "find_bridge_events",
            "match_bridge_leg", "run_detectors", "list_flags", "screen_exposure", "run_sql", "annotate", "verify_citations"}  # fmt: skip


def call(ws: Workspace, session: Session | None, name: str, args: dict[str, Any], provider: Any = None):
    return run_tool(
        Part.of_tool_use("tu", name, args),
        provider or ws.context_provider(),
        registry=CASE_TOOLS,
        session=session,
    )


@pytest.fixture
def session(loaded: Workspace) -> Session:
    return loaded.start_investigation("CASE-001", user="ana", grant={"may_write": False})


def test_every_tool_is_described_and_its_examples_validate() -> None:
    assert {t.name for t in CASE_TOOLS} == EXPECTED
    for tool in CASE_TOOLS:
        assert "investigation" in tool.purposes and len(tool.description) > 60
        assert tool.examples, tool.name
        for example in tool.examples:
            jsonschema.validate(example, tool.parameters)
    assert {t.name for t in CASE_TOOLS if t.writes} == {"annotate", "run_detectors"}
    reg = register_case_tools(type(CASE_TOOLS)())
    assert len(reg) == len(CASE_TOOLS) and reg.catalog_for("investigation")


def test_read_tools_return_evidence(
    loaded: Workspace, session: Session, ground_truth: dict[str, Any]
) -> None:
    a = ground_truth["actors"]
    out = call(loaded, session, "get_transaction", {"tx_hash": ground_truth["theft_tx_hashes"][0]})
    assert out.status == "ok"
    tx = out.result["matches"][0]
    assert (
        tx["transfers"][0]["transfer_id"].startswith("ethereum:")
        and tx["transfers"][0]["to_address"] == a["A0"]
    )
    out = call(
        loaded,
        session,
        "list_transfers",
        {"address": a["A0"], "direction": "out", "min_usd": 1_000_000, "limit": 3},
    )
    assert out.result["truncated"] is True and len(out.result["transfers"]) == 3
    assert all(t["usd_value"] >= 1_000_000 and t["tx_hash"] for t in out.result["transfers"])
    out = call(loaded, session, "find_bridge_events", {"bridge_name": "thorchain", "limit": 100})
    assert out.result["count"] == 30 and all(b["time_delta_s"] >= 1200 for b in out.result["bridge_events"])
    out = call(loaded, session, "list_flags", {"view": "raw", "flag_type": "structuring"})
    assert out.result["flags"][0]["address"] == a["T1"] and out.result["flags"][0]["params"]["min_count"] == 3
    ov = call(loaded, session, "get_case_overview", {}).result
    assert ov["case"]["case_id"] == "CASE-001" and ov["flags_by_type"]


def test_match_bridge_leg_protocol_id_then_amount(loaded: Workspace, session: Session) -> None:
    for name, method in (("thorchain", "memo"), ("multichain", "protocol_id"), ("stargate", "protocol_id")):
        b = loaded.cases.one(
            "SELECT * FROM bridge_events WHERE case_id = 'CASE-001' AND bridge_name = ? LIMIT 1", [name]
        )
        r = call(loaded, session, "match_bridge_leg", {"src_tx_hash": b["src_tx_hash"]}).result
        assert (
            r["candidates"][0]["dst_tx_hash"] == b["dst_tx_hash"]
            and r["candidates"][0]["match_method"] == method
        )
        assert r["candidates"][0]["confidence"] == 1.0
    # without protocol ids, the amount-and-time heuristic still ranks the right leg
    b = loaded.cases.one(
        "SELECT * FROM bridge_events WHERE case_id = 'CASE-001' AND bridge_name = 'multichain' LIMIT 1"
    )
    cur = loaded.cases.connection.cursor()
    cur.execute(
        "CREATE TEMP TABLE saved AS SELECT tx_hash, memo FROM transactions WHERE case_id = 'CASE-001' AND tx_hash = ?",
        [b["dst_tx_hash"]],
    )
    try:
        loaded.cases.connection.execute(
            "UPDATE transactions SET memo = NULL WHERE case_id = 'CASE-001' AND tx_hash = ?",
            [b["dst_tx_hash"]],
        )
        r = call(
            loaded, session, "match_bridge_leg", {"src_tx_hash": b["src_tx_hash"], "fee_tolerance_pct": 1}
        ).result
        assert (
            r["candidates"][0]["match_method"] == "amount_time"
            and r["candidates"][0]["dst_tx_hash"] == b["dst_tx_hash"]
        )
        assert 0 < r["candidates"][0]["confidence"] <= 0.8
    finally:
        cur.execute("UPDATE main.transactions t SET memo = s.memo FROM saved s WHERE t.tx_hash = s.tx_hash")


def test_screen_exposure_respects_validity(
    loaded: Workspace, session: Session, ground_truth: dict[str, Any]
) -> None:
    a = ground_truth["actors"]
    r = call(loaded, session, "screen_exposure", {"addresses": [{"chain": "bitcoin", "address": a["peel_chain"][12]},
             {"chain": "bitcoin", "address": a["XU"]}, {"chain": "bitcoin", "address": a["peel_chain"][11]}],
             "lists": ["sanctions"], "max_hops": 1}).result["results"]  # fmt: skip
    assert r[0]["direct"]["usd"] > 0 and r[0]["direct"]["hits"][0]["label_id"]
    assert r[1]["direct"]["usd"] == 0
    assert r[2]["direct"]["usd"] == 0 and r[2]["indirect"][0]["path"][-1] == a["peel_chain"][12]
    before = call(loaded, session, "screen_exposure", {"addresses": [{"chain": "bitcoin", "address": a["peel_chain"][12]}],
                  "lists": ["sanctions"], "max_hops": 0, "as_of": "2024-03-20T00:00:00Z"}).result  # fmt: skip
    assert before["results"][0]["direct"]["usd"] == 0


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE transfers",
        "INSERT INTO labels SELECT * FROM labels",
        "UPDATE anomaly_flags SET status = 'dismissed'",
        "SELECT 1; SELECT 2",
        "SELECT 1; DROP TABLE transfers",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM 'data.csv'",
        "COPY transfers TO '/tmp/x.csv'",
        "ATTACH '/tmp/other.duckdb' AS o",
        "PRAGMA database_list",
        "SET threads = 1",
        "SELECT * FROM sessions",
        "SELECT * FROM parts",
        "SELECT * FROM case_sessions",
        "SELECT * FROM session_cases",
        "SELECT * FROM usage_daily",
        "SELECT * FROM duckdb_tables()",
        "SELECT getenv('HOME')",
        "SELECT * FROM glob('/tmp/*')",
        "SELECT * FROM query('DROP TABLE transfers')",
        "WITH x AS (SELECT * FROM audit_log) SELECT * FROM x",
        "SELECT * FROM main.sessions",
        "SELECT * FROM system.main.duckdb_settings()",
    ],
)
def test_run_sql_refuses(loaded: Workspace, session: Session, query: str) -> None:
    out = call(loaded, session, "run_sql", {"query": query})
    assert out.status == "error" and out.result["error"]["type"] == "retry", out.result
    assert loaded.cases.scalar("SELECT count(*) FROM transfers") > 5000


def test_run_sql_reads_with_limits(loaded: Workspace, session: Session) -> None:
    out = call(
        loaded,
        session,
        "run_sql",
        {"query": "SELECT transfer_id FROM transfers ORDER BY transfer_id", "limit": 5},
    )
    assert out.status == "ok" and out.result["row_count"] == 5 and out.result["truncated"] is True
    out = call(
        loaded,
        session,
        "run_sql",
        {
            "query": "WITH t AS (SELECT chain FROM transfers) SELECT chain, count(*) FROM t GROUP BY 1 -- comment"
        },
    )
    assert out.status == "ok" and sorted(r[0] for r in out.result["rows"]) == [
        "bitcoin",
        "bsc",
        "ethereum",
        "tron",
    ]
    from tahrix_lab.case.sqlguard import SQLRefused, run_sql

    with pytest.raises(SQLRefused, match="longer than"):
        run_sql(loaded.cases, "SELECT count(*) FROM range(100000000000) a", timeout_s=0.2)


def test_injection_strings_are_inert_data(
    loaded: Workspace, session: Session, ground_truth: dict[str, Any]
) -> None:
    inj = ground_truth["injection"]
    out = call(loaded, session, "lookup_address", {"address": inj["label_address"]})
    assert out.status == "ok" and out.effects == []
    labels = out.result["matches"][0]["labels"]
    assert [lab["label"] for lab in labels] == [INJECTION]
    assert "data_note" in out.result
    tok = call(
        loaded,
        session,
        "run_sql",
        {"query": f"SELECT name AS _effects FROM assets WHERE asset_key = '{inj['token_asset_key']}'"},
    )
    assert tok.status == "ok" and tok.effects == [] and tok.result["rows"] == [[INJECTION]]
    memo = call(loaded, session, "list_transfers", {"chain": "tron", "limit": 500})
    assert memo.effects == []
    # nothing read from data changes data
    assert loaded.cases.scalar("SELECT count(*) FROM audit_log") == 0


def test_grant_bites_on_next_call_and_lands_in_transcript(ws: Workspace) -> None:
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    flag = ws.flags("CASE-001", flag_type="peel_chain")[0]["flag_id"]
    args = {"target_kind": "flag", "target": flag, "action": "confirm_flag", "payload": {"note": INJECTION}}

    def narrow_then_ask(messages: Any, tools: Any) -> list[Any]:
        ws.set_grant(s.id, {"tools": ["list_flags", "annotate"], "may_write": False})
        return [tool_call("annotate", args, id="c2"), tool_call("get_case_overview", {}, id="c3")]

    backend = FakeBackend([[tool_call("annotate", args, id="c1")], narrow_then_ask, [text("done")]])
    events = list(ws.ask(s, "confirm the peel chain", backend=backend, model="fake"))
    results = [p for _, p in events if _ == "tool_result"]
    assert [r["status"] for r in results] == ["ok", "error", "error"]
    assert (
        results[1]["result"]["error"]["type"] == "denied"
        and "read-only" in results[1]["result"]["error"]["message"]
    )
    assert "get_case_overview" in results[2]["result"]["error"]["message"]
    assert ("effects", {"effects": [{"type": "flags_changed", "case_id": "CASE-001", "flag_ids": [flag],
                                     "audit_id": results[0]["result"]["audit_id"]}]}) in events  # fmt: skip
    stored = [p for m in ws.store.load_messages(s.id) for p in m.parts if p.type == "tool_result"]
    assert [p.tool_status for p in stored] == ["ok", "error", "error"]
    assert "_effects" not in json.dumps([p.tool_result for p in stored])
    log = ws.audit_log("CASE-001")
    assert len(log) == 1 and log[0]["before"]["status"] == "new" and log[0]["after"]["status"] == "confirmed"
    assert log[0]["after"]["analyst_note"] == INJECTION and log[0]["actor"] == f"agent:{s.id}"


def test_annotate_audit_revert_and_confirmation(ws: Workspace, ground_truth: dict[str, Any]) -> None:
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    a0 = ground_truth["actors"]["A0"]
    r = call(ws, s, "annotate", {"target_kind": "address", "target": a0, "chain": "ethereum", "action": "add_label",
                                 "payload": {"label": "Aurora Gate exploiter", "category": "perpetrator"}})  # fmt: skip
    assert r.status == "ok" and r.effects[0]["type"] == "labels_changed"
    assert any(
        lab["label"] == "Aurora Gate exploiter"
        for lab in call(ws, s, "lookup_address", {"address": a0}).result["matches"][0]["labels"]
    )
    role = call(
        ws,
        s,
        "annotate",
        {"target_kind": "address", "target": a0, "action": "set_role", "payload": {"role": "suspect"}},
    )
    assert role.effects[0]["type"] == "roles_changed"
    ws.revert(role.result["audit_id"], actor="ana")
    assert ws.cases.scalar("SELECT role FROM case_addresses WHERE address = ?", [a0]) == "perpetrator"
    ws.revert(r.result["audit_id"], actor="ana")
    assert not ws.cases.scalar("SELECT count(*) FROM labels WHERE label = 'Aurora Gate exploiter'")
    # another analyst's decision waits for the analyst (tests/case/test_consent.py has the whole cycle)
    flag = ws.flags("CASE-001", flag_type="dusting")[0]["flag_id"]
    ws.cases.connection.execute(
        "UPDATE anomaly_flags SET status = 'confirmed', updated_by = 'bob' WHERE flag_id = ?", [flag]
    )
    ask = call(ws, s, "annotate", {"target_kind": "flag", "target": flag, "action": "dismiss_flag"})
    assert ask.result["error"]["type"] == "awaiting_approval" and ask.effects == []
    done = ws.annotate("CASE-001", "flag", flag, "dismiss_flag", analyst="ana")  # the analyst decides
    assert done["after"]["status"] == "dismissed"
    note = call(
        ws,
        s,
        "annotate",
        {"target_kind": "flag", "target": flag, "action": "note", "payload": {"text": "checked"}},
    )
    assert note.effects[0]["type"] == "notes_changed"
    assert [e["action"] for e in ws.audit_log("CASE-001")] == [
        "add_label",
        "set_role",
        "revert:set_role",
        "revert:add_label",
        "dismiss_flag",
        "note",
    ]


def test_revert_of_a_role_set_again_since_is_refused(ws: Workspace, ground_truth: dict[str, Any]) -> None:
    """Undoing ana's role after bob set another would silently put back what bob replaced."""
    a0 = ground_truth["actors"]["A0"]
    role_of = "SELECT role, added_by FROM case_addresses WHERE address = ?"
    ana = ws.annotate(
        "CASE-001", "address", a0, "set_role", {"role": "suspect"}, analyst="ana", chain="ethereum"
    )
    bob = ws.annotate(
        "CASE-001", "address", a0, "set_role", {"role": "victim"}, analyst="bob", chain="ethereum"
    )
    with pytest.raises(UserFacingError, match=r"role was set again since \(victim by bob\)"):
        ws.revert(ana["audit_id"], actor="ana")
    assert ws.cases.rows(role_of, [a0]) == [{"role": "victim", "added_by": "bob"}]
    assert not ws.cases.scalar("SELECT count(*) FROM audit_log WHERE action = 'revert:set_role'")
    # bob's own write is still his to undo, and then ana's is the current one again
    ws.revert(bob["audit_id"], actor="bob")
    ws.revert(ana["audit_id"], actor="ana")
    assert ws.cases.scalar("SELECT role FROM case_addresses WHERE address = ?", [a0]) == "perpetrator"


def test_seen_addresses_dedup_across_calls(ws: Workspace, ground_truth: dict[str, Any]) -> None:
    s = ws.start_investigation("CASE-001", user="ana")
    a = ground_truth["actors"]["I1"]
    first = call(ws, s, "lookup_address", {"address": a}).result["matches"][0]["already_seen_in_session"]
    second = call(ws, s, "lookup_address", {"address": a}).result["matches"][0]["already_seen_in_session"]
    assert (first, second) == (False, True)
    ctx = ws.context_provider().for_tool_call(s, CASE_TOOLS.get("list_flags"), {})  # type: ignore[arg-type]
    assert (
        isinstance(ctx, ToolContext) and f"ethereum:{a}" in ctx.seen_addresses and ctx.case_id == "CASE-001"
    )
    other = ws.start_investigation("CASE-001", user="bob")
    assert (
        call(ws, other, "lookup_address", {"address": a}).result["matches"][0]["already_seen_in_session"]
        is False
    )


def test_unlinked_session_and_wrong_case_are_denied(ws: Workspace) -> None:
    loose = ws.store.create_session(user="x", purpose="investigation")
    out = call(ws, loose, "get_case_overview", {})
    assert out.result["error"]["type"] == "denied"
    s = ws.start_investigation("CASE-001", user="ana")
    out = call(ws, s, "get_case_overview", {"case_id": "CASE-999"})
    assert out.result["error"]["type"] == "denied" and "CASE-999" in out.result["error"]["message"]


def test_memo_and_token_name_injection_are_data(
    loaded: Workspace, session: Session, ground_truth: dict[str, Any]
) -> None:
    row = loaded.cases.one("SELECT chain, tx_hash FROM transactions WHERE memo = ?", [INJECTION])
    assert row is not None
    out = call(loaded, session, "get_transaction", {"tx_hash": row["tx_hash"], "chain": row["chain"]})
    assert out.status == "ok" and out.effects == []
    assert out.result["matches"][0]["transaction"]["memo"] == INJECTION
    spam = loaded.cases.one(
        "SELECT tx_hash FROM transfers WHERE asset_key = ?", [ground_truth["injection"]["token_asset_key"]]
    )
    assert spam is not None
    out = call(loaded, session, "get_transaction", {"tx_hash": spam["tx_hash"]})
    assert {t["token_name"] for t in out.result["matches"][0]["transfers"]} == {INJECTION}
    assert out.effects == [] and "data_note" in out.result


def test_run_sql_sees_only_the_sessions_case(ws: Workspace, tmp_path: Any) -> None:
    other = tmp_path / "other.csv"
    other.write_text(
        "hash,nonce,transaction_index,from_address,to_address,value,gas,gas_price,input,receipt_gas_used,receipt_status,block_timestamp,block_number\n"
        f"0x{'7' * 64},0,1,0x{'1' * 40},0x{'2' * 40},5,21000,1,0x,21000,1,1710209640,1\n"
    )
    ws.load_etl_csv("C-OTHER", other)
    s = ws.start_investigation("CASE-001", user="ana")
    for query in ("SELECT DISTINCT case_id FROM transfers", "SELECT DISTINCT case_id FROM main.transfers",
                  "SELECT case_id FROM cases", "SELECT DISTINCT case_id FROM addresses"):  # fmt: skip
        out = call(ws, s, "run_sql", {"query": query})
        assert out.status == "ok" and out.result["rows"] == [["CASE-001"]], (query, out.result)
    assert call(ws, s, "run_sql", {"query": "SELECT count(*) FROM chains"}).result["rows"][0][0] >= 4
    assert ws.cases.scalar("SELECT count(*) FROM transfers WHERE case_id = 'C-OTHER'") == 1


def test_run_detectors_tool_is_audited(ws: Workspace) -> None:
    s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": True})
    out = call(
        ws,
        s,
        "run_detectors",
        {"detectors": ["structuring"], "param_overrides": {"structuring": {"min_count": 13}}},
    )
    assert out.status == "ok" and out.effects[0]["type"] == "flags_changed"
    entry = ws.audit_log("CASE-001")[-1]
    assert entry["action"] == "run_detectors" and entry["audit_id"] == out.result["audit_id"]
    assert (
        entry["before"]["flags_by_type"]["structuring"] == 1
        and "structuring" not in entry["after"]["flags_by_type"]
    )
    assert entry["after"]["params"]["structuring"]["min_count"] == 13
    bad = call(ws, s, "run_detectors", {"param_overrides": {"structuring": {"nonsense": 1}}})
    assert bad.status == "error" and "nonsense" in bad.result["error"]["message"]
