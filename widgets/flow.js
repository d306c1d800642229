// Tahrix flow renderer: draws the chunks of tahrix_lab/flow.py into a
// container, in arrival order. Transport-agnostic: the notebook widget
// (chat.js) and the job service's page both drive it through the same API.
//
// Everything from the model or a tool is untrusted. This module never assigns
// innerHTML/outerHTML and never sets an attribute from untrusted text except
// href (protocol-checked) and title; all text goes in through text nodes.

import { approvalCard, chip, chipText, idKind, resultTables } from "./cards.js";

const SAFE_PROTOCOLS = ["http:", "https:", "mailto:"];
const RESULT_PREVIEW_CHARS = 20000;
const BUCKET_LABELS = {
  per_minute_tokens: "tokens this minute",
  per_hour_tokens: "tokens this hour",
  monthly_usd: "your 30-day spend",
  global_monthly_usd: "team 30-day spend",
};

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// ---------------------------------------------------------------------------
// A small safe Markdown renderer: builds DOM nodes, never parses HTML.
// Blocks: headings, paragraphs, fenced code, lists, block quotes, rules,
// pipe tables. Inline: code, bold, italic, strike, links, autolinks.

export function safeHref(url) {
  const text = String(url || "").trim();
  // Control characters and whitespace inside a scheme are how filters get fooled.
  if (/[\u0000-\u001f\u007f]/.test(text)) return null;
  try {
    const parsed = new URL(text, "https://invalid.example/");
    if (!SAFE_PROTOCOLS.includes(parsed.protocol)) return null;
    if (parsed.origin === "https://invalid.example") return null; // relative: no base to trust
    return parsed.href;
  } catch {
    return null;
  }
}

function link(text, href) {
  const safe = safeHref(href);
  if (!safe) return document.createTextNode(text);
  const a = h("a", null, text);
  a.href = safe;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  return a;
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+?)\*\*|__([^_]+?)__|~~([^~]+?)~~|\*([^*\s][^*]*?)\*|(?<![\w])_([^_\s][^_]*?)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)(?:\s+"[^"]*")?\)|<(https?:\/\/[^>\s]+)>|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

export function renderInline(text, parent) {
  let last = 0;
  // matchAll works on a copy of the regex, so the recursion below is safe.
  // Hashes and addresses in running text (or alone in a code span) become chips.
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) chipText(text.slice(last, m.index), parent);
    if (m[1] !== undefined) parent.appendChild(idKind(m[2].trim()) ? chip(m[2].trim()) : h("code", null, m[2]));
    else if (m[3] !== undefined) renderInline(m[3], parent.appendChild(h("strong")));
    else if (m[4] !== undefined) renderInline(m[4], parent.appendChild(h("strong")));
    else if (m[5] !== undefined) renderInline(m[5], parent.appendChild(h("del")));
    else if (m[6] !== undefined) renderInline(m[6], parent.appendChild(h("em")));
    else if (m[7] !== undefined) renderInline(m[7], parent.appendChild(h("em")));
    else if (m[8] !== undefined) parent.appendChild(link(m[8], m[9]));
    else if (m[10] !== undefined) parent.appendChild(link(m[10], m[10]));
    else if (m[11] !== undefined) parent.appendChild(link(m[11], m[11]));
    last = m.index + m[0].length;
  }
  if (last < text.length) chipText(text.slice(last), parent);
  return parent;
}

const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+#.-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|")) row = row.slice(0, -1);
  return row.split("|").map((c) => c.trim());
}

