// Polling transport for the job service: POST a job, then long-poll its
// chunks with `since` and `wait` and push each one into a flow renderer.
//
//   const chat = createPollingChat({ baseUrl: "", token, flow, wait: 20 });
//   await chat.send("Which exchange is 0xabc?");   // resolves when the job ends
//   chat.stop();                                   // DELETE: cancels the running job
//
// Every request is short (at most `wait` seconds), so reverse proxies that cut
// long-lived responses never see one. A failed poll is retried with backoff;
// the `since` index means nothing is lost or shown twice across retries.

const JOB_PATH = "/api/v1/agent/chat-stream-job";

export class HttpError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
  }
}

export function createPollingChat({ baseUrl = "", token, flow, wait = 20, onMeta, onState, fetchImpl } = {}) {
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

  async function poll(id) {
    let since = 0;
    let failures = 0;
    for (;;) {
      let state;
      try {
        state = await call("GET", `${JOB_PATH}/${encodeURIComponent(id)}?since=${since}&wait=${wait}`);
        failures = 0;
      } catch (err) {
        if (err instanceof HttpError && (err.status === 401 || err.status === 404)) throw err;
        failures += 1;
        if (failures > 8) throw err;
        await sleep(Math.min(5000, 250 * 2 ** failures));
        continue;
      }
      for (const chunk of state.chunks) flow.push(chunk);
      since = state.next;
      if (onState) onState(state);
      if (state.status !== "streaming") return state;
    }
  }

  return {
    get sessionId() {
      return sessionId;
    },
    get jobId() {
      return jobId;
    },
    reset() {
      sessionId = null;
    },
    async send(message) {
      stopped = false;
      flow.startTurn(message);
      let created;
      try {
        const body = { message };
        if (sessionId) body.session_id = sessionId;
        created = await call("POST", JOB_PATH, body);
      } catch (err) {
        flow.push({ type: "error", message: err.message || "The request failed.", kind: "http" });
        throw err;
      }
      jobId = created.job_id;
      sessionId = created.meta.session_id;
      if (onMeta) onMeta(created.meta);
      if (stopped) await this.stop();
      try {
        const state = await poll(jobId);
        return state;
      } catch (err) {
        flow.push({ type: "error", message: err.message || "Lost contact with the server.", kind: "http" });
        throw err;
      } finally {
        jobId = null;
      }
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
}
