// Tahrix flow renderer, tool cards: hashes and addresses as chips (shortened,
// copy on click, a link to the chain's explorer) and tool results as tables.
// Also each tool call's one-line summary. Imported by flow.js and markdown.js; the notebook
// bundle joins them (tahrix_lab.flow.resources.widget_bundle).
//
// Untrusted text only ever goes in through text nodes; an explorer link is
// built from a fixed base and a value that matched a strict hex/base58 pattern.

const EXPLORERS = {
  ethereum: "https://etherscan.io",
  bsc: "https://bscscan.com",
  polygon: "https://polygonscan.com",
  arbitrum: "https://arbiscan.io",
  optimism: "https://optimistic.etherscan.io",
  base: "https://basescan.org",
  avalanche_c: "https://snowtrace.io",
  tron: { base: "https://tronscan.org/#", tx: "/transaction/", address: "/address/" },
  bitcoin: { base: "https://mempool.space", tx: "/tx/", address: "/address/" },
};
// Blockscan searches every EVM explorer: the link for a hash whose chain the text does not say.
const ANY_EVM = "https://blockscan.com";

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const EVM_HASH = /^0x[0-9a-fA-F]{64}$/;
const BARE_HASH = /^[0-9a-fA-F]{64}$/;
const TRON_ADDRESS = /^T[1-9A-HJ-NP-Za-km-z]{33}$/;
const BTC_ADDRESS = /^(bc1[02-9ac-hj-np-z]{11,87}|[13][1-9A-HJ-NP-Za-km-z]{25,34})$/;
const FLAG_ID = /^FLG-[0-9a-f]{10}$/;
// Where chips are found in running text (the answer): whole tokens only. A bare 64-hex hash
// (Bitcoin, Tron) gets its explorer link once the citations line says which chain holds it.
export const CHIP_IN_TEXT = /(?<![0-9A-Za-z])(FLG-[0-9a-f]{10}|0x[0-9a-fA-F]{64}|0x[0-9a-fA-F]{40}|T[1-9A-HJ-NP-Za-km-z]{33}|bc1[02-9ac-hj-np-z]{25,87}|[0-9a-fA-F]{64})(?![0-9A-Za-z])/g;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

/** "address" | "tx" | "flag" | null, and the chain the value itself implies (null for EVM). */
export function idKind(value) {
  const v = String(value || "");
  if (FLAG_ID.test(v)) return { kind: "flag", chain: null };
  if (EVM_ADDRESS.test(v)) return { kind: "address", chain: null };
  if (EVM_HASH.test(v)) return { kind: "tx", chain: null };
  if (TRON_ADDRESS.test(v)) return { kind: "address", chain: "tron" };
  if (BTC_ADDRESS.test(v)) return { kind: "address", chain: "bitcoin" };
  if (BARE_HASH.test(v)) return { kind: "tx", chain: null }; // bitcoin or tron: the chain must say
  return null;
}

export function explorerUrl(value, kind, chain) {
  if (kind !== "tx" && kind !== "address") return null; // a flag id is the case's, not a chain's
  const ex = EXPLORERS[chain];
  if (ex) {
    const base = typeof ex === "string" ? ex : ex.base;
    const path = typeof ex === "string" ? (kind === "tx" ? "/tx/" : "/address/") : ex[kind];
    return base + path + encodeURIComponent(value);
  }
  if (/^0x/.test(value)) return ANY_EVM + (kind === "tx" ? "/tx/" : "/address/") + encodeURIComponent(value);
  return null;
}

export function shortId(value) {
  const v = String(value);
  if (v.length <= 16) return v;
  return v.startsWith("0x") ? v.slice(0, 6) + "…" + v.slice(-4) : v.slice(0, 5) + "…" + v.slice(-4);
}

