"""Case panels on the Python side, fed by plain callables (no case package needed)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.lab.panels import FlagsPanel, FlowGraphPanel
from tahrix_lab.lab.widget import ChatWidget

FLAGS = [
    {"flag_id": "f1", "flag_type": "peel_chain", "severity": "high", "score": Decimal("0.91"),
     "address": "0xabc", "status": "open", "created_at": datetime(2024, 1, 2, tzinfo=UTC), "evidence": {"tx": ["0x1"]}},
    {"flag_id": "f2", "flag_type": "dusting", "severity": "low", "score": 0.2, "subject": "0xdef", "status": "dismissed"},
]  # fmt: skip

GRAPH = {
    "nodes": [
        {"id": "eth:0xa", "label": "Bridge exploiter", "category": "perpetrator", "hop": 0, "extra": "dropped"},
        {"id": "eth:0xb", "label": None, "category": None, "address": "0xb"},
        {"id": "eth:0xc", "label": "Exchange", "category": "exchange"},
    ],
    "edges": [
        {"source": "eth:0xa", "target": "eth:0xb", "amount": "100", "usd": 250000.0, "tx_hash": "0x1"},
        {"source": "eth:0xb", "target": "eth:0xc", "usd": Decimal("1200.5"), "tx_hashes": ["0x2", "0x3"], "transfers": 2},
    ],
}  # fmt: skip


class Source:
    """A loader that counts its calls and can be changed between them."""

    def __init__(self, data: Any) -> None:
        self.data = data
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        if isinstance(self.data, Exception):
            raise self.data
        return self.data


def test_flags_panel_shows_a_plain_list_as_the_raw_table() -> None:
    panel = FlagsPanel(Source(FLAGS), title="Flags")
    assert panel.kind == "flags"
    assert panel.title == "Flags"
    assert panel.rows == []  # no triage rows: the raw table alone
    assert panel.raw == [
        {"flag_id": "f1", "flag_type": "peel_chain", "severity": "high", "score": 0.91, "subject": "0xabc", "status": "open"},
        {"flag_id": "f2", "flag_type": "dusting", "severity": "low", "score": 0.2, "subject": "0xdef", "status": "dismissed"},
    ]  # fmt: skip
    assert panel.error == ""


def test_refresh_reloads_and_a_failing_loader_shows_a_calm_error() -> None:
    source = Source(FLAGS[:1])
    panel = FlagsPanel(source)
    source.data = FLAGS
    panel.refresh()
    assert [r["flag_id"] for r in panel.raw] == ["f1", "f2"]
    source.data = RuntimeError("database is locked")
    panel.refresh()
    assert panel.error == "Could not load this panel's data: database is locked"
    assert len(panel.raw) == 2  # the last good data stays
    source.data = FLAGS[:1]
    panel.refresh()
    assert panel.error == ""
    assert source.calls == 4


def test_graph_panel_keeps_the_fields_and_makes_them_json() -> None:
    panel = FlowGraphPanel(Source(GRAPH))
    assert panel.kind == "graph"
    assert panel.graph["nodes"][0] == {
        "id": "eth:0xa",
        "label": "Bridge exploiter",
        "category": "perpetrator",
        "hop": 0,
        "extra": "dropped",
    }
    assert panel.graph["edges"][1] == {"source": "eth:0xb", "target": "eth:0xc", "usd": "1200.5",
                                       "tx_hashes": ["0x2", "0x3"], "transfers": 2}  # fmt: skip


def test_bad_loaders_are_named() -> None:
    with pytest.raises(TypeError, match="load must be a callable"):
        FlagsPanel([])  # type: ignore[arg-type]
    panel = FlowGraphPanel(Source([1, 2]))
    assert "must return a dict with 'nodes'" in panel.error
    flags = FlagsPanel(Source({"flags": []}))
    assert "expected a list of dicts or a triage dict" in flags.error


@pytest.fixture
def chat_store(tmp_path: Path) -> Iterator[TranscriptStore]:
    s = TranscriptStore(tmp_path / "panels.duckdb")
    yield s
    s.close()


def test_panels_follow_a_chat_and_refresh_on_their_effects(chat_store: TranscriptStore) -> None:
    flags_source, graph_source = Source(FLAGS[:1]), Source(GRAPH)
    tools = ToolRegistry()

    @tools.register(parameters={"type": "object", "properties": {"kind": {"type": "string"}}})
    def change(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Pretend to write to the case."""
        if args["kind"] == "flags_changed":
            flags_source.data = FLAGS
        return {"ok": True, "_effects": [{"type": args["kind"], "case_id": "c1"}]}

    chat = ChatWidget(
        store=chat_store,
        model="fake-model",
        registry=tools,
        backend=FakeBackend(
            [
                [tool_call("change", {"kind": "labels_changed"})],
                [text("Labelled.")],
                [tool_call("change", {"kind": "flags_changed"})],
                [text("Flags written.")],
            ]
        ),
    )
    flags = FlagsPanel(flags_source).follow(chat)
    graph = FlowGraphPanel(graph_source).follow(chat)
    assert (flags_source.calls, graph_source.calls) == (1, 1)

    chat.ask("label it", timeout=30)
    assert (flags_source.calls, graph_source.calls) == (1, 2)  # only the graph cares about labels
    assert graph.last_effect == {"type": "labels_changed", "case_id": "c1"}

    chat.ask("run the detectors", timeout=30)
    assert (flags_source.calls, graph_source.calls) == (2, 2)
    assert [r["flag_id"] for r in flags.raw] == ["f1", "f2"]


