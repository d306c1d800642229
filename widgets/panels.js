// Case panels for notebooks (tahrix_lab/lab/panels.py, graph_panel.py): the flags
// panel (triage rows, raw flags one click away) and the fund-flow graph
// (Cytoscape.js, layered by dagre, details in a drawer).
// Case data is untrusted (labels, token names): text goes in through text
// nodes only, never innerHTML.

const SEVERITY = { critical: 5, high: 4, medium: 3, low: 2, info: 1 };
// Legend groups: a node's role first (what the case says), then its label's category.
const GROUPS = [
  ["perpetrator", "#cf222e", "perpetrator"], ["suspect", "#e16f24", "suspect"], ["victim", "#2da44e", "victim"],
  ["exchange", "#0969da", "exchange"], ["mixer", "#8250df", "mixer"], ["bridge", "#1b7c83", "bridge"],
  ["dex", "#6639ba", "DEX / swap"], ["sanctioned", "#a40e26", "sanctioned"], ["scam", "#bf3989", "scam"],
  ["service", "#57606a", "other service"], ["hop", "#8c959f", "unlabelled hop"],
];
const GROUP = Object.fromEntries(GROUPS.map(([k, colour, name]) => [k, { colour, name }]));
const EDGE_KINDS = [["transfer", "transfer"], ["swap", "swap (DEX)"], ["bridge", "bridge crossing"]];
const MAX_NODES = 400;
const NODE_FONT = 14; // px at zoom 1
const MIN_READABLE_PX = 10; // node text must render at least this large after Fit
const NODE_W = 190;
const NODE_TEXT_W = 176;

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(cls, text, title) {
  const b = h("button", cls, text);
  b.type = "button";
  if (title) b.title = title;
  return b;
}

function money(usd) {
  if (usd === null || usd === undefined || usd === "") return "";
  const v = Number(usd);
  if (!Number.isFinite(v)) return String(usd);
  return "$" + v.toLocaleString("en-US", { maximumFractionDigits: v >= 100 ? 0 : 2 });
}

export function compactUsd(usd) {
  if (usd === null || usd === undefined || usd === "") return "";
  const v = Number(usd);
  if (!Number.isFinite(v)) return String(usd);
  for (const [size, s] of [[1e9, "B"], [1e6, "M"], [1e3, "K"]]) {
    if (Math.abs(v) >= size) return "$" + (v / size).toFixed(1).replace(/\.0$/, "") + s;
  }
  return "$" + v.toFixed(0);
}

export function shortAddress(address) {
  const a = String(address ?? "");
  return a.length > 14 ? a.slice(0, 6) + "…" + a.slice(-4) : a;
}

function day(time) {
  const t = String(time ?? "");
  return /^\d{4}-\d\d-\d\d/.test(t) ? t.slice(0, 10) : t;
}

function when(time) {
  const t = String(time ?? "");
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(t) ? t.slice(0, 16).replace("T", " ") : t;
}

// Copy to the clipboard; where the page may not (an insecure origin), select the text instead.
function copyButton(text, label = "copy") {
  const b = button("txp-copy", label, "Copy " + shortAddress(text));
  b.addEventListener("click", (ev) => {
    ev.stopPropagation();
    const done = () => { b.textContent = "copied"; setTimeout(() => { b.textContent = label; }, 1200); };
    const fallback = () => {
      const area = document.body.appendChild(h("textarea", null, text));
      area.select();
      try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
      area.remove();
      done();
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  });
  return b;
}

function explorerLink(url, text = "explorer ↗") {
  if (!url || !/^https:\/\//.test(String(url))) return null;
  const a = h("a", "txp-link", text);
  a.href = url;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  return a;
}

// -- flags: the raw table (also the panel for a plain list of flags) -----------------
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

function filterBox(bar, state, placeholder, draw) {
  const filter = bar.appendChild(h("input", "txp-filter"));
  filter.type = "search";
  filter.placeholder = placeholder;
  filter.value = state.filter || "";
  filter.addEventListener("input", () => { state.filter = filter.value; draw(); });
  filter.addEventListener("keydown", (ev) => ev.stopPropagation()); // keep keys from the notebook
  return filter;
}

export function renderFlags(el, rows, state = { key: "severity", desc: true }, bar = null) {
  el.replaceChildren();
  const list = Array.isArray(rows) ? rows : [];
  bar = bar || el.appendChild(h("div", "txp-bar"));
  const count = bar.appendChild(h("span", "txp-count"));
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
      tr.dataset.flag = String(row.flag_id ?? "");
      if (row.explanation) tr.title = row.explanation;
      for (const col of FLAG_COLUMNS) {
        let v = row[col];
        if (col === "score" && typeof v === "number") v = v.toFixed(2);
        tr.appendChild(h("td", "txp-" + col, v ?? ""));
      }
    }
    if (!shown.length) body.appendChild(h("tr")).appendChild(h("td", "txp-empty", "No flags.")).colSpan = FLAG_COLUMNS.length;
  };
  filterBox(bar, state, "Filter flags…", draw);
  draw();
  return state;
}

