"""Unknown stays unknown in the tools: failed transfers move nothing, unknown USD is null (never 0)."""

from __future__ import annotations

from typing import Any

from tahrix_lab.agent.tools import run_tool
from tahrix_lab.agent.transcript import Part
from tahrix_lab.case.tools import CASE_TOOLS
from tahrix_lab.case.workspace import Workspace

A, B, MIX = "0x" + "a1" * 20, "0x" + "b2" * 20, "0x" + "cc" * 20


def test_overview_profile_and_exposure_count_no_failed_and_no_unknown_as_zero(build: Any) -> None:
    b = build()
    b.transfer(A, B, None, 0, asset="ethereum:0xtoken")  # unpriced
    b.transfer(A, B, 11_000.0, 5, status=False)  # failed: moves nothing
    b.transfer(A, B, 500.0, 10, status=None)  # unknown status: counts, reported
    b.transfer(A, MIX, 2_000.0, 20, status=False)  # a failed mixer deposit is no exposure
    b.label(MIX, "mixer")
    cid = b.done()
    ws = Workspace(":memory:", connection=b.db.connection)  # the builder's database; not closed here
    session = ws.start_investigation(cid, user="ana")

    def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        out = run_tool(
            Part.of_tool_use("t", name, args), ws.context_provider(), registry=CASE_TOOLS, session=session
        )
        assert out.status == "ok", out.result
        return out.result

    ov = call("get_case_overview", {})
    assert ov["data_quality"]["unpriced"] == 1 and ov["data_quality"]["failed"] == 2
    assert ov["data_quality"]["unknown_status"] == 1
    by_asset = {r["asset_key"]: r for r in ov["totals_by_asset"]}
    assert by_asset["ethereum:0xtoken"]["usd"] is None and by_asset["ethereum:0xtoken"]["unpriced"] == 1
    assert by_asset["ethereum:native"]["usd"] == 500.0  # the failed 11k and 2k are not in it
    prof = call("lookup_address", {"address": A})["matches"][0]["profile"]
    assert prof["usd_out"] == 500.0 and prof["n_out"] == 2 and prof["failed_not_counted"] == 2
    assert prof["unpriced"] == 1 and prof["unknown_status"] == 1
    cps = {
        c["counterparty"]: c
        for c in call("lookup_address", {"address": A})["matches"][0]["top_counterparties"]
    }
    assert MIX not in cps and cps[B]["usd"] == 500.0
    ex = call("screen_exposure", {"addresses": [{"address": A}], "lists": ["mixer"]})["results"][0]
    assert ex["direct"]["usd"] == 0 and ex["direct"]["hits"] == []