function copy(text, node) {
  const done = () => {
    node.classList.add("tx-copied");
    setTimeout(() => node.classList.remove("tx-copied"), 1200);
  };
  const fallback = () => {
    const area = document.body.appendChild(el("textarea"));
    area.value = text;
    area.style.cssText = "position:fixed;opacity:0;left:-9999px";
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    area.remove();
    if (ok) done();
  };
  if (navigator.clipboard && globalThis.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
  else fallback();
}

/** A chip for a hash, an address or a flag id; plain text when the value is none of them. */
export function chip(value, chain) {
  const id = idKind(value);
  if (!id) return document.createTextNode(String(value));
  const flag = id.kind === "flag";
  const wrap = el("span", flag ? "tx-chip tx-flag-chip" : "tx-chip");
  wrap.dataset.value = String(value);
  wrap.dataset.kind = id.kind;
  const text = wrap.appendChild(el("button", "tx-chip-text", shortId(value)));
  text.type = "button";
  text.title = flag ? "Show this flag in the flags panel" : `${value}\nClick to copy`;
  text.addEventListener("click", (ev) => {
    ev.preventDefault();
    ev.stopPropagation();
    if (flag) showFlag(String(value), wrap);
    else copy(String(value), wrap);
  });
  return linkChip(wrap, chain || id.chain); // a flag id gets no link (explorerUrl)
}

// A flag id opens in the flags panel that holds it (flags.js listens for "tahrix:flag" on the
// document, in a notebook as on the service page); none open: the chip says so.
function showFlag(flagId, wrap) {
  const ask = new CustomEvent("tahrix:flag", { bubbles: true, cancelable: true, detail: { flag_id: flagId } });
  if (!wrap.dispatchEvent(ask)) return; // a panel claimed it
  wrap.firstChild.title = "No flags panel of this case is open here";
  wrap.classList.add("tx-missing");
  setTimeout(() => wrap.classList.remove("tx-missing"), 1200);
}

/** The chip's chain and its explorer link for it (null: Blockscan for an EVM value, else none). */
export function linkChip(wrap, chain) {
  if (chain) wrap.dataset.chain = chain;
  const url = explorerUrl(wrap.dataset.value, wrap.dataset.kind, chain);
  if (url) {
    const a = wrap.appendChild(el("a", "tx-chip-link", "↗"));
    a.href = url;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    a.title = "Open in the explorer";
  }
  return wrap;
}

/** Text with every hash and address in it as a chip. */
export function chipText(text, parent, chain) {
  let last = 0;
  for (const m of String(text).matchAll(CHIP_IN_TEXT)) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    parent.appendChild(chip(m[1], chain));
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  return parent;
}

export function formatUsd(usd) {
  const n = Number(usd);
  if (!isFinite(n)) return null;
  const abs = Math.abs(n);
  if (abs >= 1e9) return "$" + (n / 1e9).toFixed(1) + "B";
  if (abs >= 1e6) return "$" + (n / 1e6).toFixed(1) + "M";
  if (abs >= 1e3) return "$" + (n / 1e3).toFixed(1) + "k";
  return "$" + n.toFixed(n >= 100 ? 0 : 2);
}

// ---------------------------------------------------------------------------
// Results as tables: every list of row objects (and run_sql's columns + rows).

const MAX_ROWS = 50;
const MAX_COLUMNS = 10;

function cell(td, key, value, chain) {
  if (value === null || value === undefined) {
    td.appendChild(el("span", "tx-null", "—"));
  } else if (typeof value === "number" && /usd/i.test(key)) {
    td.textContent = formatUsd(value);
    td.title = String(value);
    td.classList.add("tx-num");
  } else if (typeof value === "number") {
    td.textContent = value.toLocaleString("en-US", { maximumFractionDigits: 6 });
    td.classList.add("tx-num");
  } else if (typeof value === "string") {
    if (idKind(value)) td.appendChild(chip(value, chain));
    else td.textContent = value.length > 80 ? value.slice(0, 79) + "…" : value;
    if (value.length > 80) td.title = value;
  } else if (Array.isArray(value) && value.every((v) => typeof v === "string" && idKind(v))) {
    value.slice(0, 2).forEach((v) => td.appendChild(chip(v, chain)));
    if (value.length > 2) td.appendChild(el("span", "tx-more", `+${value.length - 2}`));
  } else {
    const text = JSON.stringify(value);
    td.textContent = text.length > 80 ? text.slice(0, 79) + "…" : text;
    td.title = text.length > 2000 ? text.slice(0, 2000) + "…" : text;
  }
}

function table(title, columns, rows, shown) {
  const box = el("div", "tx-rtable");
  // A paged result says how many there are in all: "endpoints (1 of 6 on this page)".
  const count = shown && shown.of > rows.length ? `${rows.length} of ${shown.of} on this page` : String(rows.length);
  box.appendChild(el("div", "tx-rtable-title", `${title.replace(/_/g, " ")} (${count})`));
  const wrap = box.appendChild(el("div", "tx-table-wrap"));
  const t = wrap.appendChild(el("table", "tx-table"));
  const head = t.appendChild(el("thead")).appendChild(el("tr"));
  for (const c of columns) head.appendChild(el("th", null, c.replace(/_/g, " ")));
  const body = t.appendChild(el("tbody"));
  for (const row of rows.slice(0, MAX_ROWS)) {
    const tr = body.appendChild(el("tr"));
    const chain = typeof row.chain === "string" ? row.chain : typeof row.src_chain === "string" ? row.src_chain : null;
    for (const c of columns) cell(tr.appendChild(el("td")), c, row[c], /^dst_/.test(c) ? row.dst_chain || chain : chain);
  }
  if (rows.length > MAX_ROWS) box.appendChild(el("div", "tx-more", `${rows.length - MAX_ROWS} more rows in the JSON below`));
  return box;
}

function columnsOf(rows) {
  const seen = [];
  for (const row of rows.slice(0, 20)) {
    for (const k of Object.keys(row)) if (!seen.includes(k) && !k.startsWith("_")) seen.push(k);
  }
  // A column empty in every row says nothing; lists of hashes follow the first
  // address or hash column; the bulky nested fields go last, so a row reads like a ledger.
  const filled = seen.filter((k) => rows.some((r) => r[k] !== null && r[k] !== undefined));
  const isIds = (k) => rows.some((r) => Array.isArray(r[k]) && r[k].length && r[k].every((v) => typeof v === "string" && idKind(v)));
  const flat = filled.filter((k) => rows.some((r) => r[k] !== null && typeof r[k] !== "object"));
  const ids = filled.filter((k) => !flat.includes(k) && isIds(k));
  const nested = filled.filter((k) => !flat.includes(k) && !ids.includes(k));
  const at = flat.findIndex((k) => rows.some((r) => typeof r[k] === "string" && idKind(r[k]))) + 1;
  return [...flat.slice(0, at), ...ids, ...flat.slice(at), ...nested].slice(0, MAX_COLUMNS);
}

/** Tables for the tabular parts of a result (an empty list when it has none). */
export function resultTables(result) {
  const out = [];
  if (!result || typeof result !== "object" || Array.isArray(result)) return out;
  if (Array.isArray(result.columns) && Array.isArray(result.rows) && result.rows.every(Array.isArray)) {
    const rows = result.rows.map((r) => Object.fromEntries(result.columns.map((c, i) => [c, r[i]])));
    out.push(table("rows", result.columns.slice(0, MAX_COLUMNS), rows, null));
    return out;
  }
  const pages = (result.page && result.page.shown) || {};
  const visit = (obj, prefix) => {
    for (const [key, value] of Object.entries(obj)) {
      if (key.startsWith("_")) continue;
      const name = prefix ? `${prefix} · ${key}` : key;
      if (Array.isArray(value) && value.length && value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
        out.push(table(name, columnsOf(value), value, prefix ? null : pages[key]));
        // one level down: a match's transfers, a row's flags
        if (value.length === 1) visit(value[0], name);
      }
    }
  };
  visit(result, "");
  return out;
}

// The card of a call that waits for the analyst: what it would do, why, its arguments, a reason
// box and Approve / Deny (``onDecide({id, approve, reason})``); once decided, who, when and why.
// Returns the function that gives the buttons back with a sentence (null once decided).
export function approvalCard(box, chunk, onDecide) {
  box.replaceChildren();
  box.dataset.state = String(chunk.state || "pending");
  if (chunk.state === "approved" || chunk.state === "denied") {
    let text = `${chunk.state === "approved" ? "Approved" : "Denied"} by ${chunk.by || "the analyst"}`;
    if (chunk.at) text += ` at ${String(chunk.at).replace("T", " ").slice(0, 19)} UTC`;
    if (chunk.reason) text += `: ${chunk.reason}`;
    box.appendChild(el("div", "tx-approval-decision", text));
    return null;
  }
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "Approve or deny this call");
  box.appendChild(el("div", "tx-approval-title", "Waiting for your approval"));
  box.appendChild(el("div", "tx-approval-summary", chunk.summary || chunk.name || "this call"));
  if (chunk.why) box.appendChild(el("div", "tx-approval-why", chunk.why));
  box.appendChild(el("pre", "tx-approval-args", JSON.stringify(chunk.args ?? null, null, 2)));
  const reason = box.appendChild(el("textarea", "tx-approval-reason"));
  reason.rows = 2;
  reason.placeholder = "Reason (kept in the record; the assistant reads it when you deny)";
  reason.setAttribute("aria-label", "Reason for the decision");
  reason.addEventListener("keydown", (ev) => ev.stopPropagation()); // keys stay out of the notebook
  const row = box.appendChild(el("div", "tx-approval-actions"));
  const yes = row.appendChild(el("button", "tx-approve", "Approve"));
  const no = row.appendChild(el("button", "tx-deny", "Deny"));
  yes.type = no.type = "button";
  const note = box.appendChild(el("div", "tx-approval-note"));
  const enable = (on, text) => {
    yes.disabled = no.disabled = reason.disabled = !on;
    note.textContent = text || "";
  };
  const decide = (approve) => {
    enable(false, approve ? "Approving…" : "Denying…");
    onDecide({ id: chunk.id, approve, reason: reason.value.trim() });
  };
  yes.addEventListener("click", () => decide(true));
  no.addEventListener("click", () => decide(false));
  if (!onDecide) enable(false, "Decide where this conversation runs (the notebook or the page).");
  return (message) => enable(true, message);
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
export function errorText(error, result, note) {
  if (note) return String(note);
  if (error && typeof error === "object" && error.message) return String(error.message);
  if (typeof error === "string") return error;
  return result && result.message ? String(result.message) : "The tool failed.";
}
