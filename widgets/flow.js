// Tahrix flow renderer: draws the chunks of tahrix_lab/flow.py into a
// container, in arrival order. Transport-agnostic: the notebook widget
// (chat.js) and the job service's page both drive it through the same API.
//
// Everything from the model or a tool is untrusted. This module never assigns
// innerHTML/outerHTML and never sets an attribute from untrusted text except
// href (protocol-checked) and title; all text goes in through text nodes.

import { approvalCard, errorText, inlineArgs, resultTables, summarize } from "./cards.js";
import { ContentBlock, h } from "./markdown.js";

const RESULT_PREVIEW_CHARS = 20000;
const BUCKET_LABELS = {
  per_minute_tokens: "tokens this minute",
  per_hour_tokens: "tokens this hour",
  monthly_usd: "your 30-day spend",
  global_monthly_usd: "team 30-day spend",
};

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
