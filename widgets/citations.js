// The citations line under an answer: "14 citations verified · 1 not found",
// which opens the list, and a mark on each citation of the answer that the
// case does not hold (not found) or nearly holds (close).
//
// Draws the {type: "citations"} chunk (tahrix_lab/flow/vocabulary.py). flow.js
// calls globalThis.txCitations(chunk, turnFlow, insert) when this module is
// loaded; without it the chunk is ignored like any unknown chunk.
// Everything in the chunk quotes the model or the case: text nodes only, no innerHTML.

import { linkChip } from "./cards.js";

const STATUS_TEXT = { verified: "verified", close: "close", not_found: "not found" };
const MATCH_FIELDS = ["chain", "tx_hash", "address", "value", "time", "amount", "symbol", "usd_value", "label",
  "category", "role", "flag_type", "severity", "bridge_name", "tool", "path"];

function citeNode(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function evidenceText(c) {
  const m = c.match;
  if (!m) return c.note || "nothing in the case";
  const id = m.key || m.transfer_id || m.flag_id || m.label_id || m.bridge_event_id || "";
  const bits = [m.table + (id ? " " + id : "")];
  for (const k of MATCH_FIELDS) if (m[k] !== undefined && m[k] !== null) bits.push(`${k} ${m[k]}`);
  return (c.note ? c.note + " — " : "") + bits.join(" · ");
}

// Wrap each occurrence of `needle` in the answer's text nodes in a <mark>.
function markIn(root, needle, status, title) {
  if (!needle) return 0;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const hits = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement && node.parentElement.closest(".tx-cite-mark")) continue;
    if (node.nodeValue.includes(needle)) hits.push(node);
  }
  let count = 0;
  // A hash or address drawn as a chip (cards.js) shows a shortened form: mark the whole chip.
  for (const chipEl of root.querySelectorAll(".tx-chip")) {
    if (chipEl.dataset.value !== needle || chipEl.parentElement.closest(".tx-cite-mark")) continue;
    const mark = citeNode("mark", "tx-cite-mark");
    mark.dataset.status = status;
    mark.dataset.text = needle;
    mark.title = title;
    chipEl.parentNode.replaceChild(mark, chipEl);
    mark.appendChild(chipEl);
    count++;
  }
  for (let node of hits) {
    let at = node.nodeValue.indexOf(needle);
    while (at >= 0) {
      const rest = node.splitText(at);
      node = rest.splitText(needle.length);
      const mark = citeNode("mark", "tx-cite-mark");
      mark.dataset.status = status;
      mark.dataset.text = needle;
      mark.title = title;
      rest.parentNode.replaceChild(mark, rest);
      mark.appendChild(rest);
      count++;
      at = node.nodeValue.indexOf(needle);
    }
  }
  return count;
}

export function drawCitations(chunk, turnFlow, insert) {
  const list = Array.isArray(chunk.citations) ? chunk.citations : [];
  const counts = chunk.counts || {};
  const el = citeNode("div", "tx-block tx-citations");
  el.dataset.status = counts.not_found ? "not_found" : counts.close ? "close" : "verified";
  const details = el.appendChild(citeNode("details"));
  details.appendChild(citeNode("summary", "tx-citations-line", chunk.line || `${list.length} citations`));
  const ul = details.appendChild(citeNode("ul", "tx-citations-list"));
  // Problems first: they are what the analyst must look at.
  const order = { not_found: 0, close: 1, verified: 2 };
  const sorted = [...list].sort((a, b) => (order[a.status] ?? 3) - (order[b.status] ?? 3));
  for (const c of sorted) {
    const li = ul.appendChild(citeNode("li", "tx-citation"));
    li.dataset.status = c.status;
    li.appendChild(citeNode("span", "tx-cite-status", STATUS_TEXT[c.status] || c.status));
    li.appendChild(citeNode("code", "tx-cite-text", c.text));
    li.appendChild(citeNode("span", "tx-cite-evidence", evidenceText(c)));
  }
  (insert || ((n) => turnFlow.appendChild(n)))(el);
  // A bare hash (Bitcoin, Tron: the text does not say which) links to the explorer of the chain
  // the case holds it on. An EVM chip keeps its Blockscan link: one address may be on several chains.
  for (const c of list) {
    const chain = c.status === "verified" && c.match ? c.match.chain : null;
    if (!chain) continue;
    for (const chipEl of turnFlow.querySelectorAll(".tx-content .tx-chip:not([data-chain])")) {
      if (chipEl.dataset.value !== c.text || chipEl.querySelector(".tx-chip-link")) continue;
      linkChip(chipEl, String(chain));
    }
  }
  // Mark the answer itself: every content block of this turn.
  for (const c of list) {
    if (c.status === "verified") continue;
    const title = c.status === "close" ? `close: ${c.note || "nearly matches the case"}` : "not found in the case";
    for (const block of turnFlow.querySelectorAll(".tx-content")) markIn(block, c.text, c.status, title);
  }
  return el;
}

globalThis.txCitations = drawCitations;
