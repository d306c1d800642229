// Polling transport for the job service: POST a job, then long-poll its
// chunks with `since` and `wait` and push each one into a flow renderer.
//
//   const chat = createPollingChat({ baseUrl: "", token, flow, wait: 20, onSession });
//   await chat.send("Which exchange is 0xabc?");   // resolves when the job ends
//   await chat.send("Where did it go?", { caseId }); // a new conversation on a case
//   chat.stop();                                   // DELETE: cancels the running job
//   await chat.attach(jobId, question);            // after a reload: follow a running job
//   await chat.decide({ id, approve, reason });     // Approve / Deny a call that waits
//
// Every request is short (at most `wait` seconds), so reverse proxies that cut
// long-lived responses never see one. A failed poll is retried with backoff;
// the `since` index means nothing is lost or shown twice across retries (the
// server keeps each chunk's index, even across a Redis restart). A turn always
// ends: on a terminal status the renderer gets the job's last chunk (or one
// made from the status), and a job that cannot be read any more ends the turn
// with a message saying so. Chunk types the renderer does not know are ignored.

const API = "/api/v1/agent";
const JOB_PATH = `${API}/chat-stream-job`;
const TERMINAL_TYPES = new Set(["done", "error"]);

export class HttpError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
  }
}

// statusWait (seconds, optional): until the job's first chunk, polls wait at most this long, so
// onState hears "queued" / "loading the case" / "thinking" as it changes, not after `wait`.
export function createPollingChat({ baseUrl = "", token, flow, wait = 20, statusWait = null, onMeta, onState, onSession, fetchImpl } = {}) {
  const doFetch = fetchImpl || ((...args) => fetch(...args));
  let sessionId = null;
  let jobId = null;
  let stopped = false;

  async function call(method, path, body) {
    const headers = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await doFetch(baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try {
      data = await resp.json();
    } catch (_) {
      data = null;
    }
    if (!resp.ok) throw new HttpError(resp.status, data && data.detail);
    return data;
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function learnSession(id) {
    if (id && id !== sessionId) {
      sessionId = id;
      if (onSession) onSession(id);
    }
  }

  async function poll(id) {
    let since = 0;
    let failures = 0;
    let seen = false; // a job we have read once may vanish briefly (its store restarting)
    let ended = false;
    for (;;) {
      let state;
      try {
        const w = statusWait !== null && since === 0 ? Math.min(wait, statusWait) : wait;
        state = await call("GET", `${JOB_PATH}/${encodeURIComponent(id)}?since=${since}&wait=${w}&content=false`);
        failures = 0;
        seen = true;
      } catch (err) {
        if (err instanceof HttpError && err.status === 401) throw err;
        if (err instanceof HttpError && err.status === 404 && !seen) throw err;
        failures += 1;
        if (failures > 8) throw err;
        await sleep(Math.min(5000, 250 * 2 ** failures));
        continue;
      }
      for (const chunk of state.chunks) {
        flow.push(chunk);
        if (TERMINAL_TYPES.has(chunk.type)) ended = true;
      }
      since = state.next;
      learnSession(state.session_id);
      if (onState) onState(state);
      if (state.status !== "streaming") {
        if (!ended) {
          // the status says it ended but its last chunk never arrived: end the turn anyway
          if (state.status === "error") flow.push({ type: "error", message: "The answer ended with an error.", kind: "status" });
          else flow.push({ type: "done", stop_reason: state.stop_reason || null });
        }
        return state;
      }
    }
  }

  async function follow(id) {
    jobId = id;
    if (stopped) await api.stop();
    try {
      return await poll(id);
    } catch (err) {
      const gone = err instanceof HttpError && err.status === 404;
      const message = gone
        ? "The live view of this answer is gone. What was kept is in the conversation: reload to read it."
        : err.message || "Lost contact with the server.";
      flow.push({ type: "error", message, kind: "http" });
      throw err;
    } finally {
      jobId = null;
    }
  }

  const api = {
    get sessionId() {
      return sessionId;
    },
    set sessionId(id) {
      sessionId = id || null;
    },
    get jobId() {
      return jobId;
    },
    reset() {
      sessionId = null;
    },
    async me() {
      return call("GET", `${API}/me`);
    },
    async history(id) {
      return call("GET", `${API}/sessions/${encodeURIComponent(id)}`);
    },
    // {caseId}: a new conversation starts on this case (a continued one keeps its own).
    async send(message, { caseId = null } = {}) {
      stopped = false;
      flow.startTurn(message);
      let created;
      try {
        const body = { message };
        if (sessionId) body.session_id = sessionId;
        else if (caseId) body.case_id = caseId;
        created = await call("POST", JOB_PATH, body);
      } catch (err) {
        flow.push({ type: "error", message: err.message || "The request failed.", kind: "http" });
        throw err;
      }
      learnSession(created.meta.session_id);
      if (onMeta) onMeta(created.meta);
      return follow(created.job_id);
    },
    // The signed-in user's Approve / Deny on a call that waits (flow.js's card): runs as a job of
    // this conversation, followed like an answer; refused (decided already…): the card's buttons come back.
    async decide({ id, approve, reason = null }) {
      stopped = false;
      flow.setBusy(true);
      let created;
      try {
        created = await call("POST", `${API}/conversations/${encodeURIComponent(sessionId)}/decisions`,
          { call_id: String(id), approve: Boolean(approve), reason: reason || null });
      } catch (err) {
        flow.setBusy(false);
        flow.refuseDecision(id, err.message || "The decision was not taken.");
        throw err;
      }
      if (onMeta) onMeta(created.meta);
      const state = await follow(created.job_id);
      const refused = state && state.status === "error" && (state.chunks || []).some((c) => c.kind === "refused");
      if (refused) flow.refuseDecision(id, "The decision was not taken.");
      return state;
    },
    async attach(id, question) {
      stopped = false;
      flow.startTurn(question || "");
      return follow(id);
    },
    async stop() {
      stopped = true;
      if (!jobId) return;
      try {
        await call("DELETE", `${JOB_PATH}/${encodeURIComponent(jobId)}`);
      } catch (_) {
        // the job may have just ended; the poll loop reports the final state
      }
    },
  };
  return api;
}