// -- flags: triage rows, each expanding to its raw flags ------------------------------
export const TRIAGE_COLUMNS = [["severity", "severity"], ["label", "label"], ["chains", "chain"],
  ["amount_usd", "amount"], ["first_time", "time"], ["status", "status"], ["explanation", "why"]];

function triageCell(row, key) {
  const v = row[key];
  if (key === "chains") return (v || []).join(", ");
  if (key === "amount_usd") return compactUsd(v);
  if (key === "first_time") {
    const a = day(row.first_time), b = day(row.last_time);
    return a && b && a !== b ? `${a} → ${b}` : a;
  }
  return v ?? "";
}

// Confirm / Dismiss on a flag (the analyst's own decision; FlagsPanel.for_case(..., analyst=...)).
function decisionButtons(li, f, onDecide) {
  const status = String(f.status ?? "");
  for (const [action, text, done] of [["confirm_flag", "Confirm", "confirmed"], ["dismiss_flag", "Dismiss", "dismissed"]]) {
    if (status === done) continue;
    const b = li.appendChild(button("txp-decide", text, `${text} ${f.flag_id}: recorded under your name`));
    b.dataset.action = action;
    b.addEventListener("click", (ev) => {
      ev.stopPropagation();
      for (const other of li.querySelectorAll(".txp-decide")) other.disabled = true;
      onDecide(String(f.flag_id), action);
    });
  }
}

function flagLine(f, onFlag, onDecide) {
  const li = h("li", "txp-flag");
  li.dataset.flag = String(f.flag_id ?? "");
  li.dataset.severity = String(f.severity ?? "").toLowerCase();
  li.appendChild(h("span", "txp-sev", f.severity));
  const id = li.appendChild(h("span", "txp-flag-id", f.flag_id));
  if (onFlag) {
    id.classList.add("txp-clickable");
    id.addEventListener("click", (ev) => { ev.stopPropagation(); onFlag(String(f.flag_id)); });
  }
  li.appendChild(h("span", "txp-flag-type", String(f.flag_type ?? "").replace(/_/g, " ")));
  if (f.explanation) li.appendChild(h("span", "txp-flag-why", f.explanation));
  const where = li.appendChild(h("span", "txp-flag-where", [f.chain, shortAddress(f.address)].filter(Boolean).join(" · ")));
  if (f.address) where.appendChild(copyButton(String(f.address)));
  if (f.status) li.appendChild(h("span", "txp-flag-status", f.status));
  for (const tx of (f.tx_hashes || []).slice(0, 3)) {
    const t = li.appendChild(h("span", "txp-flag-tx", shortAddress(tx)));
    t.appendChild(copyButton(String(tx)));
  }
  if (onDecide) decisionButtons(li, f, onDecide); // last, at the line's right end
  return li;
}

