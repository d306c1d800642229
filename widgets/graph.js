// The fund-flow graph panel: Cytoscape.js with the dagre layered layout (widgets/graph.bundle.js, built by
// widgets/build from pinned npm packages). The bundle defines TahrixCytoscape:
// in the notebook it is joined with this file into one module, on a plain page
// it is loaded with a script tag first. Cytoscape draws on a canvas, so labels
// from the case are never parsed as HTML; the drawer uses text nodes.

import { h, button, money, plural, day } from "./panel_kit.js";
import { GROUPS, GROUP, EDGE_KINDS, MAX_NODES, NODE_FONT, MIN_READABLE_PX, graphElements, GRAPH_STYLE } from "./graph_model.js";
import { nodeDetails, edgeDetails } from "./graph_details.js";

function cytoscapeLib() {
  // eslint-disable-next-line no-undef
  const lib = typeof TahrixCytoscape !== "undefined" ? TahrixCytoscape : globalThis.TahrixCytoscape;
  return lib ? lib.default || lib : null;
}

function legend(parent, cy) {
  const box = parent.appendChild(h("div", "txp-legend"));
  const groups = new Set(cy.nodes().map((n) => n.data("group")));
  for (const [key] of GROUPS) {
    if (!groups.has(key)) continue;
    const item = box.appendChild(h("span", "txp-legend-item"));
    item.appendChild(h("span", "txp-swatch")).style.borderColor = GROUP[key].colour;
    item.appendChild(document.createTextNode(GROUP[key].name));
  }
  const kinds = new Set(cy.edges().map((e) => e.data("kind")));
  for (const [key, name] of EDGE_KINDS) {
    if (!kinds.has(key)) continue;
    const item = box.appendChild(h("span", "txp-legend-item"));
    item.appendChild(h("span", "txp-line txp-line-" + key));
    item.appendChild(document.createTextNode(name));
  }
  return box;
}

// Filters: time window, asset, minimum USD, hop. Hidden edges take their now-isolated nodes along.
function filterBar(parent, graph, apply) {
  const bar = parent.appendChild(h("div", "txp-filters"));
  const field = (label, input) => {
    const l = bar.appendChild(h("label", null, label + " "));
    l.appendChild(input);
    input.addEventListener("keydown", (ev) => ev.stopPropagation());
    input.addEventListener("change", apply);
    return input;
  };
  const from = field("from", Object.assign(h("input", "txp-from"), { type: "date" }));
  const to = field("to", Object.assign(h("input", "txp-to"), { type: "date" }));
  const asset = field("asset", h("select", "txp-asset"));
  asset.appendChild(new Option("any", ""));
  const assets = graph.assets || [...new Set((graph.edges || []).flatMap((e) => (e.amounts || []).map((a) => a.symbol)))].sort();
  for (const a of assets) asset.appendChild(new Option(a, a));
  const minUsd = field("min USD", Object.assign(h("input", "txp-min-usd"), { type: "number", min: "0", step: "1000", placeholder: "0" }));
  const maxHop = field("max hop", Object.assign(h("input", "txp-max-hop"), { type: "number", min: "0", step: "1", placeholder: "all" }));
  const reset = bar.appendChild(button("txp-reset", "Reset"));
  reset.addEventListener("click", () => {
    for (const i of [from, to, minUsd, maxHop]) i.value = "";
    asset.value = "";
    apply();
  });
  return () => ({ from: from.value, to: to.value, asset: asset.value, minUsd: Number(minUsd.value) || 0,
    maxHop: maxHop.value === "" ? null : Number(maxHop.value) });
}

function applyFilters(cy, f) {
  cy.batch(() => {
    cy.elements().removeClass("txp-hidden");
    cy.edges().forEach((edge) => {
      const e = edge.data("raw");
      const first = day(e.first_time || e.time), last = day(e.last_time || e.first_time || e.time);
      let hide = false;
      if (f.from && last && last < f.from) hide = true;
      if (f.to && first && first > f.to) hide = true;
      if (f.asset && !(e.amounts || []).some((a) => a.symbol === f.asset)) hide = true;
      if (f.minUsd && !(Number(e.usd) >= f.minUsd)) hide = true;
      if (f.maxHop !== null && Number(e.hop) > f.maxHop) hide = true;
      if (hide) edge.addClass("txp-hidden");
    });
    cy.nodes().forEach((node) => {
      const hopOut = f.maxHop !== null && node.data("hop") > f.maxHop;
      const visible = node.connectedEdges().filter((e) => !e.hasClass("txp-hidden")).length > 0;
      if (hopOut || (!visible && node.connectedEdges().length > 0)) node.addClass("txp-hidden");
    });
  });
}

