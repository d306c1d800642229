// What the fund-flow graph shows: legend groups, node names fitted to their box, edge labels,
// the elements built from the panel's graph, and the style Cytoscape draws them with.

import { compactUsd, shortAddress, day, when } from "./panel_kit.js";

// Legend groups: a node's role first (what the case says), then its label's category.
export const GROUPS = [
  ["perpetrator", "#cf222e", "perpetrator"], ["suspect", "#e16f24", "suspect"], ["victim", "#2da44e", "victim"],
  ["exchange", "#0969da", "exchange"], ["mixer", "#8250df", "mixer"], ["bridge", "#1b7c83", "bridge"],
  ["dex", "#6639ba", "DEX / swap"], ["sanctioned", "#a40e26", "sanctioned"], ["scam", "#bf3989", "scam"],
  ["service", "#57606a", "other service"], ["hop", "#8c959f", "unlabelled hop"],
];
export const GROUP = Object.fromEntries(GROUPS.map(([k, colour, name]) => [k, { colour, name }]));
export const EDGE_KINDS = [["transfer", "transfer"], ["swap", "swap (DEX)"], ["bridge", "bridge crossing"]];
export const MAX_NODES = 400;
export const NODE_FONT = 14; // px at zoom 1
export const MIN_READABLE_PX = 10; // node text must render at least this large after Fit
const NODE_W = 190;
const NODE_TEXT_W = 176;

export function nodeAddress(n) {
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

// What a node's taint reads as. Zero is not always "no stolen funds here": none arrives at the
// trace's start (it sends the taint), and a swap router or a bridge contract passes it on to the
// swap's or the crossing's recipient, where it is counted.
export function taintText(n, format) {
  const known = n.tainted_usd !== undefined && n.tainted_usd !== null && n.tainted_usd !== "";
  if (known && Number(n.tainted_usd) > 0) return "tainted " + format(n.tainted_usd);
  if (known && Number(n.hop) === 0) return "trace start";
  if (n.bridge_contract) return "bridge contract";
  if (known && /dex|swap/.test(String(n.category ?? "").toLowerCase())) return "swap: passed on";
  return known ? "tainted " + format(n.tainted_usd) : "";
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

export function amountText(a) {
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
    const taint = taintText(n, compactUsd);
    if (taint) lines.push(taint);
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

export const GRAPH_STYLE = [
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