def test_refresh_on_can_be_widened() -> None:
    panel = FlagsPanel(Source(FLAGS), refresh_on="all")
    panel._on_effect({"type": "anything"})
    assert panel.last_effect == {"type": "anything"}
    narrow = FlowGraphPanel(Source(GRAPH), refresh_on=["notes_changed"])
    narrow._on_effect({"type": "trace_ready"})
    assert narrow.last_effect is None
    narrow._on_effect({"type": "notes_changed"})
    assert narrow.last_effect == {"type": "notes_changed"}


def test_trace_onward_merges_what_the_tracer_finds_and_a_failure_is_shown() -> None:
    asked: list[dict[str, Any]] = []

    def trace_from(node: dict[str, Any]) -> dict[str, Any]:
        asked.append(node)
        if node["id"] == "eth:0xb":
            raise ValueError("no transfers after this address")
        return {
            "nodes": [
                {"id": "eth:0xc", "label": "dropped duplicate"},
                {"id": "eth:0xd", "label": "Cash-out"},
            ],
            "edges": [
                {"source": "eth:0xc", "target": "eth:0xd", "usd": 90.0, "first_time": "2024-03-13T03:28:00Z"}
            ],
        }

    panel = FlowGraphPanel(Source(GRAPH), trace_from=trace_from)
    assert panel.can_trace is True
    assert FlowGraphPanel(Source(GRAPH)).can_trace is False
    panel._on_front_end({"type": "trace", "node": "eth:0xc"})
    assert asked[0]["label"] == "Exchange"
    assert [n["id"] for n in panel.graph["nodes"]] == ["eth:0xa", "eth:0xb", "eth:0xc", "eth:0xd"]
    assert panel.graph["nodes"][2]["label"] == "Exchange"  # what was shown first wins
    assert panel.note == "Traced onward from Exchange: 1 new addresses, 1 new flows."
    assert panel.added == ["eth:0xd"]  # the front end brings these into view, the selection stays
    assert panel.graph["edges"][-1] == {"source": "eth:0xc", "target": "eth:0xd", "usd": 90.0,
                                        "first_time": "2024-03-13T03:28:00Z"}  # fmt: skip
    panel._on_front_end({"type": "trace", "node": "eth:0xb"})
    assert panel.error == "Could not trace onward: no transfers after this address"
    assert len(panel.graph["nodes"]) == 4  # the graph stays as it was
    assert panel.added == []
    panel._on_front_end({"type": "trace", "node": "eth:0xnone"})
    assert "no node 'eth:0xnone'" in panel.error


def test_the_graph_panel_ships_its_library_and_the_flags_panel_does_not() -> None:
    assert "TahrixCytoscape" in FlowGraphPanel._esm and "dagre" in FlowGraphPanel._esm
    assert "TahrixCytoscape=" not in FlagsPanel._esm
    assert len(FlagsPanel._esm) < 50_000