// Edge labels never collide: the largest flows keep theirs, a label that would overlap a node or a
// label already placed is dropped (hover or select the edge to read it). Label sizes are in model
// units, so this holds at every zoom until the label text changes (full labels when zoomed in).
export function declutter(cy) {
  const boxes = cy.nodes(":visible").map((n) => n.boundingBox({ includeLabels: false }));
  const hit = (a, b) => a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
  const edges = cy.edges(":visible").sort((a, b) => (Number(b.data("raw").usd) || 0) - (Number(a.data("raw").usd) || 0));
  cy.edges().removeClass("txp-nolabel");
  const drop = [];
  edges.forEach((e) => {
    const bb = e.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false });
    if (!(bb.w > 0) || boxes.some((b) => hit(bb, b))) drop.push(e);
    else boxes.push(bb);
  });
  cy.collection(drop).addClass("txp-nolabel");
  return drop.length;
}

// Fit, but never below readable text: when the whole graph would be too small, show its most
// important part (the case's roles and the start) at the smallest readable zoom.
export function fitReadable(cy, eles, padding = 24) {
  const visible = (eles || cy.elements()).filter((e) => !e.hasClass("txp-hidden"));
  if (!visible.length || !(cy.width() > 0 && cy.height() > 0)) return; // fitted when the box gets a size
  cy.fit(visible, padding);
  const minZoom = MIN_READABLE_PX / NODE_FONT;
  if (cy.zoom() >= minZoom) return;
  cy.zoom(minZoom);
  const nodes = visible.nodes();
  let key = nodes.filter((n) => ["perpetrator", "suspect", "victim"].includes(n.data("group")) || n.data("hop") === 0);
  if (!key.length) key = nodes;
  const bb = key.renderedBoundingBox();
  cy.panBy({ x: padding - bb.x1, y: cy.height() / 2 - (bb.y1 + bb.y2) / 2 });
}