export function renderMarkdown(text, parent) {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const pre = h("pre", "tx-code");
      const code = h("code", null, body.join("\n"));
      if (fence[2]) code.dataset.lang = fence[2];
      pre.appendChild(code);
      parent.appendChild(pre);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      renderInline(heading[2], parent.appendChild(h("h" + Math.min(heading[1].length + 2, 6))));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      parent.appendChild(h("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(QUOTE.exec(lines[i++])[1]);
      renderMarkdown(body.join("\n"), parent.appendChild(h("blockquote")));
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) {
      const table = h("table", "tx-table");
      const head = table.appendChild(h("thead")).appendChild(h("tr"));
      for (const cell of splitRow(line)) renderInline(cell, head.appendChild(h("th")));
      const body = table.appendChild(h("tbody"));
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim() !== "") {
        const tr = body.appendChild(h("tr"));
        for (const cell of splitRow(lines[i++])) renderInline(cell, tr.appendChild(h("td")));
      }
      parent.appendChild(h("div", "tx-table-wrap")).appendChild(table);
      continue;
    }
    const bullet = BULLET.exec(line);
    if (bullet) {
      const ordered = /\d/.test(bullet[2]);
      const list = h(ordered ? "ol" : "ul");
      if (ordered) {
        const start = parseInt(bullet[2], 10);
        if (start !== 1) list.start = start;
      }
      const indent = bullet[1].length;
      let item = null;
      while (i < lines.length && lines[i].trim() !== "") {
        const b = BULLET.exec(lines[i]);
        if (b && b[1].length <= indent + 1) {
          item = list.appendChild(h("li"));
          renderInline(b[3], item);
        } else if (item) {
          // A continuation or a nested item: keep it readable as a line break.
          item.appendChild(h("br"));
          renderInline(lines[i].trim(), item);
        }
        i++;
      }
      parent.appendChild(list);
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      lines[i].trim() !== "" &&
      !FENCE.test(lines[i]) &&
      !HEADING.test(lines[i]) &&
      !QUOTE.test(lines[i]) &&
      !(para.length && BULLET.test(lines[i]))
    ) {
      para.push(lines[i++]);
    }
    const p = parent.appendChild(h("p"));
    para.forEach((l, k) => {
      if (k) p.appendChild(h("br"));
      renderInline(l, p);
    });
  }
  return parent;
}

// ---------------------------------------------------------------------------
// Streaming content: finished Markdown blocks are rendered once; the
// unfinished tail is a text node that grows with appendData and is re-rendered
// as Markdown at most once per animation frame. Per-token cost stays flat.

function tailParent(root) {
  let el = root.lastElementChild;
  if (!el) return root;
  if (el.tagName === "UL" || el.tagName === "OL") el = el.lastElementChild || el;
  else if (el.tagName === "PRE") el = el.firstElementChild || el;
  else if (!/^(P|H\d|LI)$/.test(el.tagName)) return root;
  return el;
}

class ContentBlock {
  constructor(el) {
    this.el = el;
    this.done = el.appendChild(h("div", "tx-md"));
    this.live = el.appendChild(h("div", "tx-md tx-live"));
    this.tail = this.live.appendChild(document.createTextNode(""));
    this.pending = "";
    this.scan = 0; // where the next newline search starts
    this.lineStart = 0;
    this.fence = null;
    this.frame = 0;
  }

  append(text) {
    this.pending += text;
    this.tail.appendData(text);
    let nl;
    while ((nl = this.pending.indexOf("\n", this.scan)) !== -1) {
      const line = this.pending.slice(this.lineStart, nl);
      const fence = FENCE.exec(line);
      let boundary = false;
      if (this.fence) {
        if (line.trim().startsWith(this.fence)) {
          this.fence = null;
          boundary = true;
        }
      } else if (fence) {
        this.fence = fence[1];
      } else if (line.trim() === "" && this.lineStart > 0) {
        boundary = true;
      }
      this.scan = this.lineStart = nl + 1;
      if (boundary) this.commit(nl + 1);
    }
    this.scan = this.pending.length;
    this.schedule();
  }

  commit(upTo) {
    renderMarkdown(this.pending.slice(0, upTo), this.done);
    this.pending = this.pending.slice(upTo);
    this.scan -= upTo;
    this.lineStart -= upTo;
    this.resetLive();
  }

  resetLive() {
    this.live.replaceChildren();
    this.tail = this.live.appendChild(document.createTextNode(""));
  }

  schedule() {
    if (this.frame || typeof requestAnimationFrame !== "function") return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.live.replaceChildren();
      renderMarkdown(this.pending, this.live);
      // Tokens until the next frame continue the last paragraph, list item or code block.
      this.tail = tailParent(this.live).appendChild(document.createTextNode(""));
    });
  }

  finish() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (this.pending) renderMarkdown(this.pending, this.done);
    this.pending = "";
    this.live.remove();
    this.el.classList.add("tx-finished");
  }
}

