// Case panels for notebooks (tahrix_lab/lab/panels.py): a sortable flags
// table and a fund-flow graph (Cytoscape.js, layered by dagre).
// Case data is untrusted (labels, token names): text goes in through text
// nodes only, never innerHTML.

const SEVERITY = { critical: 5, high: 4, medium: 3, low: 2, info: 1 };
const CATEGORY_COLOURS = {
  victim: "#2da44e",
  perpetrator: "#cf222e",
  suspect: "#e16f24",
  exchange: "#0969da",
  mixer: "#8250df",
  bridge: "#1b7c83",
  dex: "#4d2d8f",
  sanctioned: "#a40e26",
  scam: "#bf3989",
  market_maker: "#6e7781",
};
const MAX_NODES = 400;

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function clip(text, n) {
  const t = String(text ?? "");
  return t.length > n ? t.slice(0, n - 1) + "…" : t;
}

// Known categories first, then a family guess (labels vary: "mixing_service", "defi_dex").
function colourFor(category) {
  if (CATEGORY_COLOURS[category]) return CATEGORY_COLOURS[category];
  for (const [key, colour] of [["mix", "#8250df"], ["exchange", "#0969da"], ["cex", "#0969da"], ["dex", "#4d2d8f"],
    ["bridge", "#1b7c83"], ["sanction", "#a40e26"], ["scam", "#bf3989"], ["phish", "#bf3989"], ["theft", "#cf222e"]]) {
    if (category.includes(key)) return colour;
  }
  return "#8c959f";
}

function money(usd) {
  if (usd === null || usd === undefined || usd === "") return "";
  const v = Number(usd);
  if (!Number.isFinite(v)) return String(usd);
  return "$" + v.toLocaleString("en-US", { maximumFractionDigits: v >= 100 ? 0 : 2 });
}

// -- flags table ------------------------------------------------------------------
export const FLAG_COLUMNS = ["flag_id", "flag_type", "severity", "score", "subject", "status"];

function compare(a, b, key) {
  let x = a[key];
  let y = b[key];
  if (key === "severity") {
    x = SEVERITY[String(x).toLowerCase()] ?? 0;
    y = SEVERITY[String(y).toLowerCase()] ?? 0;
  }
  if (typeof x === "number" && typeof y === "number") return x - y;
  if (x === null || x === undefined) return y === null || y === undefined ? 0 : 1;
  if (y === null || y === undefined) return -1;
  return String(x).localeCompare(String(y), undefined, { numeric: true });
}

export function renderFlags(el, rows, state = { key: "severity", desc: true }) {
  el.replaceChildren();
  const list = Array.isArray(rows) ? rows : [];
  const bar = el.appendChild(h("div", "txp-bar"));
  const count = bar.appendChild(h("span", "txp-count"));
  const filter = bar.appendChild(h("input", "txp-filter"));
  filter.type = "search";
  filter.placeholder = "Filter flags…";
  filter.value = state.filter || "";
  const table = el.appendChild(h("div", "txp-table-scroll")).appendChild(h("table", "txp-table"));
  const head = table.appendChild(h("thead")).appendChild(h("tr"));
  const body = table.appendChild(h("tbody"));

  const draw = () => {
    const q = (state.filter || "").toLowerCase();
    const shown = list
      .filter((r) => !q || FLAG_COLUMNS.some((c) => String(r[c] ?? "").toLowerCase().includes(q)))
      .sort((a, b) => (state.desc ? -1 : 1) * compare(a, b, state.key));
    count.textContent = `${shown.length} of ${list.length} flags`;
    head.replaceChildren();
    for (const col of FLAG_COLUMNS) {
      const th = head.appendChild(h("th", null, col.replace("_", " ")));
      th.dataset.key = col;
      if (col === state.key) th.dataset.sort = state.desc ? "desc" : "asc";
      th.addEventListener("click", () => {
        state.desc = state.key === col ? !state.desc : col === "score" || col === "severity";
        state.key = col;
        draw();
      });
    }
    body.replaceChildren();
    for (const row of shown) {
      const tr = body.appendChild(h("tr"));
      tr.dataset.severity = String(row.severity ?? "").toLowerCase();
      for (const col of FLAG_COLUMNS) {
        let v = row[col];
        if (col === "score" && typeof v === "number") v = v.toFixed(2);
        tr.appendChild(h("td", "txp-" + col, v ?? ""));
      }
    }
    if (!shown.length) body.appendChild(h("tr")).appendChild(h("td", "txp-empty", "No flags.")).colSpan = FLAG_COLUMNS.length;
  };
  filter.addEventListener("input", () => {
    state.filter = filter.value;
    draw();
  });
  filter.addEventListener("keydown", (ev) => ev.stopPropagation()); // keep keys from the notebook
  draw();
  return state;
}