export function createGraph(el, opts = {}) {
  el.replaceChildren();
  const cytoscape = cytoscapeLib();
  if (!cytoscape) {
    el.appendChild(h("div", "txp-error", "The graph library did not load."));
    return null;
  }
  const bar = el.appendChild(h("div", "txp-bar"));
  const count = bar.appendChild(h("span", "txp-count"));
  const note = bar.appendChild(h("span", "txp-note"));
  const tools = bar.appendChild(h("span", "txp-tools"));
  const filtersBtn = tools.appendChild(button("txp-filters-toggle", "Filters", "Filter by time, asset, USD and hop"));
  const zoomOut = tools.appendChild(button("txp-zoom-out", "−", "Zoom out"));
  const zoomIn = tools.appendChild(button("txp-zoom-in", "+", "Zoom in"));
  const fit = tools.appendChild(button("txp-fit", "Fit", "Fit the graph (text stays readable)"));
  const focusBtn = tools.appendChild(button("txp-focus", "Focus", "Zoom to the selection and its neighbours"));
  const filterHost = el.appendChild(h("div", "txp-filter-host"));
  filterHost.hidden = true;
  const wrap = el.appendChild(h("div", "txp-graph-wrap"));
  const box = wrap.appendChild(h("div", "txp-graph"));
  const drawer = wrap.appendChild(h("aside", "txp-drawer"));
  // Fit stops at readable text, so a large graph opens with part of it out of view: say how much.
  const outside = wrap.appendChild(h("div", "txp-outside"));
  outside.hidden = true;
  const outsideText = outside.appendChild(h("span"));
  const showAll = outside.appendChild(button("txp-show-all", "Show all", "Zoom out until every address is in view (labels get small)"));
  // in the bar, not over the canvas, where it would cover the nodes at the top right
  const hint = bar.insertBefore(h("span", "txp-hint", "Click an address or a flow for its details."), tools);
  const legendHost = el.appendChild(h("div", "txp-legend-host"));
  let legendBox = null;
  let graph = null;
  let readFilters = () => ({ from: "", to: "", asset: "", minUsd: 0, maxHop: null });
  // preset: no layout at start (the box may have no size yet, before the notebook attaches it)
  const cy = cytoscape({ container: box, elements: [], layout: { name: "preset" }, style: GRAPH_STYLE, minZoom: 0.05, maxZoom: 4 });
  box.__cy = cy; // for tests and the curious, from the console

  // Cytoscape caches where its container is on the page and re-reads it only on resize. A notebook
  // scrolls its panel, not the window: forget the cached position on any scroll, and before a pointer acts.
  const invalidate = () => {
    const r = cy.renderer && cy.renderer();
    if (r && r.invalidateContainerClientCoordsCache) r.invalidateContainerClientCoordsCache();
    else cy.resize();
  };
  document.addEventListener("scroll", invalidate, { capture: true, passive: true });
  window.addEventListener("resize", invalidate);
  for (const ev of ["pointerenter", "pointerdown", "mousedown", "wheel", "touchstart"]) {
    box.addEventListener(ev, invalidate, { capture: true, passive: true });
  }
  let fitted = false;
  let observer = null;
  if (typeof ResizeObserver === "function") {
    observer = new ResizeObserver(() => {
      cy.resize();
      if (!fitted && box.clientWidth > 0 && cy.nodes().length) {
        fitted = true;
        fitReadable(cy);
      }
    });
    observer.observe(box);
  }

  const close = () => {
    drawer.classList.remove("open");
    drawer.replaceChildren();
    hint.hidden = false;
  };
  const open = (fill) => {
    drawer.replaceChildren();
    const x = drawer.appendChild(button("txp-close", "×", "Close"));
    x.addEventListener("click", () => { cy.elements().unselect(); close(); });
    fill(drawer);
    drawer.classList.add("open");
    hint.hidden = true;
  };
  // The drawer covers the graph's right side: bring the shown node out from under it.
  const ensureVisible = (node) => {
    const free = cy.width() - drawer.offsetWidth;
    const p = node.renderedPosition();
    if (free > 120 && (p.x > free - 60 || p.x < 60)) cy.panBy({ x: free / 2 - p.x, y: 0 });
  };
  const showNode = (node) => {
    open((d) => nodeDetails(d, cy, node.data("raw"), opts));
    ensureVisible(node);
  };
  const showEdge = (edge) => open((d) => edgeDetails(d, cy, edge.data("raw")));
  cy.on("tap", "node", (ev) => showNode(ev.target));
  cy.on("tap", "edge", (ev) => showEdge(ev.target));
  cy.on("tap", (ev) => { if (ev.target === cy) close(); });
  let full = false;
  cy.on("mouseover", "edge", (ev) => ev.target.addClass("txp-full txp-hover"));
  cy.on("mouseout", "edge", (ev) => { ev.target.removeClass("txp-hover"); if (!full) ev.target.removeClass("txp-full"); });
  cy.on("zoom", () => {
    if (full === cy.zoom() >= 1.3) return;
    full = !full; // zoomed in: the whole line on every edge, decluttered again
    cy.edges().toggleClass("txp-full", full);
    declutter(cy);
  });
  let counting = false;
  const countOutside = () => {
    counting = false;
    if (cy.destroyed()) return;
    const view = cy.extent();
    const out = cy.nodes().filter((n) => {
      const b = n.boundingBox({ includeLabels: false });
      return !n.hasClass("txp-hidden") && (b.x1 < view.x1 || b.x2 > view.x2 || b.y1 < view.y1 || b.y2 > view.y2);
    }).length;
    outsideText.textContent = out ? `${plural(out, "address", "addresses")} cut off or out of view: drag to pan` : "";
    outside.hidden = out === 0;
  };
  cy.on("viewport resize", () => {
    if (!counting) { counting = true; requestAnimationFrame(countOutside); }
  });
  showAll.addEventListener("click", () => cy.fit(cy.elements().filter((e) => !e.hasClass("txp-hidden")), 24));
  const zoomBy = (f) => cy.zoom({ level: cy.zoom() * f, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
  zoomIn.addEventListener("click", () => zoomBy(1.25));
  zoomOut.addEventListener("click", () => zoomBy(0.8));
  fit.addEventListener("click", () => fitReadable(cy));
  const focusOn = (eles) => {
    if (!eles.length) return;
    fitReadable(cy, eles.union(eles.closedNeighborhood()), 40);
  };
  focusBtn.addEventListener("click", () => focusOn(cy.$(":selected")));
  filtersBtn.addEventListener("click", () => { filterHost.hidden = !filterHost.hidden; });

  const update = (next, { added = [], note: text = "" } = {}) => {
    graph = next;
    const selected = cy.$(":selected").map((e) => e.id());
    const openId = drawer.classList.contains("open") && selected.length ? selected[0] : null;
    const elements = graphElements(graph);
    cy.batch(() => {
      cy.elements().remove();
      cy.add(elements);
    });
    const nodes = graph.nodes.length, drawn = cy.nodes().length;
    count.textContent = `${plural(drawn, "address", "addresses")} · ${plural(cy.edges().length, "flow")}` +
      (nodes > MAX_NODES ? ` (first ${MAX_NODES} of ${nodes} drawn)` : "");
    note.textContent = text;
    filterHost.replaceChildren();
    readFilters = filterBar(filterHost, graph, () => { applyFilters(cy, readFilters()); declutter(cy); fitReadable(cy); countOutside(); });
    if (legendBox) legendBox.remove();
    legendBox = legend(legendHost, cy);
    cy.layout({ name: "dagre", rankDir: "LR", nodeSep: 18, rankSep: 150, edgeSep: 10, fit: false, animate: false }).run();
    applyFilters(cy, readFilters());
    declutter(cy);
    const keep = cy.collection(selected.map((id) => cy.getElementById(id)).filter((e) => e.length));
    keep.select();
    const fresh = cy.collection(added.map((id) => cy.getElementById(String(id))).filter((e) => e.length));
    cy.nodes().removeClass("txp-added");
    fresh.addClass("txp-added");
    fitted = box.clientWidth > 0;
    if (fresh.length) fitReadable(cy, fresh.union(keep), 40); // what the trace added, not a full re-fit
    else fitReadable(cy);
    countOutside(); // the viewport may not have moved, while the nodes did
    if (openId && cy.getElementById(openId).length) {
      const el2 = cy.getElementById(openId);
      if (el2.isNode()) showNode(el2); else showEdge(el2);
    } else close();
  };
  const focus = (ids) => {
    const eles = cy.collection((ids || []).map((id) => cy.getElementById(String(id))).filter((e) => e.length));
    cy.nodes().removeClass("txp-focus");
    if (!eles.length) return 0;
    cy.elements().unselect();
    eles.addClass("txp-focus").select();
    focusOn(eles);
    if (eles.length === 1) showNode(eles[0]);
    return eles.length;
  };
  // After a trace onward that changed nothing (or failed) no new graph arrives: say so, and bring the
  // drawer's button back by drawing the open details again.
  const settle = (text) => {
    note.textContent = text;
    const open = cy.$(":selected");
    if (drawer.classList.contains("open") && open.length === 1) {
      if (open.isNode()) showNode(open); else showEdge(open);
    }
  };
  const destroy = () => {
    document.removeEventListener("scroll", invalidate, { capture: true });
    window.removeEventListener("resize", invalidate);
    if (observer) observer.disconnect();
    cy.destroy();
  };
  return { cy, update, focus, settle, destroy, el };
}

export function renderGraphPanel(model, body) {
  let graph = null;
  const draw = () => {
    const data = model.get("graph") || {};
    const nodes = Array.isArray(data.nodes) ? data.nodes : [];
    if (!nodes.length) {
      if (graph) graph.destroy();
      graph = null;
      body.replaceChildren(h("div", "txp-empty", "No traced flows yet."));
      return;
    }
    if (!graph) {
      const onTrace = model.get("can_trace") ? (node) => model.send({ type: "trace", node }) : null;
      graph = createGraph(body, { onTrace, onFlag: (flag_id) => model.send({ type: "flag", flag_id }) });
      if (!graph) return;
    }
    graph.update(data, { added: model.get("added") || [], note: model.get("note") || "" });
  };
  const focus = () => {
    const f = model.get("focus_request") || {};
    if (f.n && graph) graph.focus(f.ids || []);
  };
  const settle = () => { if (graph) graph.settle(model.get("note") || ""); };
  const destroy = () => { if (graph) graph.destroy(); };
  return { draw, focus, settle, destroy };
}
