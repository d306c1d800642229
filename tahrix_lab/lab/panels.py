"""Case panels for notebooks: a flags table and a fund-flow graph.

Both are generic: they take a ``load`` callable and know nothing about the case
package, so any source can feed them, e.g.::

    flags = FlagsPanel(lambda: workspace.flags(case_id)).follow(chat)
    graph = FlowGraphPanel(lambda: workspace.trace(case_id)).follow(chat)

``follow(chat)`` registers ``chat.on_effect`` so a panel reloads when the
assistant's tools report an effect it cares about (``flags_changed`` for the
flags; ``trace_ready``, ``labels_changed``, ``roles_changed`` for the graph).
Pass ``refresh_on=[...]`` to choose the effect types, or ``"all"`` for every
effect. The last effect seen is kept in ``panel.last_effect`` for loaders
that want it (e.g. to trace from the start a ``trace_ready`` effect names).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, Self

import anywidget
import traitlets

from tahrix_lab.flow.resources import widget_file

log = logging.getLogger(__name__)

FLAG_COLUMNS = ("flag_id", "flag_type", "severity", "score", "subject", "status")
MAX_GRAPH_NODES = 2000  # the front end draws the first 400; more is only transfer cost
NODE_KEYS = (
    "id",
    "label",
    "category",
    "role",
    "address",
    "chain",
    "hop",
    "tainted_usd",
    "endpoint",
    "first_time",
)
EDGE_KEYS = ("source", "target", "amount", "asset", "usd", "tx_hash", "tx_hashes", "transfers", "kind",
             "first_time", "last_time", "tainted_usd")  # fmt: skip


def _jsonable(value: Any) -> Any:
    """Rows from DuckDB carry datetimes and Decimals: make them JSON once, here."""
    return json.loads(json.dumps(value, default=str))


class _Panel(anywidget.AnyWidget):
    _esm = widget_file("panels.js").read_text(encoding="utf-8")  # the graph panel adds its library
    _css = widget_file("panels.css").read_text(encoding="utf-8")

    kind = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    refresh_on: frozenset[str] | None = None

    def __init__(
        self,
        load: Callable[[], Any],
        *,
        title: str = "",
        refresh_on: Iterable[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        if not callable(load):
            raise TypeError(f"load must be a callable returning the panel's data, not {type(load).__name__}.")
        self._load = load
        if refresh_on == "all":
            self.refresh_on = None
        elif refresh_on is not None:
            self.refresh_on = frozenset(refresh_on)
        self.last_effect: dict[str, Any] | None = None
        super().__init__(title=title, **kwargs)
        self.refresh()

    def refresh(self) -> None:
        """Call ``load`` again and redraw; a failure shows a calm message in the panel."""
        try:
            data = self._load()
            self._show(data)
        except Exception as exc:
            log.exception("%s: load failed", type(self).__name__)
            self.error = f"Could not load this panel's data: {exc}"
            return
        self.error = ""

    def follow(self, chat: Any) -> Self:
        """Refresh whenever ``chat`` (a ChatWidget) reports a matching effect; returns the panel."""
        chat.on_effect(self._on_effect)
        return self

    def _on_effect(self, effect: dict[str, Any]) -> None:
        if self.refresh_on is None or effect.get("type") in self.refresh_on:
            self.last_effect = effect
            self.refresh()

    def _show(self, data: Any) -> None:
        raise NotImplementedError


class FlagsPanel(_Panel):
    """A sortable table of anomaly flags: flag_id, flag_type, severity, score, subject, status.

    ``load()`` returns a list of dicts; ``subject`` falls back to the row's
    ``address`` (then ``tx_hash``) so case flags work as they are.
    """

    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    refresh_on = frozenset({"flags_changed"})

    def __init__(self, load: Callable[[], list[dict[str, Any]]], **kwargs: Any) -> None:
        super().__init__(load, kind="flags", **kwargs)

    def _show(self, data: Any) -> None:
        if not isinstance(data, list):
            raise TypeError(f"the flags loader returned {type(data).__name__}, expected a list of dicts")
        self.rows = [_flag_row(r) for r in data]


def _flag_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {col: row.get(col) for col in FLAG_COLUMNS}
    if out["subject"] is None:
        out["subject"] = row.get("address") or row.get("tx_hash")
    if out["score"] is not None:
        with contextlib.suppress(TypeError, ValueError):
            out["score"] = float(out["score"])
    return dict(_jsonable(out))


class FlowGraphPanel(_Panel):
    """A fund-flow graph on Cytoscape.js, layered left to right (dagre).

    ``load()`` returns ``{nodes: [{id, label, category, address, ...}], edges:
    [{source, target, usd, amount, asset, first_time, last_time, ...}]}`` (what
    ``Workspace.trace`` gives). One node per address shows its label and short
    address, endpoints are filled in their category's colour, edges carry the
    amount and the dates; pan and zoom with the mouse, click a node for its
    details. With ``trace_from(node) -> graph`` the details offer "Trace onward
    from here": the graph it returns is merged into the one shown.
    """

    _esm = widget_file("graph.bundle.js").read_text(encoding="utf-8") + "\n" + _Panel._esm

    graph = traitlets.Dict().tag(sync=True)
    can_trace = traitlets.Bool(False).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)  # what the last "trace onward" found
    refresh_on = frozenset({"trace_ready", "labels_changed", "roles_changed"})

    def __init__(
        self,
        load: Callable[[], dict[str, Any]],
        *,
        trace_from: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        self._trace_from = trace_from
        super().__init__(load, kind="graph", can_trace=trace_from is not None, **kwargs)
        self.on_msg(self._on_front_end)

    def _show(self, data: Any) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise TypeError("the graph loader must return a dict with 'nodes' and 'edges' lists")
        nodes = [{k: n[k] for k in NODE_KEYS if k in n} for n in data["nodes"][:MAX_GRAPH_NODES]]
        edges = [{k: e[k] for k in EDGE_KEYS if k in e} for e in data.get("edges") or []]
        self.graph = _jsonable({"nodes": nodes, "edges": edges})

    def trace_onward(self, node_id: str) -> None:
        """Trace from one node with ``trace_from`` and add what it finds to the graph."""
        if self._trace_from is None:
            raise RuntimeError("This panel was made without trace_from, so it cannot trace onward.")
        node = next((n for n in self.graph.get("nodes", []) if n.get("id") == node_id), None)
        if node is None:
            raise ValueError(f"There is no node {node_id!r} in the graph.")
        found = self._trace_from(dict(node))
        before = {n.get("id") for n in self.graph.get("nodes", [])}
        self._show(merge_graphs(self.graph, found))
        new = len({n.get("id") for n in self.graph["nodes"]} - before)
        where = node.get("label") or node.get("address") or node_id
        self.note = f"Traced onward from {where}: " + (f"{new} new addresses." if new else "nothing new.")

    def _on_front_end(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "trace":
            return
        try:
            self.trace_onward(str(content.get("node")))
        except Exception as exc:  # shown in the panel, and the graph stays as it was
            log.exception("tracing onward from %r failed", content.get("node"))
            self.error = f"Could not trace onward: {exc}"
            self.note = ""
        else:
            self.error = ""
        self.send_state("graph")  # redraw even when nothing changed, so the button comes back


def merge_graphs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The union of two graphs: nodes by id (the first seen wins), edges by (source, target, kind)."""
    if not isinstance(b, dict) or not isinstance(b.get("nodes"), list):
        raise TypeError("trace_from must return a dict with 'nodes' and 'edges' lists")
    nodes: dict[Any, dict[str, Any]] = {}
    for n in [*a.get("nodes", []), *b["nodes"]]:
        nodes.setdefault(n.get("id"), n)
    edges: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for e in [*a.get("edges", []), *(b.get("edges") or [])]:
        edges.setdefault((e.get("source"), e.get("target"), e.get("kind")), e)
    return {"nodes": list(nodes.values()), "edges": list(edges.values())}
