// The job service's page (page.html): sign in, pick a case, keep one's conversations at hand,
// start from an example question, and read the answer beside the case's flags and graph.
//
// It draws with the notebook's renderer: flow.js for the chat, citations.js for the citations
// line, panels.js for the flags and graph panels (wired in page_panels.js). The data comes from
// the job API and jobs/http/workplace.py.
//
// The token lives in sessionStorage (gone when the tab closes); the conversation and the case
// live in the URL (?session=...&case=...), so a reload shows them again and follows an answer
// still running.
import { createFlow } from "/static/flow.js";
import { createPollingChat, HttpError } from "/static/poll.js";
import "/static/citations.js"; // sets globalThis.txCitations, which flow.js calls for a citations chunk
import { showCasePanels } from "/static/page_panels.js";

const API = "/api/v1/agent";
const KEY = "tahrix-token";
const $ = (id) => document.getElementById(id);
let token = null;
let chat = null;
let flow = null;
let cases = [];
let caseId = null;
let conversations = [];
let panelsShown = []; // cleanup functions of the panels on screen

// -- the URL keeps the conversation and the case ------------------------------------
function fromUrl(name) {
  return new URLSearchParams(location.search).get(name);
}

function putInUrl(name, value) {
  const url = new URL(location.href);
  if (value) url.searchParams.set(name, value);
  else url.searchParams.delete(name);
  history.replaceState(null, "", url);
}