export function renderTriage(el, rows, raw, state, opts = {}) {
  el.replaceChildren();
  const bar = el.appendChild(h("div", "txp-bar"));
  const toggle = bar.appendChild(button("txp-view", state.view === "raw" ? "Triage rows" : "Raw flags",
    "Switch between the triage roll-up and every raw flag"));
  toggle.addEventListener("click", () => {
    state.view = state.view === "raw" ? "triage" : "raw";
    renderTriage(el, rows, raw, state, opts);
  });
  if (state.view === "raw") {
    const body = el.appendChild(h("div"));
    const rawState = state.raw || (state.raw = { key: "severity", desc: true, filter: "" });
    renderFlags(body, raw, rawState, bar);
    return state;
  }
  const count = bar.appendChild(h("span", "txp-count"));
  const table = el.appendChild(h("div", "txp-table-scroll txp-triage-scroll")).appendChild(h("table", "txp-table txp-triage"));
  const head = table.appendChild(h("thead")).appendChild(h("tr"));
  head.appendChild(h("th", "txp-expander", ""));
  for (const [, name] of TRIAGE_COLUMNS) head.appendChild(h("th", null, name));
  const body = table.appendChild(h("tbody"));
  const draw = () => {
    const q = (state.filter || "").toLowerCase();
    const shown = rows.filter((r) => !q || [r.label, r.explanation, (r.chains || []).join(" "), r.severity, r.status,
      ...(r.addresses || []), ...(r.flags || []).map((f) => f.flag_id)].some((v) => String(v ?? "").toLowerCase().includes(q)));
    count.textContent = `${shown.length} of ${rows.length} rows · ${raw.length} flags`;
    body.replaceChildren();
    for (const row of shown) {
      const open = state.open.has(row.row_id);
      const tr = body.appendChild(h("tr", "txp-row"));
      tr.dataset.row = String(row.row_id);
      tr.dataset.severity = String(row.severity ?? "").toLowerCase();
      if (state.selected === row.row_id) tr.classList.add("txp-selected");
      tr.appendChild(h("td", "txp-expander", open ? "▾" : "▸"));
      for (const [key] of TRIAGE_COLUMNS) {
        const td = tr.appendChild(h("td", "txp-" + key, triageCell(row, key)));
        if (key === "label" || key === "explanation") td.title = String(row[key] ?? "");
        // In a narrow panel the time and why columns give way to this line under the label (CSS).
        if (key === "label") {
          const line = [row.explanation, triageCell(row, "first_time")].filter(Boolean).join(" · ");
          td.appendChild(h("div", "txp-why-line", line)).title = line;
        }
      }
      tr.addEventListener("click", () => {
        if (open) state.open.delete(row.row_id);
        else state.open.add(row.row_id);
        state.selected = row.row_id;
        draw();
        if (opts.onSelect) opts.onSelect(String(row.row_id));
      });
      if (!open) continue;
      const detail = body.appendChild(h("tr", "txp-evidence"));
      detail.dataset.row = String(row.row_id);
      const td = detail.appendChild(h("td"));
      td.colSpan = TRIAGE_COLUMNS.length + 1;
      const addresses = row.addresses || [];
      td.appendChild(h("div", "txp-evidence-head",
        `${row.flag_count} flag${row.flag_count === 1 ? "" : "s"} · ${(row.flag_types || []).join(", ").replace(/_/g, " ")}` +
        ` · ${addresses.length} address${addresses.length === 1 ? "" : "es"}` + (row.role ? ` · role: ${row.role}` : "")));
      const ul = td.appendChild(h("ul", "txp-flags"));
      for (const f of row.flags || []) {
        const li = ul.appendChild(flagLine(f, null, opts.onDecide));
        if (state.flag === f.flag_id) li.classList.add("txp-selected");
      }
      for (const rel of row.related || []) {
        td.appendChild(h("div", "txp-evidence-head", `related ${rel.row_id}: ${rel.why}`));
        const rl = td.appendChild(h("ul", "txp-flags"));
        for (const f of rel.flags || []) rl.appendChild(flagLine(f, null, opts.onDecide));
      }
    }
    if (!shown.length) body.appendChild(h("tr")).appendChild(h("td", "txp-empty", "No flags.")).colSpan = TRIAGE_COLUMNS.length + 1;
  };
  state.redraw = draw;
  filterBox(bar, state, "Filter rows…", draw);
  draw();
  return state;
}

// -- fund-flow graph -------------------------------------------------------------
// Cytoscape.js with the dagre layered layout (widgets/graph.bundle.js, built by
// widgets/build from pinned npm packages). The bundle defines TahrixCytoscape:
// in the notebook it is joined with this file into one module, on a plain page
// it is loaded with a script tag first. Cytoscape draws on a canvas, so labels
// from the case are never parsed as HTML; the drawer uses text nodes.