// -- fund-flow graph -------------------------------------------------------------
// Cytoscape.js with the dagre layered layout (widgets/graph.bundle.js, built by
// widgets/build from pinned npm packages). The bundle defines TahrixCytoscape:
// in the notebook it is joined with this file into one module, on a plain page
// it is loaded with a script tag first. Cytoscape draws on a canvas, so labels
// from the case are never parsed as HTML; the details box uses text nodes.

function cytoscapeLib() {
  // eslint-disable-next-line no-undef
  const lib = typeof TahrixCytoscape !== "undefined" ? TahrixCytoscape : globalThis.TahrixCytoscape;
  return lib ? lib.default || lib : null;
}

export function shortAddress(address) {
  const a = String(address ?? "");
  return a.length > 14 ? a.slice(0, 6) + "…" + a.slice(-4) : a;
}

function day(time) {
  const t = String(time ?? "");
  return /^\d{4}-\d\d-\d\d/.test(t) ? t.slice(0, 10) : t;
}

function nodeAddress(n) {
  if (n.address) return String(n.address);
  const id = String(n.id ?? "");
  return id.includes(":") ? id.slice(id.indexOf(":") + 1) : id;
}

export function edgeLabel(e) {
  const bits = [];
  if (e.usd !== undefined && e.usd !== null && e.usd !== "") bits.push(money(e.usd));
  else if (e.amount !== undefined && e.amount !== null) bits.push(`${e.amount} ${e.asset || ""}`.trim());
  const t = day(e.first_time || e.time || e.block_time);
  const last = day(e.last_time);
  if (t) bits.push(last && last !== t ? `${t} → ${last}` : t);
  if (e.transfers > 1) bits.push(`${e.transfers} transfers`);
  return bits.join(" · ");
}

export function graphElements(graph) {
  const nodes = (graph && Array.isArray(graph.nodes) ? graph.nodes : []).slice(0, MAX_NODES);
  const known = new Set(nodes.map((n) => String(n.id)));
  const maxUsd = Math.max(1, ...((graph && graph.edges) || []).map((e) => Number(e.usd) || 0));
  const elements = [];
  // An address met on several chains (a bridge back to the same key) is one node per
  // chain: those nodes name their chain, so no two read alike.
  const chainsOf = new Map();
  for (const n of nodes) {
    const a = String(nodeAddress(n)).toLowerCase();
    chainsOf.set(a, (chainsOf.get(a) || new Set()).add(String(n.chain ?? "")));
  }
  for (const n of nodes) {
    const onSeveral = (chainsOf.get(String(nodeAddress(n)).toLowerCase()) || new Set()).size > 1;
    const category = String(n.category ?? n.role ?? "");
    const name = n.label || (n.role === "start" ? "start" : category.replace(/_/g, " ")) || "unlabelled";
    elements.push({
      group: "nodes",
      data: {
        id: String(n.id),
        display: clip(name, 36) + "\n" + shortAddress(nodeAddress(n)) + (onSeveral && n.chain ? ` · ${n.chain}` : ""),
        colour: n.role === "start" || n.role === "perpetrator" ? CATEGORY_COLOURS.perpetrator : colourFor(category),
        endpoint: n.endpoint ? "yes" : "no",
        raw: n,
      },
    });
  }
  let k = 0;
  for (const e of (graph && graph.edges) || []) {
    const source = String(e.source);
    const target = String(e.target);
    if (!known.has(source) || !known.has(target)) continue;
    const usd = Number(e.usd) || 0;
    elements.push({
      group: "edges",
      data: {
        id: "e" + k++, source, target, display: edgeLabel(e),
        width: 1.5 + 6 * Math.sqrt(usd / maxUsd), raw: e,
      },
    });
  }
  return elements;
}

const GRAPH_STYLE = [
  { selector: "node", style: {
    "shape": "round-rectangle", "width": 170, "height": 44, "label": "data(display)",
    "text-wrap": "wrap", "text-valign": "center", "text-halign": "center", "font-size": 11,
    "font-family": "system-ui, sans-serif", "color": "#1f2328", "background-color": "#f6f8fa",
    "border-width": 2, "border-color": "data(colour)",
  } },
  { selector: 'node[endpoint = "yes"]', style: { "background-color": "data(colour)", "color": "#ffffff", "border-color": "#1f2328" } },
  { selector: "node:selected", style: { "border-width": 4, "border-color": "#0969da" } },
  { selector: "edge", style: {
    "width": "data(width)", "curve-style": "bezier", "target-arrow-shape": "triangle",
    "line-color": "#8c959f", "target-arrow-color": "#8c959f", "label": "data(display)", "font-size": 9.5,
    "color": "#57606a", "text-background-color": "#ffffff", "text-background-opacity": 0.85,
    "text-background-padding": 2, "text-rotation": "autorotate",
  } },
  { selector: "edge:selected", style: { "line-color": "#0969da", "target-arrow-color": "#0969da" } },
];