async function api(path, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(API + path, body === undefined ? { headers }
    : { method: "POST", headers, body: JSON.stringify(body) });
  let data = null;
  try {
    data = await resp.json();
  } catch (_) {
    data = null;
  }
  if (!resp.ok) throw new HttpError(resp.status, data && data.detail);
  return data;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// -- sign-in ---------------------------------------------------------------------------
function showLogin(message) {
  $("login").hidden = false;
  for (const id of ["work", "logout", "new-chat", "case-picker"]) $(id).hidden = true;
  $("who").textContent = "";
  $("login-error").textContent = message || "";
  $("token").focus();
}

function signedOut() {
  sessionStorage.removeItem(KEY);
  showLogin("That token was not accepted. Please sign in again.");
}

// Any 401 means the token is no longer good: back to the sign-in.
function failed(err) {
  if (err instanceof HttpError && err.status === 401) signedOut();
  else console.warn(err); // eslint-disable-line no-console
}

async function signIn(given) {
  try {
    const me = await createPollingChat({ token: given, flow: null }).me();
    sessionStorage.setItem(KEY, given);
    token = given;
    await showWork(me.user);
  } catch (err) {
    if (err instanceof HttpError && err.status === 401) {
      sessionStorage.removeItem(KEY);
      showLogin("That token was not accepted. Check it and try again.");
    } else {
      showLogin("The service did not answer. Please try again in a moment.");
    }
  }
}

// -- the status before the first chunk ---------------------------------------------------
function statusText(queuePosition, sessionId) {
  if (queuePosition > 0) return `Queued: ${queuePosition} answer${queuePosition === 1 ? "" : "s"} ahead of this one…`;
  if (!sessionId) return caseId ? "Loading the case…" : "Starting the conversation…";
  return "Thinking…";
}

// -- the chat ------------------------------------------------------------------------------
function send(text) {
  const started = chat.send(text, { caseId });
  flow.setStatus("Queued…"); // until the service admits it
  $("examples").hidden = true;
  started.then(refreshConversations, failed).catch(failed);
}

// A fresh conversation view. The one it replaces is let go, not stopped: an answer still running
// goes on in the service and its conversation stays in the list (its callbacks only touch its own view).
function newChat() {
  $("chat").replaceChildren();
  const view = createFlow($("chat"), {
    followUpMode: "keep",
    showInput: true,
    onSend: send,
    onStop: () => mine.stop(),
    onDecide: (decision) => mine.decide(decision).catch(failed),
  });
  const mine = createPollingChat({
    baseUrl: "",
    token,
    flow: view,
    wait: 20,
    statusWait: 1, // polls come back within a second until the first chunk: the status stays true
    onSession: (id) => {
      if (chat !== mine) return;
      putInUrl("session", id);
      refreshConversations();
    },
    onMeta: (meta) => view.setStatus(statusText(meta.queue_position, meta.session_id)),
    onState: (state) => {
      if (state.status === "streaming") view.setStatus(statusText(state.queue_position, state.session_id));
    },
  });
  flow = view;
  chat = mine;
  window.tahrixChat = chat;
  $("examples").hidden = !caseId;
}

// A stored conversation with each answer's citations line, which the transcript does not keep:
// the service checks each turn again; without it (a plain chat service) the answers show alone.
async function withCitations(sessionId, chunks) {
  let turns = [];
  try {
    turns = (await api(`/conversations/${encodeURIComponent(sessionId)}/citations`)).turns || [];
  } catch (err) {
    console.warn(err); // eslint-disable-line no-console
  }
  const out = [];
  let k = -1;
  const close = () => {
    if (k >= 0 && turns[k]) out.push({ type: "citations", ...turns[k] });
  };
  for (const chunk of chunks) {
    if (chunk.type === "user") {
      close();
      k += 1;
    }
    out.push(chunk);
  }
  close();
  return out;
}

async function openConversation(id) {
  newChat();
  try {
    const past = await chat.history(id);
    chat.sessionId = past.session_id;
    putInUrl("session", past.session_id);
    const conv = conversations.find((c) => c.session_id === past.session_id);
    if (conv && conv.case_id && conv.case_id !== caseId) await chooseCase(conv.case_id, { keepChat: true });
    $("examples").hidden = past.chunks.length > 0;
    flow.load(await withCitations(past.session_id, past.chunks), { live: !!past.job });
    markActive();
    if (past.job) await chat.attach(past.job.job_id, past.job.message);
  } catch (err) {
    if (err instanceof HttpError && err.status === 401) return signedOut();
    if (err instanceof HttpError && err.status === 404) {
      putInUrl("session", null);
      flow.push({ type: "error", message: "That conversation was not found; this is a new one.", kind: "http" });
      flow.end("done");
    }
  }
}

// -- the user's conversations ----------------------------------------------------------------
function when(iso) {
  if (!iso) return "";
  const d = new Date(iso.endsWith("Z") || iso.includes("+") ? iso : iso + "Z");
  return isNaN(d) ? "" : d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function markActive() {
  const current = chat ? chat.sessionId : null;
  for (const li of $("conv-list").children) li.classList.toggle("active", li.dataset.session === current);
}

async function refreshConversations() {
  try {
    conversations = (await api("/conversations")).conversations;
  } catch (err) {
    return failed(err);
  }
  const list = $("conv-list");
  list.replaceChildren();
  for (const c of conversations) {
    const li = list.appendChild(el("li"));
    li.dataset.session = c.session_id;
    const b = li.appendChild(el("button"));
    b.type = "button";
    b.title = c.question || c.title || c.session_id;
    b.appendChild(el("span", "conv-q", c.question || c.title || "(no question yet)"));
    b.appendChild(el("span", "conv-meta", [c.case_id, when(c.created_at)].filter(Boolean).join(" · ")));
    b.addEventListener("click", () => openConversation(c.session_id));
  }
  $("conv-empty").hidden = conversations.length > 0;
  markActive();
}

// -- cases: picker, examples, panels ------------------------------------------------------------
function showPanels(flags, graph) {
  for (const cleanup of panelsShown) cleanup();
  const post = async (path, body) => {
    try {
      return await api(`/cases/${encodeURIComponent(caseId)}${path}`, body);
    } catch (err) {
      if (err instanceof HttpError && err.status === 401) signedOut();
      throw err;
    }
  };
  const traceFrom = async (node, edgesIn) => (await post("/graph/onward", { node, edges_in: edgesIn })).graph;
  const flag = (flagId) => `/flags/${encodeURIComponent(flagId)}`;
  const decide = !flags.can_decide ? null : (flagId, action) => post(flag(flagId) + "/decision", { action });
  const undo = !flags.can_decide ? null : (flagId, auditId) => post(flag(flagId) + "/undo", { audit_id: auditId });
  panelsShown = showCasePanels({ flagsHost: $("flags-panel"), graphHost: $("graph-panel"), flags, graph, traceFrom,
    decide, undo });
}

async function chooseCase(id, { keepChat = false } = {}) {
  caseId = id || null;
  $("case").value = caseId || "";
  putInUrl("case", caseId);
  if (!keepChat && chat && chat.sessionId) {
    // a conversation belongs to one case: choosing another starts a new one (the old stays listed)
    const conv = conversations.find((c) => c.session_id === chat.sessionId);
    if (!conv || conv.case_id !== caseId) {
      putInUrl("session", null);
      newChat();
      markActive();
    }
  }
  if (!caseId) return;
  try {
    const [info, flags, graph] = await Promise.all([api(`/cases/${encodeURIComponent(caseId)}`),
      api(`/cases/${encodeURIComponent(caseId)}/flags`), api(`/cases/${encodeURIComponent(caseId)}/graph`)]);
    if (id !== caseId) return; // another case was chosen meanwhile
    const head = $("case-head");
    const examples = $("examples").querySelector("ul");
    head.replaceChildren();
    examples.replaceChildren();
    head.appendChild(el("h2", null, `${info.case.case_id} · ${info.case.title || ""}`));
    if (info.case.summary) head.appendChild(el("p", null, info.case.summary));
    for (const q of info.examples) {
      const b = examples.appendChild(el("li")).appendChild(el("button", "example", q));
      b.type = "button";
      b.addEventListener("click", () => {
        if (document.querySelector(".tx-flow-root.tx-busy")) {
          const box = document.querySelector("textarea.tx-text"); // busy: fill the box for later
          if (box) box.value = q;
        } else {
          send(q);
        }
      });
    }
    $("examples").hidden = Boolean(chat && chat.sessionId);
    showPanels(flags, graph);
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) {
      $("side-note").hidden = false;
      $("side-note").textContent = "That case is not one you can open.";
      return;
    }
    failed(err);
  }
}

async function showWork(user) {
  $("login").hidden = true;
  for (const id of ["work", "logout", "new-chat"]) $(id).hidden = false;
  $("who").textContent = `Signed in as ${user}`;
  $("chat").replaceChildren();
  newChat();
  try {
    const listed = await api("/cases");
    cases = listed.cases;
    // a plain chat service has no cases: the chat takes the panels' room
    $("work").classList.toggle("no-cases", cases.length === 0);
  } catch (err) {
    return failed(err);
  }
  const picker = $("case");
  picker.replaceChildren();
  for (const c of cases) picker.appendChild(el("option", null, `${c.case_id} — ${c.title || ""}`)).value = c.case_id;
  $("case-picker").hidden = cases.length === 0;
  await refreshConversations();
  const session = fromUrl("session");
  const wanted = fromUrl("case");
  const first = cases.find((c) => c.case_id === wanted) || cases[0];
  await chooseCase(first ? first.case_id : null, { keepChat: true });
  if (session) await openConversation(session);
}

// -- wiring --------------------------------------------------------------------------------------
$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const given = $("token").value.trim();
  if (!given) return;
  $("token").value = "";
  signIn(given);
});
$("logout").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  if (chat) chat.stop();
  putInUrl("session", null);
  showLogin();
});
$("new-chat").addEventListener("click", () => {
  putInUrl("session", null);
  newChat();
  markActive();
});
$("case").addEventListener("change", (ev) => chooseCase(ev.target.value));

const saved = sessionStorage.getItem(KEY);
if (saved) signIn(saved);
else showLogin();
