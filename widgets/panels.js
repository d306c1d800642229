// Case panels for notebooks (tahrix_lab/lab/panels.py): a sortable flags
// table and a fund-flow graph drawn as SVG with a small layered layout.
// Case data is untrusted (labels, token names): text goes in through text
// nodes only, never innerHTML.

const SVG = "http://www.w3.org/2000/svg";
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

function s(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function short(text, n = 14) {
  const t = String(text ?? "");
  return t.length > n ? t.slice(0, n - 5) + "…" + t.slice(-4) : t;
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
// Layers: longest path from the sources over an acyclic view of the graph (back
// edges found by DFS are ignored for layering), then one barycentre pass to
// reduce crossings.
export function layout(nodes, edges) {
  const ids = nodes.map((n) => String(n.id));
  const index = new Map(ids.map((id, i) => [id, i]));
  const out = ids.map(() => []);
  const inc = ids.map(() => []);
  for (const e of edges) {
    const a = index.get(String(e.source));
    const b = index.get(String(e.target));
    if (a === undefined || b === undefined || a === b) continue;
    out[a].push(b);
    inc[b].push(a);
  }
  // DFS order to drop back edges (iterative: graphs can be deep)
  const colour = new Array(ids.length).fill(0);
  const back = new Set();
  for (let root = 0; root < ids.length; root++) {
    if (colour[root]) continue;
    const stack = [[root, 0]];
    colour[root] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [v, k] = top;
      if (k < out[v].length) {
        top[1]++;
        const w = out[v][k];
        if (colour[w] === 1) back.add(v + ">" + w);
        else if (colour[w] === 0) {
          colour[w] = 1;
          stack.push([w, 0]);
        }
      } else {
        colour[v] = 2;
        stack.pop();
      }
    }
  }
  // longest-path layers via Kahn's algorithm on the acyclic edges
  const indeg = ids.map(() => 0);
  const fwd = ids.map(() => []);
  for (let a = 0; a < ids.length; a++) {
    for (const b of out[a]) {
      if (back.has(a + ">" + b)) continue;
      fwd[a].push(b);
      indeg[b]++;
    }
  }
  const layer = ids.map(() => 0);
  const queue = [];
  indeg.forEach((d, i) => d === 0 && queue.push(i));
  for (let qi = 0; qi < queue.length; qi++) {
    const v = queue[qi];
    for (const w of fwd[v]) {
      layer[w] = Math.max(layer[w], layer[v] + 1);
      if (--indeg[w] === 0) queue.push(w);
    }
  }
  const layers = [];
  layer.forEach((l, i) => (layers[l] ||= []).push(i));
  const pos = new Array(ids.length).fill(0);
  layers.forEach((members, l) => {
    if (l > 0) {
      const bary = (i) => {
        const preds = inc[i].filter((p) => layer[p] < l);
        return preds.length ? preds.reduce((acc, p) => acc + pos[p], 0) / preds.length : Infinity;
      };
      members.sort((a, b) => bary(a) - bary(b));
    }
    members.forEach((i, k) => (pos[i] = k));
  });
  return { layer, pos, layers: layers.map((m) => m.map((i) => ids[i])) };
}

export function renderGraph(el, graph) {
  el.replaceChildren();
  const allNodes = Array.isArray(graph?.nodes) ? graph.nodes : [];
  const nodes = allNodes.slice(0, MAX_NODES);
  const keep = new Set(nodes.map((n) => String(n.id)));
  const edges = (Array.isArray(graph?.edges) ? graph.edges : []).filter(
    (e) => keep.has(String(e.source)) && keep.has(String(e.target))
  );
  const info = el.appendChild(h("div", "txp-bar"));
  info.appendChild(
    h("span", "txp-count", `${nodes.length}${allNodes.length > nodes.length ? " of " + allNodes.length : ""} addresses · ${edges.length} flows`)
  );
  if (!nodes.length) {
    el.appendChild(h("div", "txp-empty", "No traced flows yet."));
    return null;
  }
  const { layer, pos, layers } = layout(nodes, edges);
  const W = 196;
  const H = 40;
  const GX = 70;
  const GY = 18;
  const tallest = Math.max(...layers.map((m) => m.length));
  const width = layers.length * (W + GX) - GX + 20;
  const height = tallest * (H + GY) - GY + 20;
  const svg = s("svg", { class: "txp-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  svg.appendChild(s("title", {}, "Fund flow graph"));
  const defs = svg.appendChild(s("defs"));
  const marker = defs.appendChild(
    s("marker", { id: "txp-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" })
  );
  marker.appendChild(s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "txp-arrowhead" }));
  const xy = (i) => {
    const members = layers[layer[i]].length;
    const offset = ((tallest - members) * (H + GY)) / 2;
    return [10 + layer[i] * (W + GX), 10 + offset + pos[i] * (H + GY)];
  };
  const index = new Map(nodes.map((n, i) => [String(n.id), i]));
  const maxUsd = Math.max(1, ...edges.map((e) => Number(e.usd) || 0));
  const edgeGroup = svg.appendChild(s("g", { class: "txp-edges" }));
  for (const e of edges) {
    const a = index.get(String(e.source));
    const b = index.get(String(e.target));
    const [x1, y1] = xy(a);
    const [x2, y2] = xy(b);
    const forward = layer[b] > layer[a];
    const sx = forward ? x1 + W : x1 + W / 2;
    const sy = forward ? y1 + H / 2 : y1 + H;
    const tx = forward ? x2 : x2 + W / 2;
    const ty = forward ? y2 + H / 2 : y2 + H;
    const d = forward
      ? `M ${sx} ${sy} C ${sx + GX / 2} ${sy}, ${tx - GX / 2} ${ty}, ${tx} ${ty}`
      : `M ${sx} ${sy} C ${sx} ${sy + 40}, ${tx} ${ty + 40}, ${tx} ${ty}`;
    const usd = Number(e.usd) || 0;
    const path = edgeGroup.appendChild(
      s("path", { d, class: "txp-edge", "stroke-width": (1 + 5 * Math.sqrt(usd / maxUsd)).toFixed(2), "marker-end": "url(#txp-arrow)" })
    );
    path.dataset.source = String(e.source);
    path.dataset.target = String(e.target);
    const hashes = e.tx_hash ? [e.tx_hash] : Array.isArray(e.tx_hashes) ? e.tx_hashes : [];
    const lines = [`${e.source} → ${e.target}`];
    if (e.amount !== undefined && e.amount !== null) lines.push(`amount ${e.amount}${e.asset ? " " + e.asset : ""}`);
    if (e.usd !== undefined && e.usd !== null) lines.push(money(e.usd));
    if (e.transfers) lines.push(`${e.transfers} transfers`);
    if (hashes.length) lines.push("tx " + hashes.join(", "));
    path.appendChild(s("title", {}, lines.join("\n")));
  }
  const nodeGroup = svg.appendChild(s("g", { class: "txp-nodes" }));
  nodes.forEach((n, i) => {
    const [x, y] = xy(i);
    const g = nodeGroup.appendChild(s("g", { class: "txp-node", transform: `translate(${x} ${y})` }));
    g.dataset.id = String(n.id);
    const category = String(n.category || n.role || "").toLowerCase();
    g.dataset.category = category;
    const colour = colourFor(category);
    g.appendChild(s("rect", { width: W, height: H, rx: 6, ry: 6, class: "txp-node-box", stroke: colour }));
    g.appendChild(s("rect", { width: 5, height: H, rx: 2, ry: 2, fill: colour }));
    const label = n.label ? clip(n.label, 23) : short(n.address || n.id, 20);
    g.appendChild(s("text", { x: 12, y: 16, class: "txp-node-label" }, label));
    const sub = [clip(category.replace(/_/g, " "), 16), n.tainted_usd ? money(n.tainted_usd) : ""].filter(Boolean).join(" · ");
    g.appendChild(s("text", { x: 12, y: 31, class: "txp-node-sub" }, sub || short(n.id, 24)));
    g.appendChild(s("title", {}, [n.id, n.label, category].filter(Boolean).join("\n")));
  });
  el.appendChild(h("div", "txp-scroll")).appendChild(svg);
  return svg;
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
    else renderGraph(body, model.get("graph"));
  };
  draw();
  const events = ["change:rows", "change:graph", "change:error", "change:title"];
  for (const ev of events) model.on(ev, draw);
  return () => events.forEach((ev) => model.off(ev, draw));
}

export default { render };
