"""ChatWidget in real JupyterLab: 20,000 tokens + 200 tool calls, from Send to the last token.

A throw-away JupyterLab server, a real kernel and headless Chromium
(/usr/bin/chromium). A notebook cell builds a ChatWidget on a FakeBackend that
streams 20 model calls of 1,000 tokens and 10 tool calls each (the tools run
for real), then a last call ending with END-OF-ANSWER. The bench types a
question, clicks Send and prints

* send -> last token rendered (in the page: the click to the turn's end mark,
  which the same message as the last token sets). Target <= 3 s;
* websocket bytes and frames received while answering, against the rendered
  content (the UTF-8 size of the chat log's text, tool results included).
  Target bytes <= 3x content;
* per-token cost: the time from token 0 to token 999 against token 19,000 to
  19,999, as seen in the websocket frames (resolution: the widget's 50 ms
  flush interval). Target last <= 1.5x first.

With ``--predecessor`` (the default) the same conversation also runs through
the previous transport (the widget and front end of git ``main``: the whole
chunk list re-sent at each block boundary), in the same server, and the
ratios are printed. The machine may be loaded: figures are pessimistic.

    .venv/bin/python bench/bench_widget_jupyterlab.py [--tokens 20000] [--tools 200] [--no-predecessor]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, start_jupyter  # noqa: E402
from tests.e2e.test_jupyterlab_widget import open_notebook  # noqa: E402

SETUP = """
from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import text, tool_call
{widget_import}

store = TranscriptStore({db!r})
tools = ToolRegistry()

@tools.register(parameters={{"type": "object", "properties": {{"address": {{"type": "string"}}}}}})
def trace_funds(args, ctx):
    "Trace funds from an address."
    return {{"nodes": [{{"address": args["address"], "hop": i}} for i in range(5)], "total_usd": 1234.5}}

TOKENS, TOOLS, CYCLES = {tokens}, {tools}, 20
per, tools_per = TOKENS // CYCLES, TOOLS // CYCLES

def cycle(c):
    events = [text("\\n\\n" if (c * per + i) % 60 == 59 else f"w{{c * per + i}} ") for i in range(per)]
    events += [tool_call("trace_funds", {{"address": f"0x{{c:04x}}{{j:036x}}"}}, id=f"c{{c}}_{{j}}")
               for j in range(tools_per)]
    return events

script = [cycle(c) for c in range(CYCLES)] + [[text("END-OF-ANSWER")]]
chat = ChatWidget(store=store, backend=FakeBackend(script), model="fake-model", registry=tools,
                  max_tool_cycles=CYCLES + 1)
chat
"""

NEW_IMPORT = "from tahrix_lab.lab.widget import ChatWidget"

# The previous transport, from git main: its widget module, with its front end
# (flow.js + chat.js of main) joined in place of today's files.
OLD_IMPORT = """
import types, tahrix_lab.flow.resources as _res
_old = types.ModuleType("old_widget")
_src = open({py!r}).read().replace(
    'widget_file("flow.js").read_text(encoding="utf-8")', "open({flow!r}).read()").replace(
    'widget_file("chat.js").read_text(encoding="utf-8")', "open({chat!r}).read()")