function cytoscapeLib() {
  // eslint-disable-next-line no-undef
  const lib = typeof TahrixCytoscape !== "undefined" ? TahrixCytoscape : globalThis.TahrixCytoscape;
  return lib ? lib.default || lib : null;
}

function nodeAddress(n) {
  if (n.address) return String(n.address);
  const id = String(n.id ?? "");
  return id.includes(":") ? id.slice(id.indexOf(":") + 1) : id;
}

export function groupOf(n) {
  const role = String(n.role ?? "");
  if (GROUP[role]) return role;
  const c = String(n.category ?? "").toLowerCase();
  for (const [key, group] of [["mix", "mixer"], ["exchange", "exchange"], ["cex", "exchange"], ["otc", "exchange"],
    ["dex", "dex"], ["swap", "dex"], ["bridge", "bridge"], ["sanction", "sanctioned"], ["scam", "scam"],
    ["phish", "scam"], ["theft", "perpetrator"], ["perpetrator", "perpetrator"], ["victim", "victim"]]) {
    if (c.includes(key)) return group;
  }
  if (n.bridge_contract) return "bridge";
  return c ? "service" : "hop";
}

// The name an analyst uses: the label, else the role, else the hop ("start" only when nothing better is known).
export function nodeName(n) {
  if (n.name) return String(n.name);
  if (n.label) return String(n.label);
  if (n.role && n.role !== "start") return String(n.role);
  if (n.category) return String(n.category).replace(/_/g, " ");
  if (n.hop !== undefined && n.hop !== null) return n.hop === 0 ? "trace start" : `hop ${n.hop}`;
  return "address";
}

let measureCtx = null;
function fitText(text, px, weight = "600") {
  const t = String(text);
  if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
  if (!measureCtx) return t.length > 24 ? t.slice(0, 23) + "…" : t;
  measureCtx.font = `${weight} ${px}px system-ui, sans-serif`;
  if (measureCtx.measureText(t).width <= NODE_TEXT_W) return t;
  let lo = 0, hi = t.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measureCtx.measureText(t.slice(0, mid) + "…").width <= NODE_TEXT_W) lo = mid; else hi = mid - 1;
  }
  return t.slice(0, lo) + "…";
}

function amountText(a) {
  if (a.amount === null || a.amount === undefined) return `? ${a.symbol}`;
  const v = Number(a.amount);
  const n = !Number.isFinite(v) ? String(a.amount) : v.toLocaleString("en-US", { maximumFractionDigits: Math.abs(v) >= 1000 ? 0 : Math.abs(v) >= 1 ? 2 : 6 });
  return `${n} ${a.symbol}`;
}

export function edgeLabel(e) {
  if (e.text) return String(e.text);
  const bits = [];
  if (Array.isArray(e.amounts)) bits.push(...e.amounts.slice(0, 2).map(amountText));
  else if (e.amount !== undefined && e.amount !== null) bits.push(`${e.amount} ${e.asset || ""}`.trim());
  if (e.usd !== undefined && e.usd !== null && e.usd !== "") bits.push(compactUsd(e.usd));
  const t = day(e.first_time || e.time || e.block_time);
  const last = day(e.last_time);
  if (t) bits.push(last && last !== t ? `${t} → ${last}` : t);
  if (e.transfers > 1) bits.push(`×${e.transfers} transfers`);
  return bits.join(" · ");
}

// What an edge says at a glance (the full line shows on hover, selection or zoom).
function edgeShort(e) {
  const bits = Array.isArray(e.amounts) ? e.amounts.slice(0, 1).map(amountText) : [];
  if (e.usd !== undefined && e.usd !== null && e.usd !== "") bits.push(compactUsd(e.usd));
  if (e.transfers > 1) bits.push(`×${e.transfers}`);
  return bits.join(" · ");
}

function edgeKind(e) {
  const k = String(e.kind ?? "transfer");
  return k === "bridge" || k === "swap" ? k : "transfer";
}

