// The case panels on the service page: widgets/panels.js (the notebook's flags and graph panels),
// each on a plain object standing in for the anywidget model, linked as FlagsPanel.link links
// them in a notebook, with "Trace onward" asked of the service (page.js passes traceFrom).
import panels from "/static/panels.js";
import { rowOfFlag } from "/static/flags.js";

// panels.js renders an anywidget model; here a plain object stands in for it.
function pageModel(values, onMessage) {
  const handlers = new Map();
  return {
    get: (key) => values[key],
    set(key, value) {
      values[key] = value;
      for (const f of handlers.get("change:" + key) || []) f();
    },
    on(ev, f) {
      handlers.set(ev, [...(handlers.get(ev) || []), f]);
    },
    off(ev, f) {
      handlers.set(ev, (handlers.get(ev) || []).filter((g) => g !== f));
    },
    send: (msg) => onMessage(msg),
  };
}

// The union of two graphs: nodes by id (the first seen wins), edges by (source, target, kind, bridge);
// as lab/graph_panel.py merge_graphs does for a notebook.
function mergeGraphs(a, b) {
  const nodes = new Map();
  for (const n of [...(a.nodes || []), ...(b.nodes || [])]) if (!nodes.has(n.id)) nodes.set(n.id, n);
  const edges = new Map();
  for (const e of [...(a.edges || []), ...(b.edges || [])]) {
    const key = JSON.stringify([e.source, e.target, e.kind ?? null, e.bridge_event_id ?? null]);
    if (!edges.has(key)) edges.set(key, e);
  }
  const assets = [...new Set([...(a.assets || []), ...(b.assets || [])])].sort();
  return { nodes: [...nodes.values()], edges: [...edges.values()], ...(assets.length ? { assets } : {}) };
}

// "Trace onward" from a node: the service traces (across a bridge, the matched legs of the flows into
// it), the page merges what it found and brings it into view, as FlowGraphPanel.trace_onward does.
async function traceOnward(model, nodeId, traceFrom) {
  model.set("note", "");
  model.set("error", "");
  const graph = model.get("graph");
  const node = (graph.nodes || []).find((n) => String(n.id) === nodeId);
  if (!node) return;
  const edgesIn = (graph.edges || []).filter((e) => e.target === nodeId);
  try {
    const found = await traceFrom(node, edgesIn);
    const merged = mergeGraphs(graph, found);
    const before = new Set((graph.nodes || []).map((n) => n.id));
    const added = merged.nodes.filter((n) => !before.has(n.id)).map((n) => String(n.id));
    const newEdges = merged.edges.length - (graph.edges || []).length;
    const where = node.name || node.label || node.address || nodeId;
    model.set("added", added);
    model.set("note", `Traced onward from ${where}: ` + (added.length || newEdges
      ? `${added.length} new addresses, ${newEdges} new flows.` : "nothing new."));
    model.set("graph", merged);
  } catch (err) {
    model.set("added", []);
    model.set("error", `Could not trace onward: ${err.message}`);
  }
}

// Confirm / Dismiss from the flags panel: the service records it under the signed-in name and
// answers with the panel's rows after it (as FlagsPanel.decide reloads in a notebook).
async function decideFlag(model, flags, msg, decide) {
  const verb = msg.action === "confirm_flag" ? "Confirming" : "Dismissing";
  try {
    showFlags(model, flags, await decide(String(msg.flag_id), String(msg.action)));
  } catch (err) {
    model.set("error", `${verb} ${msg.flag_id} was not recorded: ${err.message}`); // redrawn: buttons back
  }
}

// Undo takes back the panel's last decision (FlagsPanel.undo in a notebook).
async function undoDecision(model, flags, undo) {
  const last = model.get("last_decision") || {};
  if (!last.audit_id) return;
  try {
    showFlags(model, flags, await undo(String(last.flag_id), String(last.audit_id)));
  } catch (err) {
    model.set("last_decision", {});
    model.set("error", `Undoing the decision on ${last.flag_id} failed: ${err.message}`);
  }
}

function showFlags(model, flags, found) {
  Object.assign(flags, { rows: found.rows, raw: found.raw });
  model.set("error", "");
  model.set("last_decision", found.last_decision || {});
  model.set("raw", found.raw);
  model.set("rows", found.rows);
}

// Draw the flags panel in flagsHost and the graph panel in graphHost; returns their cleanups.
export function showCasePanels({ flagsHost, graphHost, flags, graph, traceFrom, decide = null, undo = null }) {
  let n = 0;
  const flagsModel = pageModel({ kind: "flags", title: flags.title, error: "", rows: flags.rows, raw: flags.raw,
    can_decide: Boolean(decide), last_decision: {}, focus_request: {} },
    (msg) => {
      if (msg.type === "decide" && decide) return decideFlag(flagsModel, flags, msg, decide);
      if (msg.type === "undo" && undo) return undoDecision(flagsModel, flags, undo);
      if (msg.type !== "select") return;
      // a row click brings its addresses into view in the graph (as FlagsPanel.link does in a notebook)
      const row = flags.rows.find((r) => r.row_id === msg.row_id);
      const wanted = (row && row.addresses) || [];
      const ids = (graphModel.get("graph").nodes || []).filter((node) => wanted.some((w) => w === node.id
        || (node.address && w.toLowerCase().endsWith(String(node.address).toLowerCase())))).map((node) => String(node.id));
      graphModel.set("focus_request", { n: ++n, ids, wanted });
    });
  const graphModel = pageModel({ kind: "graph", title: graph.title, error: "", graph: graph.graph, can_trace: true,
    note: "", added: [], focus_request: {} }, (msg) => {
    if (msg.type === "trace") return traceOnward(graphModel, String(msg.node), traceFrom);
    if (msg.type !== "flag") return;
    // a flag clicked in a node's details opens its row
    const row = rowOfFlag(flags.rows, msg.flag_id);
    flagsModel.set("focus_request", { n: ++n, row_id: row ? row.row_id : null, flag_id: msg.flag_id });
  });
  flagsHost.replaceChildren();
  graphHost.replaceChildren();
  return [panels.render({ model: flagsModel, el: flagsHost }), panels.render({ model: graphModel, el: graphHost })];
}