# -- on a real case: triage rows, the graph payload, focus and the link between the panels -----
@pytest.fixture(scope="module")
def case_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tahrix_lab.case.workspace import Workspace

    ws = Workspace(tmp_path_factory.mktemp("panels") / "case.duckdb")
    ws.load_sample_case()
    yield ws
    ws.close()


def test_the_flags_panel_opens_on_the_triage_rows(case_ws: Any) -> None:
    panel = FlagsPanel.for_case(case_ws, "CASE-001")
    triage = case_ws.triage("CASE-001")
    assert [r["row_id"] for r in panel.rows] == [r["row_id"] for r in triage["rows"]]
    assert len(panel.raw) == triage["flags_total"]  # every raw flag one click away (none dismissed here)
    assert {"label", "chains", "amount_usd", "first_time", "status", "explanation"} <= set(panel.rows[0])


def test_flags_focus_and_select_reach_the_graph(case_ws: Any) -> None:
    flags = FlagsPanel.for_case(case_ws, "CASE-001")
    graph = FlowGraphPanel.for_case(case_ws, "CASE-001", max_hops=4, min_usd=1000)
    flags.link(graph)
    perp = next(r for r in flags.rows if r["role"] == "perpetrator")
    flag_id = perp["flags"][0]["flag_id"]
    assert flags.focus(flag_id) == perp["row_id"]
    assert flags.focus_request["row_id"] == perp["row_id"] and flags.focus_request["flag_id"] == flag_id
    with pytest.raises(ValueError, match="no flag 'FLG-nope'"):
        flags.focus("FLG-nope")
    # a row click (as the page sends it) highlights the row's addresses in the graph
    flags._on_front_end({"type": "select", "row_id": perp["row_id"]})
    assert graph.focus_request["ids"] == perp["addresses"]
    n = graph.focus_request["n"]
    assert graph.focus("0x33736DCCA7F0C99E80B5244A4767E1FA79823EB2") == perp["addresses"]  # any case
    assert graph.focus_request["n"] == n + 1  # a new request each time, so the page acts on a repeat
    # a flag clicked in a node's details opens its row
    graph._on_front_end({"type": "flag", "flag_id": flag_id})
    assert flags.focus_request["flag_id"] == flag_id


def test_the_graph_for_a_case_traces_onward_across_the_bridge(case_ws: Any) -> None:
    graph = FlowGraphPanel.for_case(case_ws, "CASE-001", max_hops=2, min_usd=1000)
    assert graph.can_trace and graph.error == ""
    router = "ethereum:0x221265400ab7798807fa22f715c891ff3add6527"  # Stargate's router, $35M out in the case
    pool = "bsc:0xb16107f1be437c7ba6caf4a341023aed54ef125a"
    assert pool not in {n["id"] for n in graph.graph["nodes"]}
    graph._on_front_end({"type": "trace", "node": router})
    assert graph.error == ""
    out = [e for e in graph.graph["edges"] if e["source"] == router]
    assert [(e["kind"], e["bridge_event_id"]) for e in out] == [
        ("bridge", "BR-0052")
    ]  # never its other outflows
    assert pool in graph.added  # the matched leg went on, over the second bridge
    assert graph.note.startswith("Traced onward from Stargate: router")


def test_an_analyst_confirms_and_dismisses_flags_from_the_panel(case_ws: Any) -> None:
    """The assistant's read-only grant says "please confirm it yourself": with ``analyst``, the
    panel's Confirm and Dismiss record the decision under that name, and the row shows it."""
    assert FlagsPanel.for_case(case_ws, "CASE-001").can_decide is False  # no name: no buttons
    flags = FlagsPanel.for_case(case_ws, "CASE-001", analyst="ana")
    assert flags.can_decide is True
    peel = next(r for r in flags.rows if "peel_chain" in r["flag_types"])
    flag_id = peel["flags"][0]["flag_id"]
    # as the page sends it
    flags._on_front_end({"type": "decide", "flag_id": flag_id, "action": "confirm_flag"})
    row = next(r for r in flags.rows if r["row_id"] == peel["row_id"])
    assert row["flags"][0]["status"] == "confirmed" and "confirmed" in row["status"]
    assert flags.error == ""
    audit = case_ws.cases.rows("SELECT actor, action FROM audit_log WHERE target_id = ?", [flag_id])
    assert audit[-1] == {"actor": "ana", "action": "confirm_flag"}

    flags._on_front_end({"type": "decide", "flag_id": "FLG-0000000000", "action": "dismiss_flag"})
    assert "Dismissing FLG-0000000000 was not recorded" in flags.error  # calm, in the panel
    with pytest.raises(ValueError, match="action must be one of"):
        flags.decide(flag_id, "delete_flag")
    before = len(flags.raw)
    # an analyst may change their mind: a dismissed flag leaves the triage
    flags.decide(flag_id, "dismiss_flag")
    assert flag_id not in {f["flag_id"] for f in flags.raw} and len(flags.raw) == before - 1
    assert flags.error == ""