export function graphElements(graph) {
  const nodes = (graph && Array.isArray(graph.nodes) ? graph.nodes : []).slice(0, MAX_NODES);
  const known = new Set(nodes.map((n) => String(n.id)));
  const maxUsd = Math.max(1, ...((graph && graph.edges) || []).map((e) => Number(e.usd) || 0));
  // The chain is named on the nodes off the graph's main chain only (one line per fact, no wrapping).
  const perChain = {};
  for (const n of nodes) perChain[n.chain] = (perChain[n.chain] || 0) + 1;
  const mainChain = Object.keys(perChain).sort((a, b) => perChain[b] - perChain[a])[0];
  const elements = [];
  for (const n of nodes) {
    const group = groupOf(n);
    const lines = [fitText(nodeName(n), NODE_FONT),
      fitText(shortAddress(nodeAddress(n)) + (n.chain && n.chain !== mainChain ? ` · ${n.chain}` : ""), NODE_FONT, "400")];
    const taint = Number(n.tainted_usd);
    if (n.tainted_usd !== undefined && n.tainted_usd !== null && (taint > 0 || !n.bridge_contract)) {
      lines.push("tainted " + compactUsd(n.tainted_usd));
    } else if (n.bridge_contract) lines.push("bridge contract");
    elements.push({
      group: "nodes",
      data: {
        id: String(n.id), display: lines.join("\n"), colour: GROUP[group].colour, group,
        endpoint: n.endpoint ? "yes" : "no", hop: Number.isFinite(Number(n.hop)) ? Number(n.hop) : 0, raw: n,
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
        id: "e" + k++, source, target, display: edgeLabel(e), short: edgeShort(e), kind: edgeKind(e),
        width: 1.5 + 6 * Math.sqrt(usd / maxUsd), raw: e,
      },
    });
  }
  return elements;
}

const GRAPH_STYLE = [
  { selector: "node", style: {
    "shape": "round-rectangle", "width": NODE_W, "height": 64, "label": "data(display)",
    "text-wrap": "wrap", "text-max-width": NODE_TEXT_W, "text-valign": "center", "text-halign": "center",
    "font-size": NODE_FONT, "line-height": 1.25, "font-family": "system-ui, sans-serif", "color": "#1f2328",
    "background-color": "#ffffff", "border-width": 3, "border-color": "data(colour)", "min-zoomed-font-size": 7,
  } },
  { selector: 'node[endpoint = "yes"]', style: { "background-color": "data(colour)", "color": "#ffffff", "border-color": "#1f2328", "border-width": 1.5 } },
  { selector: 'node[group = "perpetrator"], node[group = "suspect"]', style: { "border-width": 5 } },
  { selector: "node:selected", style: { "overlay-color": "#0969da", "overlay-opacity": 0.18, "overlay-padding": 6 } },
  { selector: "node.txp-focus", style: { "overlay-color": "#d4a72c", "overlay-opacity": 0.35, "overlay-padding": 8 } },
  { selector: "node.txp-added", style: { "underlay-color": "#2da44e", "underlay-opacity": 0.25, "underlay-padding": 8 } },
  { selector: "edge", style: {
    "width": "data(width)", "curve-style": "bezier", "target-arrow-shape": "triangle", "arrow-scale": 1.1,
    "line-color": "#8c959f", "target-arrow-color": "#8c959f", "label": "data(short)", "font-size": 12,
    "color": "#24292f", "text-background-color": "#ffffff", "text-background-opacity": 0.92,
    "text-background-padding": 2, "text-background-shape": "round-rectangle", "text-rotation": "autorotate",
    "min-zoomed-font-size": 8, "font-family": "system-ui, sans-serif",
  } },
  { selector: 'edge[kind = "bridge"]', style: { "line-style": "dashed", "line-dash-pattern": [8, 4], "line-color": "#1b7c83", "target-arrow-color": "#1b7c83" } },
  { selector: 'edge[kind = "swap"]', style: { "line-style": "dotted", "line-color": "#6639ba", "target-arrow-color": "#6639ba" } },
  { selector: "edge.txp-full", style: { "label": "data(display)" } },
  { selector: "edge.txp-nolabel", style: { "label": "" } },
  { selector: "edge.txp-hover, edge:selected", style: { "label": "data(display)", "z-index": 20 } },
  { selector: "edge:selected", style: { "line-color": "#0969da", "target-arrow-color": "#0969da" } },
  { selector: ".txp-hidden", style: { "display": "none" } },
];

