// anywidget glue for ChatWidget (tahrix_lab/lab/widget.py).
//
// Not a standalone module: anywidget serves `_esm` as one blob URL, where a
// relative `import` cannot resolve, so Python joins the renderer's files and
// this one into one module (tahrix_lab.flow.resources.widget_bundle) and
// `createFlow` is in scope here.
//
// Transport: chunks are numbered (`seq`). The traits `chunks` (the conversation
// before the current run) + `live` (the current run so far, refreshed every
// 250 ms while it streams, even while ask() blocks the kernel) + `seq` are a
// compact snapshot; `seq` is always where a live message ended. Live chunks
// arrive as custom messages {type: "chunks", from, to, chunks}; messages sent
// before this view rendered are lost, so a view that renders late draws the
// snapshot and goes on from there. A view has drawn chunks
// 0..seen: it draws a message that starts at `seen`, skips one it already has,
// and on a gap asks the kernel once for {type: "resync", since: seen}, which
// answers with the missing chunks (or {type: "snapshot"} when they are older
// than the current run).

function renderChat({ model, el }) {
  el.classList.add("tx-chat");
  let seen = 0; // chunks 0..seen are drawn
  let asked = -1; // `seen` when the last resync was asked
  let waiting = null; // the nonce of a question shown before the kernel took it
  const flow = createFlow(el, {
    followUpMode: model.get("follow_up_mode"),
    showInput: true,
    onSend: (text) => {
      // Show the question at once; the kernel may be busy in another cell.
      waiting = "q" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
      flow.startTurn(text, { waiting: true });
      model.send({ type: "send", text, nonce: waiting });
    },
    onStop: () => model.send({ type: "stop" }),
    // Approve / Deny on a call that waits: the kernel runs it (or not) as this notebook's analyst.
    onDecide: ({ id, approve, reason }) => model.send({ type: "decide", id, approve, reason }),
  });

  const ask = () => {
    if (asked === seen) return; // one request per gap; the kernel may be busy
    asked = seen;
    model.send({ type: "resync", since: seen });
  };

  const drawChunk = (chunk) => {
    if (chunk.type === "user" && waiting && chunk.nonce === waiting) {
      waiting = null;
      flow.setWaiting(false); // the bubble is already there
      return;
    }
    flow.push(chunk);
  };

  const draw = (from, to, chunks) => {
    if (to <= seen) return; // already drawn
    if (from !== seen) return ask(); // a gap (or a partial overlap): fetch from what this view has
    for (const chunk of chunks) drawChunk(chunk);
    seen = to;
  };

  const reload = (chunks, seq) => {
    const pending = waiting;
    flow.clear();
    flow.load(chunks, { live: model.get("busy") });
    seen = seq;
    waiting = null;
    flow.setBusy(model.get("busy"));
    if (pending && !chunks.some((c) => c.type === "user" && c.nonce === pending)) waiting = pending;
  };

  const snapshot = () => [...(model.get("chunks") || []), ...(model.get("live") || [])];
  const onSnapshot = () => {
    const seq = model.get("seq");
    // A view that drew everything keeps its DOM (and any opened details); one
    // that missed live messages (it rendered late, a message was lost) catches up.
    if (seq !== seen) reload(snapshot(), seq);
  };
  const onMessage = (msg) => {
    if (!msg) return;
    if (msg.type === "chunks") {
      const start = performance.now();
      draw(msg.from, msg.to, msg.chunks || []);
      // bench/bench_widget_jupyterlab.py times each live message here
      if (typeof globalThis.__txBench === "function") globalThis.__txBench(msg, performance.now() - start);
    }
    else if (msg.type === "snapshot" && msg.seq > seen) reload(msg.chunks || [], msg.seq);
    else if (msg.type === "refused" && msg.id) flow.refuseDecision(msg.id, msg.message);
    else if (msg.type === "refused" && msg.nonce && msg.nonce === waiting) {
      waiting = null;
      flow.push({ type: "error", kind: "refused", message: msg.message || "The kernel refused the question." });
    }
  };
  const onBusy = () => {
    const busy = model.get("busy");
    if (busy || !waiting) flow.setBusy(busy);
    if (!busy && !waiting) flow.end("done"); // a no-op when a done/error chunk already ended the turn
  };
  const onMeter = () => flow.setMeter(model.get("meter") || {});
  const onMode = () => flow.setFollowUpMode(model.get("follow_up_mode"));

  reload(snapshot(), model.get("seq"));
  onMeter();
  // Chunks sent live before this view existed are not replayed: ask for them.
  asked = seen;
  model.send({ type: "resync", since: seen });

  model.on("change:seq", onSnapshot);
  model.on("msg:custom", onMessage);
  model.on("change:busy", onBusy);
  model.on("change:meter", onMeter);
  model.on("change:follow_up_mode", onMode);
  return () => {
    model.off("change:seq", onSnapshot);
    model.off("msg:custom", onMessage);
    model.off("change:busy", onBusy);
    model.off("change:meter", onMeter);
    model.off("change:follow_up_mode", onMode);
  };
}

export default { render: renderChat };
