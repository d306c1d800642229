"""The investigation tools, registered in ``CASE_TOOLS`` for ``"investigation"`` sessions.

Every tool takes ``(args, ctx: ToolContext)``, reads the case with
parameterised SQL, and returns evidence (tx hashes, transfer ids, label ids,
flag ids) plus the thresholds it used. Every answer leads with a summary
(counts, totals, the top findings with their evidence), then detail lists
paged to a byte budget (about 8 KB, ``budget_bytes`` per call) with a
``cursor`` for the rest (``budget``). Text that came from outside (labels,
token names, memos) is returned as data fields only. Only ``annotate`` and
``run_detectors`` write; they return ``_effects`` built here from what they
changed — never from case data.

One module per family: ``case_data`` (overview, address, transaction,
transfers), ``flows`` (tracing and bridges), ``flags``, ``exposure``,
``sql_notes`` (read-only SQL, annotate), ``citations`` (checking a draft).
"""

from __future__ import annotations

from tahrix_lab.agent.tools import REGISTRY, ToolRegistry
from tahrix_lab.case.tools import case_data, citations, exposure, flags, flows, sql_notes
from tahrix_lab.case.tools.common import CASE_TOOLS, DATA_NOTE

del case_data, citations, exposure, flags, flows, sql_notes  # imported to register their tools


def register_case_tools(registry: ToolRegistry | None = None) -> ToolRegistry:
    """Add the case tools to a registry (the global ``REGISTRY`` by default)."""
    target = registry or REGISTRY
    for tool in CASE_TOOLS:
        target.add(tool)
    return target


def tool_names() -> list[str]:
    return [t.name for t in CASE_TOOLS]


__all__ = ["CASE_TOOLS", "DATA_NOTE", "register_case_tools", "tool_names"]