function pretty(value) {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function formatCost(cost) {
  if (cost === null || cost === undefined) return "cost unknown";
  return "$" + Number(cost).toFixed(cost < 0.01 ? 4 : 3);
}

function formatMs(ms) {
  if (ms === null || ms === undefined) return null;
  return ms >= 1000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms) + " ms";
}

// ---------------------------------------------------------------------------
// Tool calls at a glance: the call as it reads in code, key arguments inline
// and shortened, then one line for the result.

const HEX = /^0x[0-9a-fA-F]{16,}$/;

export function shorten(value) {
  if (value === null || value === undefined) return String(value);
  if (typeof value === "string") {
    if (HEX.test(value)) return value.slice(0, 6) + "…" + value.slice(-4);
    if (/^T[1-9A-HJ-NP-Za-km-z]{30,}$/.test(value) || /^(bc1|[13])[0-9a-zA-Z]{25,}$/.test(value)) {
      return value.slice(0, 5) + "…" + value.slice(-4);
    }
    return value.length > 24 ? JSON.stringify(value.slice(0, 21) + "…") : JSON.stringify(value);
  }
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return value.length === 1 ? "[" + shorten(value[0]) + "]" : `[${value.length} items]`;
  return "{…}";
}

export function inlineArgs(args, max = 4) {
  if (args === null || args === undefined) return "";
  if (typeof args !== "object" || Array.isArray(args)) return shorten(args);
  const entries = Object.entries(args);
  const bits = entries.slice(0, max).map(([k, v]) => `${k}=${shorten(v)}`);
  if (entries.length > max) bits.push("…");
  return bits.join(", ");
}

// The tool's own one-line headline (case tools write one from the whole result);
// for a tool that writes none (MCP tools), a neutral count, never a guess.
export function summarize(result) {
  if (result === null || result === undefined) return "";
  if (typeof result !== "object") return shorten(result);
  if (typeof result.headline === "string") return result.headline;
  if (typeof result.summary === "string") return result.summary;
  const n = Object.keys(result).filter((k) => !k.startsWith("_")).length;
  return n ? `${n} field${n === 1 ? "" : "s"}` : "no result";
}

// The sentence for the analyst (flow/vocabulary.py writes it); the model's own text stays in the result.
function errorText(error, result, note) {
  if (note) return String(note);
  if (error && typeof error === "object" && error.message) return String(error.message);
  if (typeof error === "string") return error;
  return result && result.message ? String(result.message) : "The tool failed.";
}

// ---------------------------------------------------------------------------

