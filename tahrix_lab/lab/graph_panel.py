"""The fund-flow graph panel: Cytoscape.js + dagre, fed by ``Workspace.flow_graph``.

``load()`` returns ``{nodes: [...], edges: [...]}``; the richer the better
(``tahrix_lab.case.flowgraph`` gives names, roles, label sources, totals and
flags per node, native amounts and transactions per edge), but a bare
``Workspace.trace`` result draws too. ``trace_from(node) -> graph`` enables
"Trace onward": what it returns is merged in and brought into view, and the
selection stays.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import traitlets

from tahrix_lab.flow.resources import widget_file
from tahrix_lab.lab.panel_base import Panel
from tahrix_lab.lab.panel_data import graph_data

log = logging.getLogger("tahrix_lab.lab.panels")


class FlowGraphPanel(Panel):
    """A fund-flow graph, layered left to right, with details in a drawer; see docs/widget.md."""

    _esm = widget_file("graph.bundle.js").read_text(encoding="utf-8") + "\n" + Panel._esm

    graph = traitlets.Dict().tag(sync=True)
    can_trace = traitlets.Bool(False).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)  # what the last "trace onward" found
    added = traitlets.List(traitlets.Unicode()).tag(sync=True)  # node ids the last trace onward added
    refresh_on = frozenset({"trace_ready", "labels_changed", "roles_changed"})

    def __init__(
        self,
        load: Callable[[], dict[str, Any]],
        *,
        trace_from: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        self._trace_from = trace_from
        self._on_flag: list[Callable[[str], Any]] = []
        super().__init__(load, kind="graph", can_trace=trace_from is not None, **kwargs)

    @classmethod
    def for_case(
        cls, workspace: Any, case_id: str, *, onward_hops: int = 2, title: str | None = None, **params: Any
    ) -> FlowGraphPanel:
        """The graph of ``workspace.flow_graph(case_id, **params)``; "Trace onward" follows ``onward_hops``
        more hops with ``workspace.trace_onward`` (across a bridge: the matched leg)."""
        onward = {**params, "max_hops": onward_hops}
        holder: list[FlowGraphPanel] = []

        def trace_from(node: dict[str, Any]) -> dict[str, Any]:
            return dict(workspace.trace_onward(case_id, node, holder[0].graph, **onward))

        panel = cls(lambda: workspace.flow_graph(case_id, **params), trace_from=trace_from,
                    title=f"Fund flow · {case_id}" if title is None else title)  # fmt: skip
        holder.append(panel)
        return panel

    def refresh(self) -> None:
        """Reload the graph (what "trace onward" added is dropped with the old data)."""
        self.added, self.note = [], ""
        super().refresh()

    def _show(self, data: Any) -> None:
        self.graph = graph_data(data)

    def focus(self, target: str | Iterable[str]) -> list[str]:
        """Select and centre the nodes of an address, a ``chain:address`` id, or several; returns the ids."""
        wanted = [target] if isinstance(target, str) else list(target)
        ids = []
        for n in self.graph.get("nodes", []):
            nid, addr = str(n.get("id")), str(n.get("address") or "")
            if any(w == nid or (addr and w.lower() == addr.lower()) for w in wanted):
                ids.append(nid)
        self._request_focus(ids=ids, wanted=wanted)
        return ids

    def on_flag(self, callback: Callable[[str], Any]) -> Callable[[str], Any]:
        """Call ``callback(flag_id)`` when a flag is clicked in a node's details (usable as a decorator)."""
        self._on_flag.append(callback)
        return callback

    def trace_onward(self, node_id: str) -> list[str]:
        """Trace from one node with ``trace_from`` and add what it finds; returns the new node ids."""
        if self._trace_from is None:
            raise RuntimeError("This panel was made without trace_from, so it cannot trace onward.")
        node = next((n for n in self.graph.get("nodes", []) if n.get("id") == node_id), None)
        if node is None:
            raise ValueError(f"There is no node {node_id!r} in the graph.")
        found = self._trace_from(dict(node))
        before = {n.get("id") for n in self.graph.get("nodes", [])}
        edges_before = len(self.graph.get("edges", []))
        merged = merge_graphs(self.graph, found)
        new = [str(n["id"]) for n in merged["nodes"] if n.get("id") not in before]
        new_edges = len(merged["edges"]) - edges_before
        where = node.get("name") or node.get("label") or node.get("address") or node_id
        # the note and the new ids first: the front end redraws when the graph arrives
        self.added = new
        self.note = f"Traced onward from {where}: " + (
            f"{len(new)} new addresses, {new_edges} new flows." if new or new_edges else "nothing new."
        )
        self._show(merged)
        return new

    def _on_front_end(self, content: dict[str, Any]) -> None:
        if content.get("type") == "flag":
            for callback in list(self._on_flag):
                try:
                    callback(str(content.get("flag_id")))
                except Exception:
                    log.exception("a graph on_flag callback failed")
            return
        if content.get("type") != "trace":
            return
        # cleared first, so the same note or error twice still reaches the page (which brings its button back)
        self.note, self.error = "", ""
        try:
            self.trace_onward(str(content.get("node")))
        except Exception as exc:  # shown in the panel, and the graph stays as it was
            log.exception("tracing onward from %r failed", content.get("node"))
            self.error = f"Could not trace onward: {exc}"
            self.note = ""
            self.added = []
        else:
            self.error = ""


def merge_graphs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The union of two graphs: nodes by id (the first seen wins), edges by (source, target, kind, bridge)."""
    if not isinstance(b, dict) or not isinstance(b.get("nodes"), list):
        raise TypeError("trace_from must return a dict with 'nodes' and 'edges' lists")
    nodes: dict[Any, dict[str, Any]] = {}
    for n in [*a.get("nodes", []), *b["nodes"]]:
        nodes.setdefault(n.get("id"), n)
    edges: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in [*a.get("edges", []), *(b.get("edges") or [])]:
        edges.setdefault((e.get("source"), e.get("target"), e.get("kind"), e.get("bridge_event_id")), e)
    assets = sorted({*a.get("assets", []), *b.get("assets", [])})
    out = {"nodes": list(nodes.values()), "edges": list(edges.values())}
    if assets:
        out["assets"] = assets
    return out
