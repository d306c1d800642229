"""The fund-flow graph as a static SVG: a layered layout by hop, drawn the same way every time.

Columns are hops from the start addresses; in a column, nodes go by tainted USD
(largest first) then id, so the same trace always gives the same picture. A
column keeps its ``MAX_PER_LAYER`` largest nodes and says how many it left out.
No scripts, no external references: it prints and opens offline.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

COL_W, BOX_W, BOX_H, ROW_H, PAD, TOP = 250, 200, 48, 60, 20, 34
MAX_PER_LAYER = 10
LABELLED_EDGES = 6  # the largest movements carry their USD on the line
COLOURS = {
    "start": "#1f2328", "exchange": "#0969da", "mixing_service": "#cf222e", "defi_bridge": "#8250df",
    "otc_desk": "#bf8700", "instant_exchanger": "#bc4c00", "sanction": "#a40e26", "perpetrator": "#6e7781",
}  # fmt: skip
OTHER = "#57606a"


def short(address: str) -> str:
    return address if len(address) <= 14 else f"{address[:6]}…{address[-4:]}"


def usd(value: float | None) -> str:
    if value is None:
        return "USD unknown"
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"${value / size:,.1f}{suffix}"
    return f"${value:,.0f}"


def _colour(node: dict[str, Any]) -> str:
    if node.get("role") == "start":
        return COLOURS["start"]
    return COLOURS.get(str(node.get("category")), OTHER)


def flow_svg(trace: dict[str, Any]) -> str:
    """The trace's nodes and edges as one ``<svg>`` element."""
    layers: dict[int, list[dict[str, Any]]] = {}
    for n in trace.get("nodes") or []:
        layers.setdefault(int(n.get("hop") or 0), []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    hidden: dict[int, int] = {}
    for hop, nodes in layers.items():
        nodes.sort(key=lambda n: (-(n.get("tainted_usd") or 0.0), n["id"]))
        hidden[hop] = max(0, len(nodes) - MAX_PER_LAYER)
        for i, n in enumerate(nodes[:MAX_PER_LAYER]):
            pos[n["id"]] = (PAD + hop * COL_W, TOP + i * ROW_H)
    hops = sorted(layers)
    width = PAD * 2 + (max(hops, default=0)) * COL_W + BOX_W
    rows = max((min(len(v), MAX_PER_LAYER) + (1 if hidden[k] else 0) for k, v in layers.items()), default=1)
    height = TOP + rows * ROW_H + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="flow-graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="Fund-flow graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8c959f"/></marker></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for hop in hops:
        out.append(f'<text x="{PAD + hop * COL_W}" y="18" class="g-hop">hop {hop}</text>')
    top_usd = sorted((e.get("usd") or 0.0 for e in trace.get("edges") or []), reverse=True)[:LABELLED_EDGES]
    for e in trace.get("edges") or []:
        a, b = pos.get(e["source"]), pos.get(e["target"])
        if a is None or b is None:
            continue
        x1, y1, x2, y2 = a[0] + BOX_W, a[1] + BOX_H / 2, b[0], b[1] + BOX_H / 2
        if x2 <= x1:  # same column or backwards: leave and enter from below
            x1, y1, x2, y2 = a[0] + BOX_W / 2, a[1] + BOX_H, b[0] + BOX_W / 2, b[1] + BOX_H
        mid = (x1 + x2) / 2
        w = 0.8 + min(2.7, math.log10(max(e.get("usd") or 1.0, 1.0)) / 3)
        dash = ' stroke-dasharray="5 3"' if e.get("kind") == "bridge" else ""
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" fill="none" '
            f'stroke="#8c959f" stroke-width="{w:.2f}"{dash} marker-end="url(#arrow)"/>'
        )
        if e.get("usd") and top_usd and (e.get("usd") or 0.0) >= top_usd[-1]:
            out.append(
                f'<text x="{x1 + (x2 - x1) * 0.7:.1f}" y="{y1 + (y2 - y1) * 0.7 - 4:.1f}" class="g-edge">'
                f"{escape(usd(e.get('usd')))}</text>"
            )
    for hop, nodes in layers.items():
        for n in nodes[:MAX_PER_LAYER]:
            x, y = pos[n["id"]]
            colour = _colour(n)
            name = n.get("label") or n.get("role") or n.get("category") or ""
            name = name if len(name) <= 30 else name[:29] + "…"
            out.append(
                f'<g class="g-node"><title>{escape(n["id"])}</title>'
                f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#ffffff" stroke="{colour}" '
                f'stroke-width="{2.5 if n.get("endpoint") or n.get("role") == "start" else 1.2}"/>'
                f'<rect x="{x}" y="{y}" width="6" height="{BOX_H}" rx="2" fill="{colour}"/>'
                f'<text x="{x + 12}" y="{y + 16}" class="g-addr">{escape(n.get("chain") or "")} '
                f"{escape(short(n.get('address') or n['id']))}</text>"
                f'<text x="{x + 12}" y="{y + 30}" class="g-label">{escape(name)}</text>'
                f'<text x="{x + 12}" y="{y + 43}" class="g-usd">{escape(usd(n.get("tainted_usd")))} traced</text></g>'
            )
        if hidden[hop]:
            y = TOP + MAX_PER_LAYER * ROW_H
            out.append(
                f'<text x="{PAD + hop * COL_W + 12}" y="{y + 20}" class="g-more">+{hidden[hop]} more</text>'
            )
    out.append(_legend(height - 14))
    out.append("</svg>")
    return "".join(out)


def _legend(y: float) -> str:
    items = [("start", "start"), ("exchange", "exchange"), ("mixing_service", "mixer"), ("defi_bridge", "bridge"),
             ("otc_desk", "OTC desk"), ("instant_exchanger", "instant exchanger")]  # fmt: skip
    out, x = [], PAD
    for key, text in [*items, ("", "other")]:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{COLOURS.get(key, OTHER)}"/>')
        out.append(f'<text x="{x + 14}" y="{y}" class="g-legend">{escape(text)}</text>')
        x += 22 + 7 * len(text)
    return "".join(out)


SVG_STYLE = """
.flow-graph text { font-family: ui-sans-serif, system-ui, sans-serif; fill: #1f2328; }
.flow-graph .g-hop { font-size: 12px; font-weight: 600; fill: #57606a; }
.flow-graph .g-addr { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 11px; }
.flow-graph .g-label { font-size: 11px; fill: #57606a; }
.flow-graph .g-usd, .flow-graph .g-edge { font-size: 10px; fill: #57606a; }
.flow-graph .g-edge { text-anchor: middle; paint-order: stroke; stroke: #ffffff; stroke-width: 3px; }
.flow-graph .g-more, .flow-graph .g-legend { font-size: 11px; fill: #57606a; }
"""
