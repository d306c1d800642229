"""Renderer benchmark: stream 20,000 content tokens and 200 tool calls into one flow.

Runs widgets/flow.js in headless Chromium (/usr/bin/chromium) and feeds chunks
the way a live stream does: a batch of tokens, then an animation frame (when
the renderer re-renders the unfinished Markdown paragraph), and so on. Prints

* total scripting time (Chrome's ScriptDuration for the whole run) and the
  renderer's own time (pushes plus its animation-frame work);
* the cost of the first and the last 1,000 tokens (pushes plus the frame work
  in the frames they arrived in). Target: last <= 2x first, whole run < 2 s.

Two scenarios: "mixed" (a tool call and its result every 100 tokens, so the
flow grows to 200 tool blocks) and "one block" (20,000 tokens into a single
growing answer with a paragraph break every 60 tokens).

    .venv/bin/python bench/bench_renderer.py [--tokens 20000] [--tools 200] [--batch 50]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

PAGE = b"""<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<link rel="stylesheet" href="/flow.css"></head><body><div id="root"></div></body></html>"""

RUN_JS = """async ([tokensTotal, toolsTotal, batch, toolEvery, paraEvery]) => {
  // Time the renderer's animation-frame work too (it re-renders the unfinished paragraph there).
  let frameMs = 0;
  const raf = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (cb) => raf((t) => { const s = performance.now(); cb(t); frameMs += performance.now() - s; });
  const { createFlow } = await import('/flow.js');
  const flow = createFlow(document.getElementById('root'), {});
  const words = ['the', 'funds', 'moved', 'through', '**0xabc**', 'then', 'a', 'bridge', 'to', '`tron`', 'and', 'an', 'exchange'];
  const frame = () => new Promise((resolve) => raf(() => resolve()));
  const result = 'x'.repeat(900);
  const perBatch = [];  // [tokens in batch, ms]
  let sent = 0, tools = 0, pushMs = 0;
  flow.startTurn('Trace the stolen funds');
  while (sent < tokensTotal) {
    const n = Math.min(batch, tokensTotal - sent);
    const before = frameMs;
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const k = sent + i;
      if (toolEvery && (k + 1) % toolEvery === 0 && tools < toolsTotal) {
        const id = 'call_' + tools++;
        flow.push({ type: 'tool_call', id, name: 'trace_funds', args: { address: '0xabc', hops: 6 } });
        flow.push({ type: 'tool_result', id, name: 'trace_funds', status: 'ok', result: { nodes: 12, note: result } });
      }
      const text = (k % paraEvery === paraEvery - 1) ? '\\n\\n' : words[k % words.length] + ' ';
      flow.push({ type: 'content', text });
    }
    const spent = performance.now() - start;
    pushMs += spent;
    await frame();  // the renderer's frame work for this batch lands here
    perBatch.push([n, spent + (frameMs - before)]);
    sent += n;
  }
  const t0 = performance.now();
  flow.push({ type: 'done', stop_reason: 'end_turn' });
  pushMs += performance.now() - t0;
  document.body.offsetHeight;  // force the final layout
  const cost = (batches) => batches.reduce((a, [, ms]) => a + ms, 0);
  const per = Math.ceil(1000 / batch);
  return {
    pushMs, frameMs, tools,
    first: cost(perBatch.slice(0, per)), last: cost(perBatch.slice(-per)),
    blocks: document.querySelectorAll('.tx-flow > *').length,
    chars: document.querySelector('.tx-flow').textContent.length,
  };
}"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path: Any) -> str:
        return "text/javascript" if str(path).endswith((".js", ".mjs")) else super().guess_type(path)

    def do_GET(self) -> None:
        if self.path == "/":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(PAGE)
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--tools", type=int, default=200)
    ap.add_argument("--batch", type=int, default=50, help="tokens per animation frame")
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(REPO / "widgets"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    scenarios = [
        ("mixed", max(1, args.tokens // max(args.tools, 1)) if args.tools else 0, args.tools),
        ("one block", 0, 0),
    ]
    ok = True
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS
            )
            for name, tool_every, tools in scenarios:
                page = browser.new_page()
                page.goto(url)
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                before = _metrics(cdp)
                r = page.evaluate(RUN_JS, [args.tokens, tools, args.batch, tool_every, 60])
                after = _metrics(cdp)
                script_s = after["ScriptDuration"] - before["ScriptDuration"]
                layout_s = (after["LayoutDuration"] - before["LayoutDuration"]) + (
                    after["RecalcStyleDuration"] - before["RecalcStyleDuration"]
                )
                ratio = r["last"] / r["first"] if r["first"] else float("inf")
                print(
                    f"== {name}: {args.tokens} tokens, {r['tools']} tool calls, {args.batch} tokens per frame"
                )
                print(f"   total scripting time (Chrome ScriptDuration): {script_s * 1000:8.1f} ms")
                print(f"   renderer time (pushes + frame work):          {r['pushMs'] + r['frameMs']:8.1f} ms"
                      f"  (pushes {r['pushMs']:.1f} ms, frames {r['frameMs']:.1f} ms)")  # fmt: skip
                print(f"   style + layout:                               {layout_s * 1000:8.1f} ms")
                print(f"   first 1,000 tokens: {r['first']:7.2f} ms   last 1,000 tokens: {r['last']:7.2f} ms"
                      f"   ratio {ratio:.2f} (target <= 2)")  # fmt: skip
                print(f"   flow blocks: {r['blocks']}, text chars: {r['chars']}")
                ok = ok and ratio <= 2 and script_s < 2
                page.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    print("targets met" if ok else "TARGETS MISSED (the machine may be shared; see figures above)")
    return 0


def _metrics(cdp: Any) -> dict[str, float]:
    return {m["name"]: float(m["value"]) for m in cdp.send("Performance.getMetrics")["metrics"]}


if __name__ == "__main__":
    sys.exit(main())
