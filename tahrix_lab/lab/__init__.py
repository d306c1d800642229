"""The notebook surface: the chat widget and panels, replay, diff and cost analysis.

The analysis helpers are imported here directly (pandas and altair load only
when a DataFrame or a chart is made). Several share their module's name
(``costs``, ``diff``, ``replay``), so they must be bound eagerly: a lazy
lookup would be shadowed by the submodule once it is imported. The charts,
the widget and the case panels (altair, anywidget) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from tahrix_lab.lab.costs import (
    budget_status,
    call_costs,
    costs,
    costs_by_case,
    costs_by_purpose,
    costs_by_user,
    create_views,
    month_to_date,
)
from tahrix_lab.lab.costs_rates import refresh_prices
from tahrix_lab.lab.diff import TranscriptDiff, diff
from tahrix_lab.lab.replay import ReplayEstimate, ReplayResult, estimate_replay_cost, replay, replay_many
from tahrix_lab.lab.transfer import export_sessions, import_sessions

# name -> module, imported on first use
_LAZY: dict[str, str] = {
    "budget_fill": "charts",
    "spend_over_time": "charts",
    "tokens_by_model": "charts",
    "ChatWidget": "widget",
    "FlagsPanel": "panels",
    "FlowGraphPanel": "panels",
}

__all__ = [
    "ChatWidget",
    "FlagsPanel",
    "FlowGraphPanel",
    "ReplayEstimate",
    "ReplayResult",
    "TranscriptDiff",
    "budget_fill",
    "budget_status",
    "call_costs",
    "costs",
    "costs_by_case",
    "costs_by_purpose",
    "costs_by_user",
    "create_views",
    "diff",
    "estimate_replay_cost",
    "export_sessions",
    "import_sessions",
    "month_to_date",
    "refresh_prices",
    "replay",
    "replay_many",
    "spend_over_time",
    "tokens_by_model",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tahrix_lab.lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tahrix_lab.lab.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