function detailRows(n) {
  const rows = [["address", nodeAddress(n)], ["chain", n.chain], ["label", n.label], ["category", n.category],
    ["role", n.role], ["hop", n.hop], ["tainted", n.tainted_usd !== undefined ? money(n.tainted_usd) : undefined],
    ["first seen", n.first_time], ["endpoint", n.endpoint === undefined ? undefined : n.endpoint ? "yes" : "no"]];
  return rows.filter(([, v]) => v !== undefined && v !== null && v !== "");
}

export function renderGraph(el, graph, opts = {}) {
  el.replaceChildren();
  const nodes = graph && Array.isArray(graph.nodes) ? graph.nodes : [];
  const edges = graph && Array.isArray(graph.edges) ? graph.edges : [];
  if (!nodes.length) {
    el.appendChild(h("div", "txp-empty", "No traced flows yet."));
    return null;
  }
  const bar = el.appendChild(h("div", "txp-bar"));
  const elements = graphElements(graph);
  const drawnEdges = elements.filter((x) => x.group === "edges").length;
  const shownNodes = Math.min(nodes.length, MAX_NODES);
  bar.appendChild(h("span", "txp-count", `${shownNodes} addresses · ${drawnEdges} flows` +
    (nodes.length > MAX_NODES ? ` (first ${MAX_NODES} of ${nodes.length} drawn)` : "")));
  if (opts.note) bar.appendChild(h("span", "txp-note", opts.note));
  const fit = bar.appendChild(h("button", "txp-fit", "Fit"));
  fit.type = "button";
  const wrap = el.appendChild(h("div", "txp-graph-wrap"));
  const box = wrap.appendChild(h("div", "txp-graph"));
  const details = wrap.appendChild(h("div", "txp-details"));
  details.appendChild(h("div", "txp-hint", "Click an address for its details."));
  const cytoscape = cytoscapeLib();
  if (!cytoscape) {
    box.appendChild(h("div", "txp-error", "The graph library did not load."));
    return null;
  }
  const cy = cytoscape({
    container: box, elements, style: GRAPH_STYLE, wheelSensitivity: 0.3, minZoom: 0.05, maxZoom: 4,
    layout: { name: "dagre", rankDir: "LR", nodeSep: 18, rankSep: 90, edgeSep: 8, fit: true, padding: 20 },
  });
  box.__cy = cy; // for tests and the curious, from the console
  // A notebook output may be laid out after the graph: follow the box's size,
  // and fit the graph again the first time the box gets a real size.
  if (typeof ResizeObserver === "function") {
    let fitted = box.clientWidth > 0;
    new ResizeObserver(() => {
      cy.resize();
      if (!fitted && box.clientWidth > 0) {
        fitted = true;
        cy.fit(undefined, 20);
      }
    }).observe(box);
  }
  fit.addEventListener("click", () => cy.fit(undefined, 20));
  const show = (n) => {
    details.replaceChildren();
    details.appendChild(h("div", "txp-details-title", n.label || shortAddress(nodeAddress(n))));
    const dl = details.appendChild(h("dl"));
    for (const [k, v] of detailRows(n)) {
      dl.appendChild(h("dt", null, k));
      dl.appendChild(h("dd", null, v));
    }
    if (opts.onTrace) {
      const go = details.appendChild(h("button", "txp-trace", "Trace onward from here"));
      go.type = "button";
      go.addEventListener("click", () => {
        go.disabled = true;
        go.textContent = "Tracing…";
        opts.onTrace(String(n.id));
      });
    }
  };
  cy.on("tap", "node", (ev) => show(ev.target.data("raw")));
  return cy;
}

// -- anywidget glue ----------------------------------------------------------------
function render({ model, el }) {
  el.classList.add("txp-panel");
  const kind = model.get("kind");
  const title = el.appendChild(h("div", "txp-title"));
  const error = el.appendChild(h("div", "txp-error"));
  const body = el.appendChild(h("div", "txp-body"));
  const sort = { key: "severity", desc: true, filter: "" };
  const draw = () => {
    title.textContent = model.get("title") || "";
    error.textContent = model.get("error") || "";
    error.hidden = !model.get("error");
    if (kind === "flags") renderFlags(body, model.get("rows"), sort);
    else {
      const onTrace = model.get("can_trace") ? (node) => model.send({ type: "trace", node }) : null;
      renderGraph(body, model.get("graph"), { onTrace, note: model.get("note") });
    }
  };
  draw();
  const events = ["change:rows", "change:graph", "change:error", "change:title", "change:note"];
  for (const ev of events) model.on(ev, draw);
  return () => events.forEach((ev) => model.off(ev, draw));
}

export default { render };
