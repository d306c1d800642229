// Case panels for notebooks (tahrix_lab/lab/panels.py, graph_panel.py) and the service page
// (page_panels.js): the flags panel (flags.js) and the fund-flow graph (graph.js, graph_model.js),
// on helpers of panel_kit.js. In a notebook the files are joined into one module
// (tahrix_lab.flow.resources.widget_bundle).
// Case data is untrusted (labels, token names): text goes in through text
// nodes only, never innerHTML.

import { h } from "./panel_kit.js";
import { renderFlagsPanel } from "./flags.js";
import { renderGraphPanel } from "./graph.js";

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
      ["change:last_decision", panel.draw],
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