exec(compile(_src, "main:tahrix_lab/lab/widget.py", "exec"), _old.__dict__)
ChatWidget = _old.ChatWidget
"""

TIMING_JS = """() => {
  window.__bench = { sent: null, done: null };
  document.querySelector('.tx-chat .tx-send').addEventListener('click', () => { window.__bench.sent = performance.now(); }, true);
  new MutationObserver(() => {
    if (window.__bench.done === null && document.querySelector('.tx-chat .tx-flow[data-status]')) window.__bench.done = performance.now();
  }).observe(document.querySelector('.tx-chat'), { subtree: true, attributes: true, attributeFilter: ['data-status'] });
}"""

# Time the widget's handling of each live message (chat.js calls the hook) and
# note which tokens it carried, for the per-token cost.
HOOK_JS = """() => {
  window.__costs = [];
  window.__txBench = (msg, ms) => {
    const ks = [];
    for (const c of msg.chunks || []) if (c.type === 'content') for (const m of (c.text || '').matchAll(/w(\\d+) /g)) ks.push(+m[1]);
    window.__costs.push([ms, ks]);
  };
}"""

CONTENT_JS = (
    """() => new TextEncoder().encode(document.querySelector('.tx-chat .tx-log').textContent).length"""
)

TOKEN = re.compile(rb"w(\d+) ")


def git_show(path: str, dest: Path) -> Path:
    dest.write_bytes(subprocess.run(["git", "-C", str(REPO), "show", f"main:{path}"], check=True,
                                    capture_output=True).stdout)  # fmt: skip
    return dest


def write_notebook(lab: Any, name: str, source: str) -> None:
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": lab.kernel_name, "display_name": "Tahrix test", "language": "python"}
        },
        "cells": [
            {
                "cell_type": "code",
                "id": "c0",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": source,
            }
        ],
    }
    (lab.root / name).write_text(json.dumps(nb))


def run_one(browser: Any, lab: Any, name: str, source: str, tokens: int) -> dict[str, Any]:
    write_notebook(lab, name, source)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    frames: list[tuple[float, int, bytes]] = []
    state = {"on": False}

    def on_ws(ws: Any) -> None:
        def got(payload: Any) -> None:
            if state["on"]:
                data = payload.encode() if isinstance(payload, str) else bytes(payload)
                frames.append((time.perf_counter(), len(data), data))

        ws.on("framereceived", got)

    page.on("websocket", on_ws)
    open_notebook(page, lab, name)
    page.set_default_timeout(600_000)  # the predecessor takes a while
    page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    page.locator(".tx-chat .tx-text").wait_for()
    page.evaluate(TIMING_JS)
    page.evaluate(HOOK_JS)
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")

    def script_s() -> float:
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return (
            float(metrics.get("ScriptDuration", 0.0))
            + float(metrics.get("LayoutDuration", 0.0))
            + float(metrics.get("RecalcStyleDuration", 0.0))
        )

    page.locator(".tx-chat .tx-text").click()
    page.keyboard.type("go")
    state["on"] = True
    busy_before = script_s()
    t_send = time.perf_counter()
    page.locator(".tx-chat .tx-send").click()
    page.wait_for_function("() => window.__bench.done !== null", polling=100)
    page_busy = script_s() - busy_before
    page.locator(".tx-chat .tx-content", has_text="END-OF-ANSWER").wait_for()
    page.wait_for_function("() => !document.querySelector('.tx-chat .tx-send').disabled")
    time.sleep(1.0)  # the end-of-run snapshot
    state["on"] = False
    timing = page.evaluate("() => window.__bench")
    costs = page.evaluate("() => window.__costs")
    content = page.evaluate(CONTENT_JS)
    tools_drawn = page.locator(".tx-chat .tx-tool").count()
    context.close()
    lab.shutdown_kernels()
    seen: dict[int, float] = {}
    for at, _, data in frames:
        for m in TOKEN.finditer(data):
            seen.setdefault(int(m.group(1)), at)
    last = max(seen) if seen else -1

    def t(k: int) -> float | None:
        return seen.get(k)

    # each token costs its message's handling time / the tokens in it
    per_token: dict[int, float] = {}
    for ms, ks in costs:
        for k in ks:
            per_token[k] = ms / len(ks)
    first_ms = last_ms = None
    if per_token:
        top = max(per_token)
        first_ms = sum(per_token.get(k, 0.0) for k in range(1000))
        last_ms = sum(per_token.get(k, 0.0) for k in range(top - 999, top + 1))
    arrival_first = arrival_last = None
    if all(t(k) is not None for k in (0, 999, last - 999, last)):
        arrival_first = (t(999) - t(0)) * 1000  # type: ignore[operator]
        arrival_last = (t(last) - t(last - 999)) * 1000  # type: ignore[operator]
    return {
        "send_to_done_s": (timing["done"] - timing["sent"]) / 1000,
        "page_busy_s": page_busy,
        "wall_s": frames[-1][0] - t_send if frames else None,
        "ws_bytes": sum(n for _, n, _ in frames),
        "ws_frames": len(frames),
        "content_bytes": content,
        "tools_drawn": tools_drawn,
        "first_1000_ms": first_ms,
        "last_1000_ms": last_ms,
        "arrival_first_ms": arrival_first,
        "arrival_last_ms": arrival_last,
        "live_messages": len(costs),
    }


def report(label: str, r: dict[str, Any]) -> None:
    ratio = r["ws_bytes"] / r["content_bytes"] if r["content_bytes"] else float("nan")
    flat = (r["last_1000_ms"] / r["first_1000_ms"]) if r["first_1000_ms"] else float("nan")
    print(f"\n== {label}")
    print(f"send -> last token rendered : {r['send_to_done_s']:.2f} s   (target <= 3 s)")
    print(f"page main thread busy       : {r['page_busy_s']:.2f} s   (script + layout + style)")
    print(f"websocket received          : {r['ws_bytes'] / 1e6:.2f} MB in {r['ws_frames']} frames")
    print(f"rendered content            : {r['content_bytes'] / 1e3:.1f} KB, {r['tools_drawn']} tool blocks")
    print(f"bytes / content             : {ratio:.2f}x   (target <= 3x)")
    if r["first_1000_ms"] is not None:
        print(f"per-token cost, page        : first 1,000 {r['first_1000_ms']:.1f} ms, last 1,000 "
              f"{r['last_1000_ms']:.1f} ms = {flat:.2f}x   (target <= 1.5x; {r['live_messages']} live messages)")  # fmt: skip
    if r["arrival_first_ms"] is not None:
        print(
            f"arrival, tokens 0-999 / last: {r['arrival_first_ms']:.0f} ms / {r['arrival_last_ms']:.0f} ms "
            "(websocket frames; coarse: one frame carries many tokens)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--tools", type=int, default=200)
    ap.add_argument("--no-predecessor", action="store_true", help="skip the previous transport (git main)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="tahrix-bench-") as tmp, start_jupyter(Path(tmp) / "lab") as lab:
        old = Path(tmp) / "old"
        old.mkdir()
        results = {}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            src = SETUP.format(widget_import=NEW_IMPORT, db=str(lab.root / "new.duckdb"),
                               tokens=args.tokens, tools=args.tools)  # fmt: skip
            results["this branch"] = run_one(browser, lab, "new.ipynb", src, args.tokens)
            report("this branch: batched custom messages + a compact snapshot", results["this branch"])
            if not args.no_predecessor:
                py = git_show("tahrix_lab/lab/widget.py", old / "widget.py")
                flow = git_show("widgets/flow.js", old / "flow.js")
                chat = git_show("widgets/chat.js", old / "chat.js")
                imp = OLD_IMPORT.format(py=str(py), flow=str(flow), chat=str(chat))
                src = SETUP.format(widget_import=imp, db=str(lab.root / "old.duckdb"),
                                   tokens=args.tokens, tools=args.tools)  # fmt: skip
                results["main"] = run_one(browser, lab, "old.ipynb", src, args.tokens)
                report("git main: chunk list re-sent at each block boundary", results["main"])
                new, prev = results["this branch"], results["main"]
                print("\n== ratios (main / this branch)")
                print(f"time  {prev['send_to_done_s'] / new['send_to_done_s']:.1f}x   "
                      f"bytes {prev['ws_bytes'] / new['ws_bytes']:.1f}x   "
                      f"frames {prev['ws_frames'] / max(1, new['ws_frames']):.1f}x")  # fmt: skip
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
