"""Bounded tool results: the cap holds for any JSON object, and the record never holds more."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.agent import FakeBackend, Part, run_tool
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.bounds import bound, json_size
from tahrix_lab.agent.tools import DEFAULT_MAX_RESULT_BYTES, ToolRegistry, model_facing
from tahrix_lab.case.workspace import Workspace

HUGE = "SELECT repeat('a', 100000000) AS big"
MARKER = "…[truncated: 100,000,000 characters]"

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.text(max_size=5).map(lambda s: s * 500)  # long cells, with escapes and wide characters
)
json_values = st.deferred(
    lambda: (
        scalars
        | st.lists(json_values, max_size=40)
        | st.dictionaries(st.text(max_size=10), json_values, max_size=6)
    )
)
json_objects = st.dictionaries(st.text(max_size=20), json_values, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_objects, st.integers(min_value=2, max_value=4000))
def test_bounded_result_fits_the_cap_and_is_unchanged_under_it(value: dict[str, Any], cap: int) -> None:
    out = bound(value, cap)
    assert json_size(out) <= cap
    if json_size(value) <= cap:
        assert out is value


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=20), st.integers(min_value=3000, max_value=20_000))
def test_long_cells_keep_their_head_and_say_their_size(cell: str, cap: int) -> None:
    long = cell * (cap // len(cell) + 50)
    out = bound({"rows": [[long]], "count": 1}, cap)
    kept = out["rows"][0][0]
    assert json_size(out) <= cap and out["truncated"] is True and "bounded" in out
    assert kept.endswith(f"…[truncated: {len(long):,} characters]")
    assert long.startswith(kept.split("…[truncated")[0])
    assert out["count"] == 1  # what fits is kept as it was


def test_long_lists_say_how_many_items_were_left_out() -> None:
    out = bound({"items": list(range(10_000))}, 2000)
    assert out["items"][-1] == f"…[{10_000 - len(out['items']) + 1:,} more items left out]"
    assert out["items"][:3] == [0, 1, 2]


def test_run_tool_bounds_before_the_result_is_kept() -> None:
    reg = ToolRegistry()
    reg.register(name="big")(lambda a, c: {"blob": "x" * 1_000_000, "n": 1})
    out = run_tool(Part.of_tool_use("t", "big", {}), registry=reg)
    assert out.status == "ok" and json_size(out.result) <= DEFAULT_MAX_RESULT_BYTES
    assert out.result["blob"].endswith("…[truncated: 1,000,000 characters]")
    assert model_facing(out.result) is out.result  # what is stored is what is sent


def test_run_sql_repeat_through_the_loop_stores_only_the_bounded_excerpt(tmp_path: Path) -> None:
    with Workspace(tmp_path / "w.duckdb") as ws:
        ws.load_sample_case()
        s = ws.start_investigation("CASE-001", user="ana", grant={"may_write": False})
        backend = FakeBackend([[tool_call("run_sql", {"query": HUGE}, id="c1")], [text("done")]])
        events = list(ws.ask(s, "how big can a cell be?", backend=backend, model="fake"))
        shown = next(p for e, p in events if e == "tool_result")
        assert shown["status"] == "ok" and MARKER in json.dumps(shown["result"], ensure_ascii=False)
        stored = [p for m in ws.store.load_messages(s.id) for p in m.parts if p.type == "tool_result"]
        assert len(stored) == 1 and stored[0].tool_result == shown["result"]
        assert json_size(stored[0].tool_result) <= DEFAULT_MAX_RESULT_BYTES
        # what the model was sent on the next turn is that same bounded result
        sent = backend.requests[-1].messages
        assert [p.tool_result for m in sent for p in m.parts if p.type == "tool_result"] == [shown["result"]]
