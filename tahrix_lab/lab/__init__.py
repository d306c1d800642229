"""The notebook surface: the chat widget and panels, replay, diff and cost analysis.

Heavy pieces (anywidget, pandas, altair) load on first use, so ``import
tahrix_lab.lab`` stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # analysis (replay, diff, costs, charts, transfer)
    "ReplayEstimate": "replay",
    "ReplayResult": "replay",
    "estimate_replay_cost": "replay",
    "replay": "replay",
    "replay_many": "replay",
    "TranscriptDiff": "diff",
    "diff": "diff",
    "budget_status": "costs",
    "call_costs": "costs",
    "costs": "costs",
    "costs_by_case": "costs",
    "costs_by_purpose": "costs",
    "costs_by_user": "costs",
    "create_views": "costs",
    "month_to_date": "costs",
    "refresh_prices": "costs",
    "budget_fill": "charts",
    "spend_over_time": "charts",
    "tokens_by_model": "charts",
    "export_sessions": "transfer",
    "import_sessions": "transfer",
    # the widget and case panels (widget.py, panels.py: maintained by the widget/case work)
    "ChatWidget": "widget",
    "FlagsPanel": "panels",
    "FlowGraphPanel": "panels",
}

# the widget and panels arrive with their own work: export them only once they exist
__all__ = sorted(
    name
    for name, module in _EXPORTS.items()
    if importlib.util.find_spec(f"tahrix_lab.lab.{module}") is not None
)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None or name not in __all__:
        raise AttributeError(f"module 'tahrix_lab.lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tahrix_lab.lab.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