const SHOW = (v) => v !== undefined && v !== null && v !== "";

function dl(parent, rows) {
  const list = parent.appendChild(h("dl"));
  for (const [k, v, extra] of rows) {
    if (!SHOW(v)) continue;
    list.appendChild(h("dt", null, k));
    const dd = list.appendChild(h("dd", null, v));
    if (extra) dd.appendChild(extra);
  }
  return list;
}

function nodeDetails(drawer, cy, n, opts) {
  const node = cy.getElementById(String(n.id));
  const sum = (edges) => edges.reduce((s, e) => s + (Number(e.data("raw").usd) || 0), 0);
  const addr = nodeAddress(n);
  drawer.appendChild(h("div", "txp-details-title", nodeName(n)));
  const addrRow = h("span");
  addrRow.appendChild(copyButton(addr));
  const ex = explorerLink(n.explorer);
  if (ex) addrRow.appendChild(ex);
  dl(drawer, [
    ["address", addr, addrRow], ["chain", n.chain], ["role", n.role], ["label", n.label],
    ["category", n.category ? String(n.category).replace(/_/g, " ") : ""],
    ["label source", [n.label_source, n.label_confidence].filter(Boolean).join(" · ")],
    ["entity", n.label_entity], ["hop", n.hop], ["tainted", SHOW(n.tainted_usd) ? money(n.tainted_usd) : ""],
    ["held here", SHOW(n.held_usd) && Number(n.held_usd) > 0 ? money(n.held_usd) : ""],
    ["traced in", node.length ? `${money(sum(node.incomers("edge")))} · ${node.incomers("edge").length} flows` : ""],
    ["traced out", node.length ? `${money(sum(node.outgoers("edge")))} · ${node.outgoers("edge").length} flows` : ""],
    ["case in", SHOW(n.in_count) ? `${money(n.in_usd)} · ${n.in_count} transfers` : ""],
    ["case out", SHOW(n.out_count) ? `${money(n.out_usd)} · ${n.out_count} transfers` : ""],
    ["first seen", when(n.first_time)], ["via bridge", n.via_bridge],
    ["endpoint", n.endpoint === undefined ? "" : n.endpoint ? "yes (trace stops here)" : ""],
  ]);
  const flags = n.flags || [];
  if (flags.length) {
    drawer.appendChild(h("div", "txp-section", `Flags (${n.flag_count ?? flags.length})`));
    const ul = drawer.appendChild(h("ul", "txp-flags"));
    const rank = (f) => -(SEVERITY[String(f.severity).toLowerCase()] || 0);
    for (const f of [...flags].sort((a, b) => rank(a) - rank(b))) ul.appendChild(flagLine(f, opts.onFlag));
  }
  if (opts.onTrace) {
    const go = drawer.appendChild(button("txp-trace", n.bridge_contract ? "Trace onward across the bridge" : "Trace onward from here"));
    go.addEventListener("click", () => {
      go.disabled = true;
      go.textContent = "Tracing…";
      opts.onTrace(String(n.id));
    });
  }
}