def test_undo_takes_back_the_panels_last_decision_unless_the_flag_was_decided_again(case_ws: Any) -> None:
    """A dismissed flag leaves the triage: the panel's notice keeps an Undo for it. Undo restores
    the flag as it was (audited under the analyst), and refuses once someone decided it again."""
    flags = FlagsPanel.for_case(case_ws, "CASE-001", analyst="ana")
    assert flags.last_decision == {}
    with pytest.raises(ValueError, match="no decision of this panel to undo"):
        flags.undo()
    flag = next(f for r in flags.rows for f in r["flags"] if f["status"] == "new")
    flag_id = flag["flag_id"]
    flags._on_front_end({"type": "decide", "flag_id": flag_id, "action": "dismiss_flag"})
    assert flags.last_decision["flag_id"] == flag_id and flags.last_decision["action"] == "dismiss_flag"
    assert flag_id not in {f["flag_id"] for f in flags.raw}
    flags._on_front_end({"type": "undo"})  # as the notice's button sends it
    assert flags.error == "" and flags.last_decision == {}
    back = next(f for f in flags.raw if f["flag_id"] == flag_id)
    assert back["status"] == "new"
    audit = case_ws.cases.rows("SELECT actor, action FROM audit_log WHERE target_id = ?", [flag_id])
    assert audit[-1] == {"actor": "ana", "action": "revert:dismiss_flag"}
    flags._on_front_end({"type": "undo"})  # a second click: nothing left to undo, nothing changes
    assert flags.error == ""

    # bob confirms the flag after ana's decision: ana's Undo must not overturn his
    flags.decide(flag_id, "dismiss_flag")
    case_ws.annotate("CASE-001", "flag", flag_id, "confirm_flag", analyst="bob")
    flags._on_front_end({"type": "undo"})
    assert (
        f"Undoing the decision on {flag_id} failed: {flag_id} was decided again since (confirmed by bob)"
        in (flags.error)
    )
    assert flags.last_decision == {}
    assert next(f for f in case_ws.flags("CASE-001") if f["flag_id"] == flag_id)["status"] == "confirmed"


def test_revert_with_a_case_reverts_only_that_cases_entries(case_ws: Any) -> None:
    from tahrix_lab.agent.errors import UserFacingError

    flag_id = case_ws.flags("CASE-001")[0]["flag_id"]
    done = case_ws.annotate("CASE-001", "flag", flag_id, "confirm_flag", analyst="ana")
    with pytest.raises(UserFacingError, match=f"No audit entry '{done['audit_id']}' in case 'CASE-999'"):
        case_ws.revert(done["audit_id"], actor="ana", case_id="CASE-999")
    assert case_ws.revert(done["audit_id"], actor="ana", case_id="CASE-001")["reverted"] == done["audit_id"]


def test_two_undos_at_once_revert_once(case_ws: Any) -> None:
    import threading

    from tahrix_lab.agent.errors import UserFacingError

    done = case_ws.annotate("CASE-001", "address", "0x" + "ab" * 20, "add_label", {"label": "desk", "category": "exchange"},
                            analyst="ana",
                            chain="ethereum")  # fmt: skip
    start, outcomes = threading.Barrier(4), []

    def undo() -> None:
        start.wait()
        try:
            outcomes.append(case_ws.revert(done["audit_id"], actor="ana", case_id="CASE-001")["audit_id"])
        except UserFacingError as exc:
            outcomes.append(exc.message)

    threads = [threading.Thread(target=undo) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(o.startswith(f"{done['audit_id']} was already reverted by") for o in outcomes) == 3, outcomes
    reverts = case_ws.cases.rows("SELECT audit_id FROM audit_log WHERE action = 'revert:add_label'")
    assert len(reverts) == 1
