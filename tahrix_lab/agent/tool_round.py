"""One round of tool calls: run the calls of one model answer, in order, and keep their results.

A call that needs the analyst's approval waits (``agent.approvals``) instead of
running; a stop mid-round answers the calls not yet run as cancelled, so the
record never holds a call without its result.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from tahrix_lab.agent.approvals import is_pending
from tahrix_lab.agent.run_state import LoopEvent, Run
from tahrix_lab.agent.tools import error_result, run_tool
from tahrix_lab.agent.transcript import Message, Part


def run_tool_round(run: Run, tool_uses: list[Part], offered: list[str]) -> Generator[LoopEvent, None, bool]:
    """Run the calls of one model answer; returns whether one of them waits for the analyst."""
    results: list[Part] = []
    effects: list[dict[str, Any]] = []
    waiting = False
    try:
        for use in tool_uses:
            if run.cancelled():
                results.append(_cancelled(use))
                continue
            yield "tool_start", {"id": use.tool_use_id, "name": use.tool_name}
            out = run_tool(use, run.context, registry=run.registry, offered=offered, session=run.session)
            results.append(out.to_part())
            effects.extend(out.effects)
            if is_pending(out.result):
                waiting = True
                error = out.result["error"]
                yield "approval", {"id": out.tool_use_id, "name": out.name, "args": use.tool_input,
                                   "summary": error.get("summary"), "why": error.get("why"), "state": "pending"}  # fmt: skip
                continue
            yield (
                "tool_result",
                {
                    "id": out.tool_use_id,
                    "name": out.name,
                    "status": out.status,
                    "result": out.result,
                    "duration_ms": out.duration_ms,
                },
            )
    finally:
        # Persist whatever ran, even when the consumer stops mid-way.
        answered = {p.tool_use_id for p in results}
        results.extend(_cancelled(use) for use in tool_uses if use.tool_use_id not in answered)
        run.persist(Message(role="tool", parts=results))
    if effects:
        yield "effects", {"effects": effects}
    return waiting


def _cancelled(use: Part) -> Part:
    return Part.of_tool_result(
        use.tool_use_id or "", use.tool_name, error_result("cancelled", "Stopped by the user."), "error"
    )
