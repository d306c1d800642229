"""What the case panels draw, as plain JSON: one builder for the notebook panels and the service page.

``FlagsPanel`` and ``FlowGraphPanel`` sync these shapes to the front end
(widgets/panels.js); the job service's page asks for the same shapes through a
JSON route (``tahrix_lab.app.case_service``). No anywidget here, so the service
can use it without loading the notebook stack.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

FLAG_COLUMNS = ("flag_id", "flag_type", "severity", "score", "subject", "status")
MAX_GRAPH_NODES = 2000  # the front end draws the first 400; more is only transfer cost
DROP_NODE_KEYS = frozenset({"label_ids", "evidence", "evidence_count"})


def jsonable(value: Any) -> Any:
    """Rows from DuckDB carry datetimes and Decimals: make them JSON once, here."""
    return json.loads(json.dumps(value, default=str))


def flags_data(data: Any) -> dict[str, list[dict[str, Any]]]:
    """``{rows, raw}`` from ``Workspace.flag_rows`` (triage rows, each with its flags) or a list of flags."""
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        rows = jsonable(data["rows"])
        flags = [f for r in rows for f in [*r.get("flags", []), *(f for rel in r.get("related", [])
                                                                   for f in rel.get("flags", []))]]  # fmt: skip
        return {"rows": rows, "raw": [flag_row(f) for f in flags]}
    if isinstance(data, list):
        return {"rows": [], "raw": [flag_row(r) for r in data]}
    raise TypeError(f"the flags loader returned {type(data).__name__}, expected a list of dicts "
                    "or a triage dict with 'rows'")  # fmt: skip


def flag_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {col: row.get(col) for col in FLAG_COLUMNS}
    if out["subject"] is None:
        out["subject"] = row.get("address") or row.get("tx_hash")
    if out["score"] is not None:
        with contextlib.suppress(TypeError, ValueError):
            out["score"] = float(out["score"])
    for extra in ("chain", "explanation", "amount_usd", "first_time"):
        if row.get(extra) is not None:
            out[extra] = row[extra]
    return dict(jsonable(out))


def graph_data(data: Any) -> dict[str, Any]:
    """``{nodes, edges, assets?}`` from ``Workspace.flow_graph`` (or a bare trace), trimmed for the wire."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise TypeError("the graph loader must return a dict with 'nodes' and 'edges' lists")
    nodes = [{k: v for k, v in n.items() if k not in DROP_NODE_KEYS} for n in data["nodes"][:MAX_GRAPH_NODES]]
    graph = {"nodes": nodes, "edges": list(data.get("edges") or [])}
    if data.get("assets"):
        graph["assets"] = data["assets"]
    return dict(jsonable(graph))


__all__ = [
    "DROP_NODE_KEYS",
    "FLAG_COLUMNS",
    "MAX_GRAPH_NODES",
    "flag_row",
    "flags_data",
    "graph_data",
    "jsonable",
]
