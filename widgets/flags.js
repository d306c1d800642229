// The flags panel: the triage (one row per finding, its flags one click away, Confirm and
// Dismiss where the analyst may decide) and the raw table. Text from the case goes in through
// text nodes only, never innerHTML.

import { h, button, compactUsd, plural, shortAddress, day, copyButton } from "./panel_kit.js";

export const SEVERITY = { critical: 5, high: 4, medium: 3, low: 2, info: 1 };

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
    count.textContent = `${shown.length} of ${plural(list.length, "flag")}`;
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

export function flagLine(f, onFlag, onDecide) {
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
    count.textContent = `${shown.length} of ${plural(rows.length, "row")} · ${plural(raw.length, "flag")}`;
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
        `${plural(row.flag_count, "flag")} · ${(row.flag_types || []).join(", ").replace(/_/g, " ")}` +
        ` · ${plural(addresses.length, "address", "addresses")}` + (row.role ? ` · role: ${row.role}` : "")));
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

// -- anywidget glue ----------------------------------------------------------------
// "Dismissed FLG-… · Undo": the panel's last decision, taken back on a click (a dismissed flag
// leaves the triage, so the notice is where the analyst can still reach it).
function drawNotice(notice, last, kind, onUndo) {
  notice.replaceChildren();
  notice.hidden = !(last && last.audit_id);
  if (notice.hidden) return;
  const done = last.action === "confirm_flag" ? "Confirmed" : "Dismissed";
  const what = kind ? ` (${String(kind).replace(/_/g, " ")})` : "";
  notice.appendChild(h("span", null, `${done} ${last.flag_id}${what}.`));
  const undo = notice.appendChild(button("txp-undo", "Undo", `Take back: ${done.toLowerCase()} ${last.flag_id}`));
  undo.addEventListener("click", () => {
    undo.disabled = true;
    onUndo();
  });
}

export function renderFlagsPanel(model, body) {
  const state = { key: "severity", desc: true, filter: "", view: "triage", open: new Set(), selected: null, flag: null };
  const notice = body.parentNode.insertBefore(h("div", "txp-notice"), body);
  const kinds = new Map(); // flag id -> its type, kept when decided: a dismissed flag leaves the rows
  const draw = () => {
    const last = model.get("last_decision") || {};
    drawNotice(notice, last, kinds.get(last.flag_id), () => model.send({ type: "undo" }));
    const rows = model.get("rows") || [];
    const raw = model.get("raw") || [];
    if (!rows.length) renderFlags(body, raw, state);
    else renderTriage(body, rows, raw, state, {
      onSelect: (row_id) => model.send({ type: "select", row_id }),
      onDecide: model.get("can_decide") ? (flag_id, action) => {
        const flag = raw.find((f) => f.flag_id === flag_id);
        if (flag) kinds.set(flag_id, flag.flag_type);
        model.send({ type: "decide", flag_id, action });
      } : null,
    });
  };
  const show = (row_id, flag_id) => {
    if (row_id) {
      state.view = "triage";
      state.filter = "";
      state.open.add(row_id);
      state.selected = row_id;
      state.flag = flag_id || null;
      draw();
      const tr = body.querySelector(`tr.txp-row[data-row="${CSS.escape(String(row_id))}"]`);
      if (tr) tr.scrollIntoView({ block: "nearest" });
    } else if (flag_id) {
      state.view = "raw";
      state.raw = { key: "severity", desc: true, filter: String(flag_id) };
      draw();
      body.scrollIntoView({ block: "nearest" });
    }
  };
  const focus = () => {
    const f = model.get("focus_request") || {};
    if (f.n) show(f.row_id, f.flag_id);
  };
  // A flag id clicked in an answer (cards.js): the panel holding the flag opens it and claims the click.
  const onFlag = (ev) => {
    const flagId = ev.detail && ev.detail.flag_id;
    const row = rowOfFlag(model.get("rows") || [], flagId);
    if (!row && !(model.get("raw") || []).some((f) => f.flag_id === flagId)) return; // another case's
    ev.preventDefault();
    show(row ? row.row_id : null, flagId);
  };
  document.addEventListener("tahrix:flag", onFlag);
  return { draw, focus, destroy: () => document.removeEventListener("tahrix:flag", onFlag) };
}

/** The triage row holding ``flagId`` among its flags or its related rows' flags, or undefined. */
export function rowOfFlag(rows, flagId) {
  return rows.find((r) => [...(r.flags || []), ...(r.related || []).flatMap((x) => x.flags || [])]
    .some((f) => f.flag_id === flagId));
}