export function createFlow(container, options = {}) {
  const opts = { followUpMode: "keep", showInput: false, ...options };
  const root = h("div", "tx-flow-root");
  const meter = root.appendChild(h("div", "tx-meter"));
  meter.hidden = true;
  const log = root.appendChild(h("div", "tx-log"));
  container.appendChild(root);

  let turn = null; // the current assistant turn's state
  const tools = new Map(); // tool call id -> block state (ids are per session)

  let input = null;
  if (opts.showInput) input = buildInput();

  function buildInput() {
    const form = root.appendChild(h("form", "tx-input"));
    const box = form.appendChild(h("textarea", "tx-text"));
    box.rows = 2;
    box.placeholder = "Ask the assistant…";
    box.setAttribute("aria-label", "Message to the assistant");
    const send = form.appendChild(h("button", "tx-send", "Send"));
    send.type = "submit";
    const stop = form.appendChild(h("button", "tx-stop", "Stop"));
    stop.type = "button";
    stop.hidden = true;
    const submit = () => {
      const text = box.value.trim();
      if (!text || send.disabled) return;
      box.value = "";
      if (opts.onSend) opts.onSend(text);
    };
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      submit();
    });
    box.addEventListener("keydown", (ev) => {
      // Enter sends, Shift+Enter adds a line; keep keys away from the notebook.
      ev.stopPropagation();
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        submit();
      }
    });
    stop.addEventListener("click", () => opts.onStop && opts.onStop());
    return { form, box, send, stop };
  }

  function setBusy(busy) {
    if (!input) return;
    input.send.disabled = !!busy;
    input.stop.hidden = !busy;
    root.classList.toggle("tx-busy", !!busy);
  }

  function newTurn(userText) {
    finishTurn(null);
    if (userText) {
      const user = log.appendChild(h("div", "tx-user"));
      user.appendChild(h("div", "tx-bubble", userText));
    }
    const flow = log.appendChild(h("div", "tx-flow"));
    const dots = flow.appendChild(h("div", "tx-dots"));
    dots.setAttribute("aria-label", "working");
    for (let k = 0; k < 3; k++) dots.appendChild(h("span"));
    turn = { flow, dots, current: null, synth: null, ended: false, status: null };
    return turn;
  }

  function ensureTurn() {
    return turn && !turn.ended ? turn : newTurn(null);
  }

  function insert(node) {
    const t = ensureTurn();
    t.flow.insertBefore(node, t.dots);
    return node;
  }

  // Close the block being extended (collapse reasoning, render content tail).
  function closeCurrent(t) {
    const cur = t.current;
    if (!cur) return;
    if (cur.kind === "reasoning") {
      cur.details.open = false;
      cur.el.classList.add("tx-finished");
    } else if (cur.kind === "content") {
      cur.block.finish();
    }
    t.current = null;
  }

  function clearSynth(t) {
    if (t.synth) {
      t.synth.remove();
      t.synth = null;
    }
  }

  function reasoning(chunk) {
    const t = ensureTurn();
    clearSynth(t);
    if (!(t.current && t.current.kind === "reasoning")) {
      closeCurrent(t);
      const el = insert(h("div", "tx-block tx-reasoning"));
      const details = el.appendChild(h("details"));
      details.open = true;
      const summary = details.appendChild(h("summary", null, chunk.redacted ? "Reasoning (redacted)" : "Reasoning"));
      summary.title = "Show or hide the model's reasoning";
      const body = details.appendChild(h("div", "tx-reasoning-text"));
      t.current = { kind: "reasoning", el, details, text: body.appendChild(document.createTextNode("")) };
    }
    if (chunk.text) t.current.text.appendData(chunk.text);
    else if (chunk.redacted && !t.current.text.data) t.current.text.appendData("The provider redacted this reasoning.");
  }

  function content(chunk) {
    const t = ensureTurn();
    clearSynth(t);
    if (!(t.current && t.current.kind === "content")) {
      closeCurrent(t);
      const el = insert(h("div", "tx-block tx-content"));
      t.current = { kind: "content", el, block: new ContentBlock(el) };
    }
    if (chunk.text) t.current.block.append(chunk.text);
  }

  function toolBlock(id, name, args) {
    const el = insert(h("div", "tx-block tx-tool"));
    el.dataset.status = "queued";
    const head = el.appendChild(h("div", "tx-tool-head"));
    head.appendChild(h("span", "tx-tool-icon", "⚙"));
    const call = head.appendChild(h("span", "tx-tool-call"));
    call.appendChild(h("span", "tx-tool-name", name || "tool"));
    const argLine = call.appendChild(h("span", "tx-tool-argline", "(" + inlineArgs(args) + ")"));
    argLine.title = pretty(args);
    const status = head.appendChild(h("span", "tx-tool-status", "queued"));
    const duration = head.appendChild(h("span", "tx-tool-duration"));
    const summary = el.appendChild(h("div", "tx-tool-summary"));
    summary.hidden = true;
    const details = el.appendChild(h("details", "tx-tool-args"));
    details.appendChild(h("summary", null, "Arguments"));
    const argsPre = details.appendChild(h("pre", null, pretty(args)));
    const result = el.appendChild(h("details", "tx-tool-result"));
    result.hidden = true;
    result.appendChild(h("summary", null, "Result"));
    const tables = result.appendChild(h("div", "tx-tool-tables"));
    const json = result.appendChild(h("details", "tx-tool-json"));
    json.appendChild(h("summary", null, "JSON"));
    const resultPre = json.appendChild(h("pre"));
    const state = { el, status, duration, summary, errorLine: null, argLine, args: details, argsPre, result, tables, json, resultPre };
    if (id !== undefined && id !== null) {
      el.dataset.id = String(id);
      tools.set(String(id), state);
    }
    return state;
  }

  function setToolStatus(state, status, label) {
    state.el.dataset.status = status;
    state.status.textContent = label || status;
  }

  function findTool(chunk) {
    const state = chunk.id !== undefined && chunk.id !== null ? tools.get(String(chunk.id)) : undefined;
    return state || toolBlock(chunk.id, chunk.name, undefined);
  }

  function toolCall(chunk) {
    const t = ensureTurn();
    clearSynth(t);
    closeCurrent(t);
    const args = chunk.args === null || chunk.args === undefined ? chunk.raw : chunk.args;
    toolBlock(chunk.id, chunk.name, args);
  }

  function toolStart(chunk) {
    const t = ensureTurn();
    closeCurrent(t);
    setToolStatus(findTool(chunk), "running");
  }

  function toolResult(chunk) {
    const t = ensureTurn();
    closeCurrent(t);
    const state = findTool(chunk);
    const error = chunk.result && typeof chunk.result === "object" ? chunk.result.error : undefined;
    if (chunk.status !== "error") setToolStatus(state, "done");
    else if (error && error.type === "cancelled") setToolStatus(state, "stopped");
    else setToolStatus(state, "error");
    const ms = formatMs(chunk.duration_ms);
    if (ms) state.duration.textContent = ms;
    if (chunk.status === "error") {
      // The analyst's sentence reads under the header, as plain text, not inside collapsed JSON.
      if (!state.errorLine) {
        // One line under the header, whatever its length; a click shows it whole.
        const line = (state.errorLine = h("div", "tx-tool-error"));
        line.title = "Click to show the whole message";
        line.addEventListener("click", () => line.classList.toggle("tx-open"));
        state.summary.insertAdjacentElement("afterend", line);
      }
      state.errorLine.textContent = errorText(error, chunk.result, chunk.analyst_message);
    } else {
      const line = summarize(chunk.result);
      state.summary.textContent = line;
      state.summary.hidden = !line;
    }
    let text = pretty(chunk.result);
    if (text.length > RESULT_PREVIEW_CHARS) {
      text = text.slice(0, RESULT_PREVIEW_CHARS) + `\n… (${text.length - RESULT_PREVIEW_CHARS} more characters)`;
    }
    state.resultPre.textContent = text;
    const tables = chunk.status === "error" ? [] : resultTables(chunk.result);
    state.tables.replaceChildren(...tables);
    state.json.open = tables.length === 0; // nothing tabular: the JSON is the result
    state.result.hidden = false;
    state.result.open = false;
  }

  // A call that waits for the analyst (cards.js draws Approve / Deny), then their decision.
  function approval(chunk) {
    closeCurrent(ensureTurn());
    const state = findTool(chunk);
    if (!state.approval) state.approval = state.el.insertBefore(h("div", "tx-approval"), state.args);
    const pending = chunk.state !== "approved" && chunk.state !== "denied";
    if (pending) setToolStatus(state, "pending", "awaiting approval");
    else setToolStatus(state, chunk.state === "approved" ? "running" : "error", chunk.state);
    state.refuse = approvalCard(state.approval, chunk, opts.onDecide);
  }

  function followUp(chunk) {
    const t = ensureTurn();
    closeCurrent(t);
    if (opts.followUpMode === "replace") {
      // The synthesis will say it again: drop this turn's pre-tool prose.
      for (const node of [...t.flow.querySelectorAll(":scope > .tx-reasoning, :scope > .tx-content")]) {
        node.remove();
      }
    }
    clearSynth(t);
    // The stylesheet animates the ellipsis, so trailing dots in the text go.
    const label = String(chunk.text || "Synthesizing results").replace(/[.…\s]+$/, "");
    t.synth = insert(h("div", "tx-block tx-synth", label));
  }

  function effects(chunk) {
    const t = ensureTurn();
    closeCurrent(t);
    const list = Array.isArray(chunk.effects) ? chunk.effects : [];
    const el = insert(h("div", "tx-block tx-effects"));
    el.appendChild(h("span", "tx-effects-icon", "✎"));
    const names = list.map((e) => {
      const bits = [e && e.type ? String(e.type).replace(/_/g, " ") : "change"];
      for (const key of ["case_id", "flag_id", "address"]) if (e && e[key] !== undefined) bits.push(`${key} ${e[key]}`);
      return bits.join(" · ");
    });
    el.appendChild(h("span", null, "Changed: " + (names.join("; ") || "data")));
  }

  function usage(chunk) {
    const t = ensureTurn();
    closeCurrent(t);
    const u = chunk.usage || {};
    const bits = [];
    if (chunk.model) bits.push(chunk.model);
    const inTok = u.input_tokens ?? "?";
    const outTok = u.output_tokens ?? "?";
    bits.push(`in ${inTok} / out ${outTok} tokens`);
    if (u.cache_read_tokens) bits.push(`${u.cache_read_tokens} cached`);
    bits.push(formatCost(chunk.cost_usd));
    // what caching saved: the same tokens uncached, minus the cost as sent (writes can cost more)
    const saved = chunk.uncached_cost_usd != null && chunk.cost_usd != null ? chunk.uncached_cost_usd - chunk.cost_usd : 0;
    if (Math.abs(saved) >= 5e-7) bits.push(saved > 0 ? `saved ${formatCost(saved)}` : `cache write +${formatCost(-saved)}`);
    const ms = formatMs(chunk.latency_ms);
    if (ms) bits.push(ms);
    insert(h("div", "tx-usage", bits.join(" · ")));
  }

  function error(chunk) {
    const t = ensureTurn();
    closeCurrent(t);
    clearSynth(t);
    const el = insert(h("div", "tx-block tx-error"));
    el.setAttribute("role", "alert");
    el.appendChild(h("span", "tx-error-icon", "!"));
    const body = el.appendChild(h("div", "tx-error-body"));
    body.appendChild(h("span", null, chunk.message || "Something went wrong."));
    if (chunk.kind) el.dataset.kind = String(chunk.kind);
    // In a notebook the analyst is the operator: the raw details, on demand.
    if (chunk.details) {
      const more = body.appendChild(h("details", "tx-error-details"));
      more.appendChild(h("summary", null, "details"));
      more.appendChild(h("pre", null, String(chunk.details)));
    }
  }

  // "Queued" / "Loading the case" / "Thinking" before the turn's first chunk (the page's job status).
  function clearStatus(t) {
    if (t && t.statusEl) {
      t.statusEl.remove();
      t.statusEl = null;
    }
  }

  function finishTurn(status) {
    if (!turn || turn.ended) return;
    closeCurrent(turn);
    clearSynth(turn);
    turn.dots.hidden = true;
    clearStatus(turn);
    if (turn.waiting) {
      turn.waiting.remove();
      turn.waiting = null;
      delete turn.flow.dataset.waiting;
    }
    turn.ended = true;
    turn.status = status;
    turn.flow.dataset.status = status || "done";
    for (const d of turn.flow.querySelectorAll(".tx-reasoning details")) d.open = false;
    for (const state of tools.values()) {
      const st = state.el.dataset.status;
      if ((st === "running" || st === "queued") && turn.flow.contains(state.el)) {
        if (status === "cancelled") setToolStatus(state, "stopped");
        else setToolStatus(state, "error", "not run");
      }
    }
    if (status === "cancelled") turn.flow.appendChild(h("div", "tx-stopped", "Stopped."));
    if (status === "timeout") turn.flow.appendChild(h("div", "tx-block tx-error", "The answer took too long and was stopped."));
  }

  const api = {
    // {waiting: true}: the question is shown before the other end took it.
    startTurn(userText, { waiting = false } = {}) {
      const t = newTurn(userText);
      if (waiting) {
        t.waiting = t.flow.insertBefore(h("div", "tx-waiting", "Waiting for the kernel…"), t.dots);
        t.flow.dataset.waiting = "true";
      }
      setBusy(true);
    },

    // A line saying what the answer waits for, until its first chunk; null clears it.
    setStatus(text) {
      if (!turn || turn.ended || turn.started) return;
      if (!text) return clearStatus(turn);
      if (!turn.statusEl) turn.statusEl = turn.flow.insertBefore(h("div", "tx-status"), turn.dots);
      turn.statusEl.textContent = String(text);
      turn.statusEl.dataset.status = String(text).toLowerCase().split(/[^a-z]/)[0];
    },

    setWaiting(waiting) {
      if (!turn || waiting || !turn.waiting) return;
      turn.waiting.remove();
      turn.waiting = null;
      delete turn.flow.dataset.waiting;
    },

    push(chunk) {
      if (!chunk || typeof chunk !== "object") return;
      if (turn && chunk.type !== "user") {
        turn.started = true; // the answer speaks for itself from now on
        clearStatus(turn);
      }
      switch (chunk.type) {
        case "user":
          api.startTurn(chunk.text || "");
          break;
        case "reasoning":
          reasoning(chunk);
          break;
        case "content":
          content(chunk);
          break;
        case "tool_call":
          toolCall(chunk);
          break;
        case "tool_start":
          toolStart(chunk);
          break;
        case "tool_result":
          toolResult(chunk);
          break;
        case "approval":
          approval(chunk);
          break;
        case "follow_up":
          followUp(chunk);
          break;
        case "effects":
          effects(chunk);
          break;
        case "usage":
          usage(chunk);
          break;
        case "citations": // drawn by widgets/citations.js when loaded (globalThis.txCitations)
          closeCurrent(ensureTurn());
          if (globalThis.txCitations) globalThis.txCitations(chunk, ensureTurn().flow, insert);
          break;
        case "error":
          error(chunk);
          api.end("error");
          break;
        case "done":
          if (chunk.stop_reason === "awaiting_approval") api.end("awaiting");
          else api.end(chunk.stop_reason === "cancelled" ? "cancelled" : "done");
          break;
        default:
          break; // unknown chunk types are ignored, so old pages survive new servers
      }
    },

    end(status = "done") {
      finishTurn(status);
      setBusy(false);
    },

    // A stored history is complete unless told otherwise ({live: true} when a
    // page reloads in the middle of a run that is still streaming).
    load(chunks, { live = false } = {}) {
      for (const chunk of chunks || []) api.push(chunk);
      if (!live) api.end("done");
    },

    // Every bucket of the budget is shown; above 80 % it turns amber, at 100 % red.
    setMeter(fillByBucket) {
      const buckets = Object.entries(fillByBucket || {}).filter(([, v]) => typeof v === "number");
      meter.replaceChildren();
      meter.hidden = buckets.length === 0;
      for (const [bucket, value] of buckets) {
        const item = meter.appendChild(h("div", "tx-meter-item"));
        item.dataset.bucket = bucket;
        item.appendChild(h("span", "tx-meter-label", BUCKET_LABELS[bucket] || bucket));
        const bar = item.appendChild(h("span", "tx-meter-bar"));
        const fill = bar.appendChild(h("span", "tx-meter-fill"));
        const pct = Math.min(100, Math.round(value * 100));
        fill.style.width = pct + "%";
        item.appendChild(h("span", "tx-meter-pct", pct + "%"));
        if (value > 0.8) item.classList.add("tx-high");
        if (value >= 1) item.classList.add("tx-full");
      }
    },

    setBusy,

    // The other end would not take a decision (it was decided already, a run is going): say so, buttons back.
    refuseDecision(id, message) {
      const state = tools.get(String(id));
      if (state && state.refuse) state.refuse(message || "The decision was not taken.");
    },

    setFollowUpMode(mode) {
      opts.followUpMode = mode === "replace" ? "replace" : "keep";
    },

    clear() {
      log.replaceChildren();
      tools.clear();
      turn = null;
      setBusy(false);
    },

    get element() {
      return root;
    },
  };
  return api;
}
