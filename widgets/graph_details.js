// The graph's drawer: what a clicked address or flow shows (text nodes only: labels from the case
// are never parsed as HTML).

import { h, button, money, plural, shortAddress, when, copyButton, explorerLink } from "./panel_kit.js";
import { nodeAddress, nodeName, amountText, taintText } from "./graph_model.js";
import { SEVERITY, flagLine } from "./flags.js";

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

export function nodeDetails(drawer, cy, n, opts) {
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
    ["entity", n.label_entity], ["hop", n.hop], ["tainted", taintText(n, money).replace(/^tainted /, "")],
    ["held here", SHOW(n.held_usd) && Number(n.held_usd) > 0 ? money(n.held_usd) : ""],
    ["traced in", node.length ? `${money(sum(node.incomers("edge")))} · ${plural(node.incomers("edge").length, "flow")}` : ""],
    ["traced out", node.length ? `${money(sum(node.outgoers("edge")))} · ${plural(node.outgoers("edge").length, "flow")}` : ""],
    ["case in", SHOW(n.in_count) ? `${money(n.in_usd)} · ${plural(n.in_count, "transfer")}` : ""],
    ["case out", SHOW(n.out_count) ? `${money(n.out_usd)} · ${plural(n.out_count, "transfer")}` : ""],
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

export function edgeDetails(drawer, cy, e) {
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