function edgeDetails(drawer, cy, e) {
  const name = (id) => {
    const n = cy.getElementById(String(id));
    return n.length ? nodeName(n.data("raw")) : shortAddress(id);
  };
  drawer.appendChild(h("div", "txp-details-title", `${name(e.source)} → ${name(e.target)}`));
  dl(drawer, [
    ["kind", e.kind === "bridge" ? `bridge crossing (${e.bridge_name || "bridge"}: ${e.chain} → ${e.to_chain})` : e.kind],
    ["amount", (e.amounts || []).map(amountText).join(" + ")], ["USD", money(e.usd)],
    ["tainted", SHOW(e.tainted_usd) ? money(e.tainted_usd) : ""],
    ["transfers", e.transfers], ["time", [when(e.first_time), when(e.last_time)].filter((v, i, a) => v && a.indexOf(v) === i).join(" → ")],
    ["bridge event", e.bridge_event_id], ["matched by", e.match_method ? `${e.match_method} (${e.match_confidence})` : ""],
  ]);
  const txs = e.txs || (e.tx_hashes || []).map((tx_hash) => ({ tx_hash, chain: e.chain }));
  drawer.appendChild(h("div", "txp-section", `Transactions (${e.txs_total ?? txs.length}` +
    (e.txs_total > txs.length ? `, first ${txs.length} listed)` : ")")));
  const table = drawer.appendChild(h("table", "txp-txs"));
  const head = table.appendChild(h("thead")).appendChild(h("tr"));
  for (const c of ["hash", "time", "amount", "USD"]) head.appendChild(h("th", null, c));
  const body = table.appendChild(h("tbody"));
  for (const t of txs) {
    const tr = body.appendChild(h("tr", "txp-tx"));
    const hash = tr.appendChild(h("td", "txp-hash", shortAddress(t.tx_hash) + (t.leg ? ` (${t.leg})` : "")));
    hash.title = String(t.tx_hash ?? "");
    hash.appendChild(copyButton(String(t.tx_hash ?? "")));
    const link = explorerLink(t.explorer, "↗");
    if (link) hash.appendChild(link);
    tr.appendChild(h("td", null, when(t.time)));
    tr.appendChild(h("td", "txp-num", SHOW(t.symbol) ? amountText(t) : ""));
    tr.appendChild(h("td", "txp-num", money(t.usd)));
  }
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
    count.textContent = `${drawn} addresses · ${cy.edges().length} flows` +
      (nodes > MAX_NODES ? ` (first ${MAX_NODES} of ${nodes} drawn)` : "");
    note.textContent = text;
    filterHost.replaceChildren();
    readFilters = filterBar(filterHost, graph, () => { applyFilters(cy, readFilters()); declutter(cy); fitReadable(cy); });
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

// -- anywidget glue ----------------------------------------------------------------
function renderFlagsPanel(model, body) {
  const state = { key: "severity", desc: true, filter: "", view: "triage", open: new Set(), selected: null, flag: null };
  const draw = () => {
    const rows = model.get("rows") || [];
    const raw = model.get("raw") || [];
    if (!rows.length) renderFlags(body, raw, state);
    else renderTriage(body, rows, raw, state, {
      onSelect: (row_id) => model.send({ type: "select", row_id }),
      onDecide: model.get("can_decide") ? (flag_id, action) => model.send({ type: "decide", flag_id, action }) : null,
    });
  };
  const focus = () => {
    const f = model.get("focus_request") || {};
    if (!f.n) return;
    if (f.row_id) {
      state.view = "triage";
      state.filter = "";
      state.open.add(f.row_id);
      state.selected = f.row_id;
      state.flag = f.flag_id || null;
      draw();
      const tr = body.querySelector(`tr.txp-row[data-row="${CSS.escape(String(f.row_id))}"]`);
      if (tr) tr.scrollIntoView({ block: "nearest" });
    } else if (f.flag_id) {
      state.view = "raw";
      state.raw = { key: "severity", desc: true, filter: String(f.flag_id) };
      draw();
    }
  };
  return { draw, focus };
}

function renderGraphPanel(model, body) {
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

function render({ model, el }) {
  el.classList.add("txp-panel");
  const kind = model.get("kind");
  el.dataset.kind = kind;
  const title = el.appendChild(h("div", "txp-title"));
  const error = el.appendChild(h("div", "txp-error"));
  const body = el.appendChild(h("div", "txp-body"));
  const panel = kind === "flags" ? renderFlagsPanel(model, body) : renderGraphPanel(model, body);
  const head = () => {
    title.textContent = model.get("title") || "";
    error.textContent = model.get("error") || "";
    error.hidden = !model.get("error");
  };
  head();
  panel.draw();
  const on = [["change:title", head], ["change:error", head], ["change:focus_request", panel.focus],
    ...(kind === "flags" ? [["change:rows", panel.draw], ["change:raw", panel.draw], ["change:can_decide", panel.draw],
      ["change:error", panel.draw]] // a decision refused: the buttons come back
      : [["change:graph", panel.draw], ["change:note", panel.settle], ["change:error", panel.settle]])];
  for (const [ev, f] of on) model.on(ev, f);
  el.__panel = panel; // test hook: the graph controller lives in the panel's closure
  return () => {
    for (const [ev, f] of on) model.off(ev, f);
    if (panel.destroy) panel.destroy();
  };
}

export default { render };
