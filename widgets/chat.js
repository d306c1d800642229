// anywidget glue for ChatWidget (tahrix_lab/lab/widget.py).
//
// Not a standalone module: anywidget serves `_esm` as one blob URL, where a
// relative `import` cannot resolve, so Python joins flow.js and this file into
// one module and `createFlow` is in scope here.
//
// Transport: the `chunks` trait is the authoritative, ordered conversation;
// live chunks also arrive as custom messages {type: "chunks", epoch, start,
// chunks} where `start` is the index of the first one. A view draws each index
// once: overlaps are skipped, a gap asks the kernel to resend from what it has.
// When a run ends the kernel merges its token chunks and bumps `epoch`: the
// view redraws from the trait and ignores messages of another epoch.

function renderChat({ model, el }) {
  el.classList.add("tx-chat");
  let drawn = 0;
  let epoch = model.get("epoch");
  let adopt = null; // the epoch this view may take over without redrawing
  let asked = -1; // the index of the last resync request
  const flow = createFlow(el, {
    followUpMode: model.get("follow_up_mode"),
    showInput: true,
    onSend: (text) => model.send({ type: "send", text }),
    onStop: () => model.send({ type: "stop" }),
  });

  const draw = (start, chunks) => {
    if (start > drawn) {
      // One request per gap: the kernel may be busy in a cell, and meanwhile the
      // trait (refreshed from the run's thread) fills the gap anyway.
      if (asked !== drawn) {
        asked = drawn;
        model.send({ type: "resync", since: drawn, epoch });
      }
      return;
    }
    for (let i = drawn - start; i < chunks.length; i++) flow.push(chunks[i]);
    drawn = Math.max(drawn, start + chunks.length);
  };

  const reload = () => {
    const all = model.get("chunks") || [];
    epoch = model.get("epoch");
    flow.clear();
    flow.load(all, { live: model.get("busy") });
    drawn = all.length;
    flow.setBusy(model.get("busy"));
  };

  const onChunks = () => {
    const all = model.get("chunks") || [];
    const current = model.get("epoch");
    if (current !== epoch) {
      // The merged list draws the same as what this view shows when it had drawn
      // every chunk of the old epoch: keep the DOM (and any opened details).
      if (adopt === current) {
        epoch = current;
        drawn = all.length;
        adopt = null;
      } else reload();
      return;
    }
    if (all.length < drawn) reload(); // the conversation was cleared
    else draw(0, all);
  };
  const onMessage = (msg) => {
    if (!msg) return;
    if (msg.type === "chunks" && msg.epoch === epoch) draw(msg.start, msg.chunks || []);
    else if (msg.type === "merged") adopt = msg.from_epoch === epoch && drawn === msg.raw_length ? msg.epoch : null;
  };
  const onBusy = () => {
    const busy = model.get("busy");
    flow.setBusy(busy);
    if (!busy) flow.end("done"); // a no-op when a done/error chunk already ended the turn
  };
  const onMeter = () => flow.setMeter(model.get("meter") || {});
  const onMode = () => flow.setFollowUpMode(model.get("follow_up_mode"));

  reload();
  onMeter();
  // Chunks sent live before this view existed are not replayed: ask for them.
  asked = drawn;
  model.send({ type: "resync", since: drawn, epoch });

  model.on("change:chunks", onChunks);
  model.on("change:epoch", onChunks);
  model.on("msg:custom", onMessage);
  model.on("change:busy", onBusy);
  model.on("change:meter", onMeter);
  model.on("change:follow_up_mode", onMode);
  return () => {
    model.off("change:chunks", onChunks);
    model.off("change:epoch", onChunks);
    model.off("msg:custom", onMessage);
    model.off("change:busy", onBusy);
    model.off("change:meter", onMeter);
    model.off("change:follow_up_mode", onMode);
  };
}

export default { render: renderChat };
