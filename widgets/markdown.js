// Tahrix flow renderer, Markdown: a small safe renderer that builds DOM nodes and never parses
// HTML, and the streaming block the answer grows in. Imported by flow.js; the notebook bundle
// joins them (tahrix_lab.flow.resources.widget_bundle).
//
// Untrusted text only ever goes in through text nodes; a link's href is protocol-checked.

import { chip, chipText, idKind } from "./cards.js";

const SAFE_PROTOCOLS = ["http:", "https:", "mailto:"];

export function h(tag, cls, text) {
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

export class ContentBlock {
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
