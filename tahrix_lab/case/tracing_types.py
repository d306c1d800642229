"""The tracer's shared types: its parameters, what reaches an address in a hop, and a trace's running state.

They sit below every tracing module (the orchestrator ``tracing``, the hop
algorithm ``tracing_hops``, the taint models ``tracing_taint`` and the result
``tracing_result``), so none of those imports another to learn a type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tahrix_lab.case.taxonomy import ENDPOINT_CATEGORIES, normalise_category

DEFAULT_STOP = tuple(ENDPOINT_CATEGORIES)
Key = tuple[str, str]


@dataclass
class TraceParams:
    direction: Literal["forward", "backward"] = "forward"
    max_hops: int = 6
    min_usd: float = 100.0
    time_window_hours: float | None = None
    taint_model: Literal["poison", "haircut", "fifo"] = "poison"
    follow_bridges: bool = True
    stop_at_categories: tuple[str, ...] = DEFAULT_STOP
    max_edges: int = 5000
    follow_unpriced: bool = True

    def __post_init__(self) -> None:
        if self.taint_model == "fifo" and self.direction == "backward":
            raise ValueError("taint_model 'fifo' traces forward only; use poison or haircut backward.")
        self.stop_at_categories = tuple(normalise_category(c)[0] or c for c in self.stop_at_categories)

    def to_dict(self) -> dict[str, Any]:
        return {
            "direction": self.direction, "max_hops": self.max_hops, "min_usd": self.min_usd,
            "time_window_hours": self.time_window_hours, "taint_model": self.taint_model,
            "follow_bridges": self.follow_bridges, "stop_at_categories": list(self.stop_at_categories),
            "max_edges": self.max_edges, "follow_unpriced": self.follow_unpriced,
        }  # fmt: skip


@dataclass
class Arrival:
    """New taint reaching an address in one hop: known USD, whether an unpriced part came too, and when."""

    t: datetime | None
    usd: float = 0.0
    unknown: bool = False
    txs: set[str] = field(default_factory=set)
    tainted_in: dict[str, float] = field(default_factory=dict)  # transfer id → USD (fifo)

    def add(self, t: datetime | None, usd: float | None, tx: str, transfer_id: str | None) -> None:
        self.t = t if self.t is None or (t is not None and t < self.t) else self.t
        if usd is None:
            self.unknown = True
        else:
            self.usd += usd
            if transfer_id:
                self.tainted_in[transfer_id] = self.tainted_in.get(transfer_id, 0.0) + usd
        self.txs.add(tx)


@dataclass
class State:
    nodes: dict[Key, dict[str, Any]] = field(default_factory=dict)
    edges: list[dict[str, Any]] = field(default_factory=list)
    endpoints: dict[Key, dict[str, Any]] = field(default_factory=dict)
    frontier: list[dict[str, Any]] = field(default_factory=list)
    followed: set[str] = field(default_factory=set)
    bridges_done: dict[str, dict[str, Any]] = field(default_factory=dict)
    fifo_in: dict[Key, dict[str, float]] = field(default_factory=dict)
    traced_usd: float = 0.0
    held_usd: float = 0.0
    cut_off_usd: float = 0.0
    unpriced_edges: int = 0
    unknown_amount_edges: int = 0
    truncated: bool = False

    def node(self, k: Key, hop: int, t: datetime | None, **extra: Any) -> dict[str, Any]:
        return self.nodes.setdefault(
            k, {"chain": k[0], "address": k[1], "hop": hop, "tainted_usd": 0.0, "first_time": t, **extra}
        )
