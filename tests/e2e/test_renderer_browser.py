"""The flow renderer (widgets/flow.js) in real headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from tahrix_lab.lab.widget import ChatWidget

pytestmark = pytest.mark.e2e

BLOCKS_JS = """() => [...document.querySelectorAll('.tx-flow')].map(flow =>
  [...flow.children].filter(el => !el.hidden).map(el => {
    const cls = [...el.classList].find(c => c !== 'tx-block' && c.startsWith('tx-'));
    return cls.slice(3);
  }))"""


def feed(pg: Any, chunks: list[dict[str, Any]]) -> None:
    pg.evaluate("(chunks) => chunks.forEach(c => window.flow.push(c))", chunks)


def blocks(pg: Any) -> list[list[str]]:
    return pg.evaluate(BLOCKS_JS)


def usage(model: str = "fake-model") -> dict[str, Any]:
    return {
        "type": "usage",
        "model": model,
        "backend": "fake",
        "usage": {"input_tokens": 120, "output_tokens": 30},
        "cost_usd": 0.0012,
        "latency_ms": 850,
        "ttft_ms": 120,
        "stop_reason": "end_turn",
    }


SCRIPTED = [
    {"type": "reasoning", "text": "The user asks about "},
    {"type": "reasoning", "text": "address 0xabc."},
    {"type": "content", "text": "Let me look it up."},
    {"type": "tool_call", "id": "call_1", "name": "lookup_address", "args": {"address": "0xabc"}},
    usage(),
    {
        "type": "tool_result",
        "id": "call_1",
        "name": "lookup_address",
        "status": "ok",
        "result": {"label": "Exchange hot wallet", "tx_count": 42},
        "duration_ms": 12.5,
    },
    {"type": "follow_up", "text": "Synthesizing results..."},
    {"type": "reasoning", "text": "It is an exchange."},
    {"type": "content", "text": "The address is an **exchange** "},
    {"type": "content", "text": "hot wallet with 42 transactions."},
    usage(),
    {"type": "done", "stop_reason": "end_turn"},
]


def test_blocks_follow_arrival_order_and_finish_cleanly(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('What is 0xabc?')")
    feed(page, SCRIPTED)
    assert blocks(page) == [["reasoning", "content", "tool", "usage", "reasoning", "content", "usage"]]
    assert page.locator(".tx-user .tx-bubble").inner_text() == "What is 0xabc?"
    # reasoning collapsed, the two reasoning chunks joined in one block
    assert page.evaluate(
        "() => [...document.querySelectorAll('.tx-reasoning details')].map(d => d.open)"
    ) == [
        False,
        False,
    ]
    assert page.locator(".tx-reasoning-text").first.text_content() == "The user asks about address 0xabc."
    # the tool block: done, arguments and result present, preview collapsed
    tool = page.locator(".tx-tool")
    assert tool.get_attribute("data-status") == "done"
    assert tool.locator(".tx-tool-name").inner_text() == "lookup_address"
    assert '"address": "0xabc"' in tool.locator(".tx-tool-args pre").text_content()
    assert "Exchange hot wallet" in tool.locator(".tx-tool-result pre").text_content()
    assert page.evaluate("() => document.querySelector('.tx-tool-result').open") is False
    # consecutive content chunks extend one block, rendered as Markdown
    last = page.locator(".tx-content").last
    assert last.inner_text().strip() == "The address is an exchange hot wallet with 42 transactions."
    assert last.locator("strong").inner_text() == "exchange"
    # dots hidden, synthesizing indicator gone, usage footer quiet and complete
    assert page.locator(".tx-dots").is_hidden()
    assert page.locator(".tx-synth").count() == 0
    assert "in 120 / out 30 tokens" in page.locator(".tx-usage").first.inner_text()
    assert "$0.0012" in page.locator(".tx-usage").first.inner_text()
    assert page.console_errors == []


def test_dots_stay_last_while_streaming(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    for chunk in SCRIPTED[:-1]:
        feed(page, [chunk])
        state = page.evaluate(
            "() => { const f = document.querySelector('.tx-flow'); const d = f.lastElementChild;"
            " return [d.className, d.hidden]; }"
        )
        assert state == ["tx-dots", False], chunk
    feed(page, [SCRIPTED[-1]])
    assert page.locator(".tx-dots").is_hidden()


def test_reasoning_stays_open_while_streaming_and_blocks_are_never_grouped(
    page: Any, mount_flow: Any
) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "reasoning", "text": "thinking"}])
    assert page.evaluate("() => document.querySelector('.tx-reasoning details').open") is True
    feed(page, [{"type": "content", "text": "one"}, {"type": "reasoning", "text": "more thinking"}])
    opened = "() => [...document.querySelectorAll('.tx-reasoning details')].map(d => d.open)"
    assert page.evaluate(opened) == [False, True]
    feed(page, [{"type": "content", "text": "two"}])
    assert page.evaluate(opened) == [False, False]
    assert blocks(page) == [["reasoning", "content", "reasoning", "content", "dots"]]


def test_follow_up_shows_synthesizing_until_new_text(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, SCRIPTED[:7])
    assert page.locator(".tx-synth").inner_text().startswith("Synthesizing results")
    assert blocks(page)[0][-2:] == ["synth", "dots"]
    feed(page, [SCRIPTED[7]])
    assert page.locator(".tx-synth").count() == 0


def test_follow_up_replace_removes_pre_tool_prose_but_keeps_tools(page: Any, mount_flow: Any) -> None:
    mount_flow(page, {"followUpMode": "replace"})
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, SCRIPTED)
    assert blocks(page) == [["tool", "usage", "reasoning", "content", "usage"]]
    assert "Let me look it up" not in page.locator(".tx-flow").inner_text()


def test_parallel_tool_results_match_by_id(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(
        page,
        [
            {"type": "tool_call", "id": "a", "name": "first", "args": {}},
            {"type": "tool_call", "id": "b", "name": "second", "args": {}},
        ],
    )
    status = "() => [...document.querySelectorAll('.tx-tool')].map(t => t.dataset.status)"
    assert page.evaluate(status) == ["queued", "queued"]  # asked for, not started
    feed(page, [{"type": "tool_start", "id": "b", "name": "second"}])
    assert page.evaluate(status) == ["queued", "running"]
    feed(
        page,
        [
            {
                "type": "tool_result",
                "id": "b",
                "name": "second",
                "status": "error",
                "result": {"error": {"type": "denied", "message": "not allowed"}},
            },
            {"type": "tool_result", "id": "a", "name": "first", "status": "ok", "result": {"n": 1}},
        ],
    )
    statuses = page.evaluate(
        "() => [...document.querySelectorAll('.tx-tool')].map(t => [t.dataset.id, t.dataset.status,"
        " t.querySelector('.tx-tool-status').textContent])"
    )
    assert statuses == [["a", "done", "done"], ["b", "error", "error"]]
    # the error's message is plain text under the header, not only in the collapsed JSON
    assert page.locator(".tx-tool").nth(1).locator(".tx-tool-error").inner_text() == "not allowed"
    # a result without a headline gets a neutral count, never a guess
    assert page.locator(".tx-tool").nth(0).locator(".tx-tool-summary").inner_text() == "1 field"


def test_tool_header_reads_like_the_call_with_a_one_line_summary(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    start = "0x3373c6f1ab0e4d5e6a7b8c9d0e1f2a3b4c5d3eb2"
    feed(page, [
        {"type": "tool_call", "id": "t", "name": "trace_funds", "args": {"start": start, "max_hops": 4}},
        {"type": "tool_start", "id": "t", "name": "trace_funds"},
        {"type": "tool_result", "id": "t", "name": "trace_funds", "status": "ok", "duration_ms": 1234,
         "result": {"headline": "$6.3M traced · 3 endpoints", "nodes": [{}] * 10, "endpoints": [{}] * 3}},
        {"type": "tool_call", "id": "f1", "name": "list_flags", "args": {"severity": "critical"}},
        {"type": "tool_call", "id": "f2", "name": "list_flags", "args": {"severity": "high", "limit": 5}},
    ])  # fmt: skip
    heads = page.locator(".tx-tool .tx-tool-call").all_inner_texts()
    assert heads == [
        "trace_funds(start=0x3373…3eb2, max_hops=4)",
        'list_flags(severity="critical")',
        'list_flags(severity="high", limit=5)',
    ]
    first = page.locator(".tx-tool").first
    assert first.locator(".tx-tool-summary").inner_text() == "$6.3M traced · 3 endpoints"
    assert first.locator(".tx-tool-duration").inner_text() == "1.2 s"
    assert (
        start in first.locator(".tx-tool-args pre").text_content()
    )  # the full arguments stay one click away


@pytest.mark.parametrize(("status", "label"), [("error", "not run"), ("cancelled", "stopped")])
def test_ending_mid_tool_marks_the_tool_and_hides_dots(
    page: Any, mount_flow: Any, status: str, label: str
) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "tool_call", "id": "x", "name": "slow", "args": {}}])
    if status == "error":
        feed(page, [{"type": "error", "kind": "backend", "message": "The model provider is busy."}])
        assert page.locator(".tx-error").inner_text().endswith("The model provider is busy.")
    else:
        feed(page, [{"type": "done", "stop_reason": "cancelled"}])
        assert page.locator(".tx-stopped").is_visible()
    assert page.locator(".tx-dots").is_hidden()
    assert page.locator(".tx-tool .tx-tool-status").inner_text() == label


def test_timeout_hides_dots_and_says_so(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "content", "text": "partial"}])
    page.evaluate("() => window.flow.end('timeout')")
    assert page.locator(".tx-dots").is_hidden()
    assert "too long" in page.locator(".tx-error").inner_text()
    assert page.locator(".tx-content").inner_text().strip() == "partial"


def test_effects_notice(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "effects", "effects": [{"type": "flags_changed", "case_id": "c1"}]}])
    assert "flags changed" in page.locator(".tx-effects").inner_text()
    assert "c1" in page.locator(".tx-effects").inner_text()


def test_meter_shows_when_a_budget_is_set_and_warns_past_80_percent(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.setMeter({})")  # no budget
    assert page.locator(".tx-meter").is_hidden()
    page.evaluate(
        "() => window.flow.setMeter({per_minute_tokens: 0.5, monthly_usd: 0.93, per_hour_tokens: null})"
    )
    assert page.locator(".tx-meter").is_visible()
    items = page.evaluate(
        "() => [...document.querySelectorAll('.tx-meter-item')].map(i => [i.dataset.bucket, i.innerText,"
        " i.classList.contains('tx-high')])"
    )
    assert [(b, high) for b, _, high in items] == [("per_minute_tokens", False), ("monthly_usd", True)]
    assert "50%" in items[0][1] and "93%" in items[1][1]
    page.evaluate("() => window.flow.setMeter({})")
    assert page.locator(".tx-meter").is_hidden()


def test_load_renders_history_with_turns(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    history = [
        {"type": "user", "text": "first question"},
        *SCRIPTED[:-1],
        {"type": "user", "text": "second question"},
        {"type": "content", "text": "short answer"},
        usage(),
    ]
    page.evaluate("(h) => window.flow.load(h)", history)
    assert page.locator(".tx-bubble").all_inner_texts() == ["first question", "second question"]
    assert blocks(page) == [
        ["reasoning", "content", "tool", "usage", "reasoning", "content", "usage"],
        ["content", "usage"],
    ]
    assert page.evaluate("() => [...document.querySelectorAll('.tx-dots')].every(d => d.hidden)")
    page.evaluate("() => window.flow.clear()")
    assert page.locator(".tx-flow").count() == 0


def test_markdown_rendering(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    text = (
        "## Findings\n\nThe flow goes through `0xdef` and [Etherscan](https://etherscan.io/tx/0x1).\n\n"
        "- first hop\n- second hop\n\n```sql\nSELECT * FROM flags;\n```\n\n| flag | score |\n|---|---|\n| peel | 0.9 |\n"
    )
    # stream it in small pieces, as a model would
    feed(page, [{"type": "content", "text": text[i : i + 7]} for i in range(0, len(text), 7)])
    feed(page, [{"type": "done", "stop_reason": "end_turn"}])
    c = page.locator(".tx-content")
    assert c.locator("h4").inner_text() == "Findings"
    assert c.locator("p code").inner_text() == "0xdef"
    assert c.locator("a").get_attribute("href") == "https://etherscan.io/tx/0x1"
    assert c.locator("a").get_attribute("rel") == "noopener noreferrer nofollow"
    assert c.locator("ul li").all_inner_texts() == ["first hop", "second hop"]
    assert c.locator("pre code").inner_text() == "SELECT * FROM flags;"
    assert c.locator("td").all_inner_texts() == ["peel", "0.9"]
    assert c.locator(".tx-live").count() == 0


def test_input_box_sends_and_stops(page: Any, mount_flow: Any) -> None:
    mount_flow(page, {"showInput": True})
    box = page.locator(".tx-text")
    box.click()
    page.keyboard.type("Trace the stolen funds")
    page.keyboard.press("Enter")
    assert page.evaluate("() => window.sent") == ["Trace the stolen funds"]
    assert box.input_value() == ""
    page.evaluate("() => window.flow.startTurn('Trace the stolen funds')")
    assert page.locator(".tx-stop").is_visible()
    assert page.locator(".tx-send").is_disabled()
    page.locator(".tx-stop").click()
    assert page.evaluate("() => window.stops") == 1
    page.evaluate("() => window.flow.end('cancelled')")
    assert page.locator(".tx-stop").is_hidden()
    assert page.locator(".tx-send").is_enabled()


# -- untrusted content ---------------------------------------------------------------
XSS = [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=1">',
    "<svg onload=window.__xss=1></svg>",
    '<iframe src="javascript:window.__xss=1"></iframe>',
    '<a href="javascript:window.__xss=1">click</a>',
    "[click](javascript:window.__xss=1)",
    "[click](JaVaScRiPt:window.__xss=1)",
    "[click](java\tscript:window.__xss=1)",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html,<script>window.__xss=1</script>)",
    '<https://example.com/" onmouseover="window.__xss=1>',
    '**<img src=x onerror="window.__xss=1">**',
    '`<img src=x onerror="window.__xss=1">`',
    '<details open ontoggle="window.__xss=1">x</details>',
    '"><style>body{display:none}</style>',
    "| a | b |\n|---|---|\n| <img src=x onerror=window.__xss=1> | [x](javascript:window.__xss=1) |",
]


def test_xss_payloads_never_execute(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('<img src=x onerror=\"window.__xss=1\">')")
    chunks: list[dict[str, Any]] = []
    for i, payload in enumerate(XSS):
        chunks += [
            {"type": "reasoning", "text": payload},
            {"type": "content", "text": f"\n\n{payload}\n\n"},
            {"type": "tool_call", "id": f"x{i}", "name": payload, "args": {"q": payload, payload: 1}},
            {
                "type": "tool_result",
                "id": f"x{i}",
                "name": payload,
                "status": "ok",
                "result": {"html": payload},
            },
            {"type": "effects", "effects": [{"type": payload, "case_id": payload}]},
            {"type": "error", "message": payload, "kind": payload} if i == len(XSS) - 1 else usage(payload),
        ]
    # a raw tool call whose arguments were not JSON
    chunks.insert(0, {"type": "tool_call", "id": "raw", "name": "t", "args": None, "raw": XSS[1]})
    feed(page, chunks)
    page.evaluate("(h) => window.flow.load(h)", [{"type": "user", "text": XSS[0]}, *chunks])
    page.wait_for_timeout(300)  # give any smuggled onerror/onload a chance to fire
    page.evaluate("() => { for (const d of document.querySelectorAll('details')) d.open = true; }")
    page.wait_for_timeout(100)
    for a in page.locator("a").all():
        a.hover()
    assert page.evaluate("() => window.__xss") is None
    report = page.evaluate(
        """() => {
      const all = [...document.querySelectorAll('#root *')];
      return {
        handlers: all.flatMap(el => [...el.attributes].filter(a => a.name.startsWith('on')).map(a => el.tagName + ' ' + a.name)),
        tags: all.map(el => el.tagName.toLowerCase()).filter(t => ['script','img','svg','iframe','style','object','embed'].includes(t)),
        hrefs: all.filter(el => el.hasAttribute('href')).map(el => el.getAttribute('href')),
        rootVisible: getComputedStyle(document.body).display !== 'none',
      };
    }"""
    )
    assert report["handlers"] == []
    assert report["tags"] == []
    assert all(h.startswith(("https://", "http://", "mailto:")) for h in report["hrefs"]), report["hrefs"]
    assert report["rootVisible"]
    # the payloads are shown as text, not swallowed
    assert "<script>window.__xss=1</script>" in page.locator("#root").inner_text()
    assert page.console_errors == []


# -- case panels (widgets/panels.js) ---------------------------------------------------
PANEL_JS = """async ([base, data]) => {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = base + '/panels.css';
  document.head.appendChild(link);
  await new Promise((resolve) => { link.onload = resolve; link.onerror = resolve; });
  if (!window.TahrixCytoscape) {  // the graph library, as a plain script (ChatWidget joins it instead)
    const script = document.createElement('script');
    script.src = base + '/graph.bundle.js';
    document.head.appendChild(script);
    await new Promise((resolve) => { script.onload = resolve; script.onerror = resolve; });
  }
  const mod = await import(base + '/panels.js');
  const handlers = {};
  window.panelSent = [];
  window.panelModel = {
    data,
    get(k) { return this.data[k]; },
    on(ev, f) { (handlers[ev] ||= []).push(f); },
    off() {},
    send(msg) { window.panelSent.push(msg); },
    set(k, v) { this.data[k] = v; (handlers['change:' + k] || []).forEach(f => f()); },
  };
  mod.default.render({ model: window.panelModel, el: document.getElementById('root') });
  return true;
}"""

FLAG_ROWS = [
    {
        "flag_id": "f1",
        "flag_type": "peel_chain",
        "severity": "medium",
        "score": 0.5,
        "subject": "0xa",
        "status": "open",
    },
    {
        "flag_id": "f2",
        "flag_type": "mixer_exposure",
        "severity": "critical",
        "score": 0.97,
        "subject": "0xb",
        "status": "open",
    },
    {
        "flag_id": "f10",
        "flag_type": "dusting",
        "severity": "low",
        "score": 0.1,
        "subject": "0xc",
        "status": "dismissed",
    },
]


def mount_panel(pg: Any, widgets_url: str, data: dict[str, Any]) -> None:
    pg.goto(widgets_url + "/blank.html")
    pg.evaluate(PANEL_JS, [widgets_url, data])


def column(pg: Any, name: str) -> list[str]:
    return pg.locator(f".txp-table td.txp-{name}").all_inner_texts()


def test_flags_table_sorts_filters_and_refreshes(page: Any, widgets_url: str) -> None:
    mount_panel(page, widgets_url, {"kind": "flags", "raw": FLAG_ROWS, "title": "Flags", "error": ""})
    assert column(page, "flag_id") == ["f2", "f1", "f10"]  # most severe first
    page.locator('th[data-key="flag_id"]').click()
    assert column(page, "flag_id") == ["f1", "f2", "f10"]  # natural order: f2 before f10
    page.locator('th[data-key="flag_id"]').click()
    assert column(page, "flag_id") == ["f10", "f2", "f1"]
    page.locator('th[data-key="score"]').click()
    assert column(page, "score") == ["0.97", "0.50", "0.10"]
    page.locator(".txp-filter").fill("mixer")
    assert column(page, "flag_id") == ["f2"]
    assert page.locator(".txp-count").inner_text() == "1 of 3 flags"
    page.evaluate(
        "(rows) => window.panelModel.set('raw', rows)", [*FLAG_ROWS, {**FLAG_ROWS[1], "flag_id": "f3"}]
    )
    assert column(page, "flag_id") == ["f2", "f3"]  # the sort and the filter survive a refresh
    page.evaluate("() => window.panelModel.set('error', 'Could not load')")
    assert page.locator(".txp-error").inner_text() == "Could not load"
    assert page.console_errors == []


GRAPH = {
    "nodes": [
        {"id": "eth:0xthief", "label": "Exploiter", "category": "perpetrator"},
        {"id": "eth:0xhop", "label": None, "category": None, "address": "0xhop"},
        {"id": "eth:0xmix", "label": "Mixer pool", "category": "mixer"},
        {"id": "eth:0xcex", "label": "Exchange deposit", "category": "exchange"},
        {"id": "eth:0xloop", "label": "Loop back", "category": None},
    ],
    "edges": [
        {"source": "eth:0xthief", "target": "eth:0xhop", "usd": 1000000, "tx_hash": "0x1"},
        {"source": "eth:0xhop", "target": "eth:0xmix", "usd": 400000, "tx_hashes": ["0x2"]},
        {"source": "eth:0xhop", "target": "eth:0xcex", "usd": 600000, "amount": "600000", "asset": "USDC"},
        {"source": "eth:0xcex", "target": "eth:0xloop", "usd": 10},
        {"source": "eth:0xloop", "target": "eth:0xhop", "usd": 5},
        {"source": "eth:0xhop", "target": "eth:0xnowhere", "usd": 5},
    ],
}


CY = "document.querySelector('.txp-graph').__cy"


def test_flow_graph_is_layered_from_the_source(page: Any, widgets_url: str) -> None:
    mount_panel(
        page, widgets_url, {"kind": "graph", "graph": GRAPH, "title": "", "error": "", "can_trace": True}
    )
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length === 5")
    xs = page.evaluate(f"() => Object.fromEntries({CY}.nodes().map(n => [n.id(), n.position('x')]))")
    assert xs["eth:0xthief"] < xs["eth:0xhop"] < xs["eth:0xmix"]
    assert xs["eth:0xhop"] < xs["eth:0xcex"] < xs["eth:0xloop"]
    assert page.evaluate(f"() => {CY}.edges().length") == 5  # the edge to an unknown node is not drawn
    assert page.locator(".txp-count").inner_text() == "5 addresses · 5 flows"
    labels = page.evaluate(f"() => {CY}.edges().map(e => e.data('display'))")
    assert "600000 USDC · $600K" in labels and "$1M" in labels
    widths = page.evaluate(f"() => {CY}.edges().map(e => e.data('width'))")
    assert widths[0] == max(widths)
    nodes = page.evaluate(f"() => Object.fromEntries({CY}.nodes().map(n => [n.id(), n.data('display')]))")
    assert nodes["eth:0xthief"] == "Exploiter\n0xthief"  # label, then the short address
    assert nodes["eth:0xhop"] == "address\n0xhop"  # nothing better is known
    # pan and zoom are on; a click on a node shows its details and offers to trace onward
    assert page.evaluate(f"() => {CY}.userZoomingEnabled() && {CY}.userPanningEnabled()")
    box = page.locator(".txp-graph").bounding_box()
    pos = page.evaluate(f"() => {CY}.getElementById('eth:0xcex').renderedPosition()")
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    page.locator(".txp-details-title", has_text="Exchange deposit").wait_for()
    assert "exchange" in page.locator(".txp-drawer dl").inner_text()
    page.locator(".txp-trace").click()
    assert page.evaluate("() => window.panelSent") == [{"type": "trace", "node": "eth:0xcex"}]
    page.evaluate("() => window.panelModel.set('graph', {nodes: [], edges: []})")
    assert page.locator(".txp-empty").inner_text() == "No traced flows yet."
    assert page.console_errors == []


def test_flag_severities_have_distinct_colours(page: Any, widgets_url: str) -> None:
    rows = [{**FLAG_ROWS[0], "flag_id": s, "severity": s} for s in ("critical", "high", "medium", "low")]
    mount_panel(page, widgets_url, {"kind": "flags", "raw": rows, "title": "", "error": ""})
    colours = page.evaluate(
        "() => [...document.querySelectorAll('td.txp-severity')].map(td => getComputedStyle(td).color)"
    )
    assert len(set(colours)) == 4


def test_panels_treat_case_data_as_text(page: Any, widgets_url: str) -> None:
    evil = {**FLAG_ROWS[0], "subject": XSS[1], "flag_type": XSS[0], "status": XSS[3]}
    mount_panel(page, widgets_url, {"kind": "flags", "raw": [evil], "title": XSS[2], "error": XSS[1]})
    graph = {"nodes": [{"id": XSS[1], "label": XSS[0], "category": XSS[2]}, {"id": "b", "label": XSS[4]}],
             "edges": [{"source": XSS[1], "target": "b", "usd": 1, "tx_hash": XSS[1], "asset": XSS[0], "amount": 1}]}  # fmt: skip
    page.evaluate(PANEL_JS.replace("getElementById('root')", "body.appendChild(document.createElement('div'))"),
                  [widgets_url, {"kind": "graph", "graph": graph, "title": "", "error": ""}])  # fmt: skip
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length === 2")
    box = page.locator(".txp-graph").bounding_box()
    pos = page.evaluate(f"() => {CY}.nodes()[0].renderedPosition()")
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])  # the details box shows the label as text
    page.locator(".txp-details-title").wait_for()
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__xss") is None
    handlers = page.evaluate(
        "() => [...document.querySelectorAll('body *')].flatMap(el => [...el.attributes]"
        ".filter(a => a.name.startsWith('on')).map(a => a.name))"
    )
    assert handlers == []
    assert page.locator('script:not([src$="/graph.bundle.js"]), img, iframe').count() == 0
    assert XSS[0] in page.locator(".txp-table").inner_text()


def test_streaming_tail_continues_the_rendered_paragraph(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "content", "text": "Hello **wor"}])
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    # until the next frame the new tokens sit in the same paragraph, not on a line of their own
    # (pushed and read in one script, so no frame can run in between)
    state = page.evaluate(
        """() => { window.flow.push({type: 'content', text: 'ld** and more'});
           const ps = document.querySelectorAll('.tx-live p');
           return [ps.length, ps[0].textContent, document.querySelector('.tx-live').lastElementChild.tagName]; }"""
    )
    assert state == [1, "Hello **world** and more", "P"]
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.locator(".tx-live p strong").inner_text() == "world"
    feed(page, [{"type": "done", "stop_reason": "end_turn"}])
    assert page.locator(".tx-content p").inner_text() == "Hello world and more"


# -- the notebook glue (widgets/chat.js) with a stand-in anywidget model -------------
CHAT_JS = """async ([src, state]) => {
  // The module anywidget gets (ChatWidget._esm: the renderer's files joined, their relative
  // imports dropped), imported from a blob URL as anywidget does.
  const mod = await import(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
  const handlers = {};
  window.sentToKernel = [];
  window.model = {
    state,
    get(k) { return this.state[k]; },
    on(ev, f) { (handlers[ev] ||= []).push(f); },
    off(ev, f) { handlers[ev] = (handlers[ev] || []).filter(g => g !== f); },
    send(msg) { window.sentToKernel.push(msg); },
    // the kernel's side: a trait update (several keys at once) or a custom message
    update(changes) { Object.assign(this.state, changes); for (const k of Object.keys(changes)) (handlers['change:' + k] || []).forEach(f => f()); },
    message(msg) { (handlers['msg:custom'] || []).forEach(f => f(msg)); },
  };
  mod.default.render({ model: window.model, el: document.getElementById('root') });
  return true;
}"""


def tokens(start: int, end: int) -> list[dict[str, Any]]:
    return [{"type": "content", "text": f"t{i} "} for i in range(start, end)]


def test_chat_glue_draws_every_chunk_once_and_resyncs_gaps(page: Any, widgets_url: str) -> None:
    page.goto(widgets_url + "/blank.html")
    snapshot = [{"type": "user", "text": "q"}, {"type": "content", "text": "t0 t1 "}]  # covers 3 chunks
    page.evaluate(CHAT_JS, [ChatWidget._esm, {"chunks": snapshot, "seq": 3, "busy": True, "meter": {},
                                          "follow_up_mode": "keep"}])  # fmt: skip
    # a view that opens mid-run asks for what it may have missed
    assert page.evaluate("() => window.sentToKernel") == [{"type": "resync", "since": 3}]
    send = "(m) => window.model.message(m)"
    page.evaluate(send, {"type": "chunks", "from": 3, "to": 4, "chunks": tokens(2, 3)})
    page.evaluate(
        send, {"type": "chunks", "from": 1, "to": 4, "chunks": tokens(0, 3)}
    )  # already drawn: skipped
    page.evaluate(send, {"type": "chunks", "from": 6, "to": 7, "chunks": tokens(5, 6)})  # gap
    page.evaluate(send, {"type": "chunks", "from": 7, "to": 9, "chunks": tokens(6, 7)})  # same gap
    assert page.evaluate("() => window.sentToKernel.slice(1)") == [{"type": "resync", "since": 4}]
    page.evaluate(
        send, {"type": "chunks", "from": 4, "to": 9, "chunks": [{"type": "content", "text": "t3 t4 t5 t6 "}]}
    )
    text = "() => document.querySelector('.tx-content').textContent.trim()"
    assert page.evaluate(text) == "t0 t1 t2 t3 t4 t5 t6"
    page.evaluate(
        send, {"type": "chunks", "from": 9, "to": 10, "chunks": [{"type": "done", "stop_reason": "end_turn"}]}
    )
    # the run ends: the snapshot arrives with the seq this view has drawn, so it keeps its DOM
    page.evaluate("() => { window.block = document.querySelector('.tx-content'); }")
    merged = [{"type": "user", "text": "q"}, {"type": "content", "text": "t0 t1 t2 t3 t4 t5 t6 "},
              {"type": "done", "stop_reason": "end_turn"}]  # fmt: skip
    page.evaluate("(c) => window.model.update({chunks: c, seq: 10, busy: false})", merged)
    assert page.evaluate("() => window.block.isConnected")
    page.evaluate(
        send, {"type": "chunks", "from": 10, "to": 11, "chunks": [{"type": "user", "text": "next"}]}
    )
    assert page.locator(".tx-bubble").all_inner_texts() == ["q", "next"]
    # a snapshot this view is not at redraws from it, same content
    page.evaluate("(c) => window.model.update({chunks: c, seq: 10})", merged)
    assert not page.evaluate("() => window.block.isConnected")
    assert page.evaluate(text) == "t0 t1 t2 t3 t4 t5 t6"
    assert page.locator(".tx-bubble").all_inner_texts() == ["q"]
    # a resync answered with the whole snapshot (the view was older than the run) redraws too
    page.evaluate(
        send, {"type": "snapshot", "seq": 12, "chunks": [*merged, {"type": "user", "text": "again"}]}
    )
    assert page.locator(".tx-bubble").all_inner_texts() == ["q", "again"]
    assert page.console_errors == []


def test_chat_glue_text_box_and_stop_talk_to_the_kernel(page: Any, widgets_url: str) -> None:
    page.goto(widgets_url + "/blank.html")
    page.evaluate(CHAT_JS, [ChatWidget._esm, {"chunks": [], "seq": 0, "busy": False, "meter": {},
                                          "follow_up_mode": "replace"}])  # fmt: skip
    page.locator(".tx-text").click()
    page.keyboard.type("Where did the funds go?")
    page.locator(".tx-send").click()
    # the question shows at once, waiting for a kernel that may be busy in another cell
    assert page.locator(".tx-bubble").inner_text() == "Where did the funds go?"
    assert page.locator(".tx-waiting").inner_text() == "Waiting for the kernel…"
    assert page.locator(".tx-stop").is_visible()
    sent = page.evaluate("() => window.sentToKernel[1]")
    assert sent["type"] == "send" and sent["text"] == "Where did the funds go?" and sent["nonce"]
    # the kernel takes it: its user chunk names the nonce and is not drawn twice
    page.evaluate("(m) => window.model.message(m)", {"type": "chunks", "from": 0, "to": 1,
                  "chunks": [{"type": "user", "text": "Where did the funds go?", "nonce": sent["nonce"]}]})  # fmt: skip
    page.evaluate("() => window.model.update({busy: true})")
    assert page.locator(".tx-bubble").count() == 1
    assert page.locator(".tx-waiting").count() == 0
    page.locator(".tx-stop").click()
    assert page.evaluate("() => window.sentToKernel.slice(2)") == [{"type": "stop"}]
    page.evaluate("() => window.model.update({meter: {per_hour_tokens: 0.95}})")
    assert "95%" in page.locator(".tx-meter").inner_text()


# -- tool cards: headline, tables, chips, errors of any length ---------------------------------
HASH = "0xdebc108154af32affbad4bd60facd81f1e0cc6c418c08974519458f423f5a409"
MIXER = "0xe10c167dc8b6eaffb74b589be48e9e02a854c834"
BTC = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"


def trace_card() -> list[dict[str, Any]]:
    endpoints = [
        {"chain": "ethereum", "address": MIXER, "category": "mixing_service", "tainted_usd": 131_663_289.53,
         "evidence_count": 402, "tx_hashes": [HASH, "0x" + "ab" * 32, "0x" + "cd" * 32]},
        {"chain": "bitcoin", "address": BTC, "category": "exchange", "tainted_usd": 2_438_569.04,
         "evidence_count": 2, "tx_hashes": ["ef" * 32]},
    ]  # fmt: skip
    headline = "$167.1M traced · $138.6M reached 2 endpoints: mixer $131.7M, exchanges $2.4M"
    return [
        {"type": "tool_call", "id": "t", "name": "trace_funds", "args": {"start": MIXER, "max_hops": 4}},
        {"type": "tool_start", "id": "t", "name": "trace_funds"},
        {"type": "tool_result", "id": "t", "name": "trace_funds", "status": "ok", "duration_ms": 812,
         "result": {"headline": headline, "summary": {"traced_usd": 167_125_649.59}, "endpoints": endpoints}},
    ]  # fmt: skip


def test_a_tool_card_shows_the_headline_a_table_and_chips(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('Where did it go?')")
    feed(page, trace_card())
    card = page.locator(".tx-tool")
    assert (
        card.locator(".tx-tool-summary")
        .inner_text()
        .startswith("$167.1M traced · $138.6M reached 2 endpoints")
    )
    card.locator(".tx-tool-result > summary").click()
    table = card.locator(".tx-rtable", has_text="endpoints (2)")
    # the hashes follow the address; a row reads like a ledger
    heads = table.locator("th").all_inner_texts()
    assert heads[:5] == ["chain", "address", "tx hashes", "category", "tainted usd"]
    rows = table.locator("tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).locator("td").nth(4).inner_text() == "$131.7M"
    # chips: shortened, the whole value on hover, the chain's explorer
    mixer = rows.nth(0).locator(".tx-chip").first
    assert mixer.locator(".tx-chip-text").inner_text() == "0xe10c…c834"
    assert mixer.get_attribute("data-value") == MIXER
    assert mixer.locator("a").get_attribute("href") == f"https://etherscan.io/address/{MIXER}"
    assert rows.nth(0).locator(".tx-more").inner_text() == "+1"  # three hashes: two chips and a count
    btc = rows.nth(1).locator(".tx-chip")
    assert btc.nth(0).locator("a").get_attribute("href") == f"https://mempool.space/address/{BTC}"
    assert btc.nth(1).locator("a").get_attribute("href") == "https://mempool.space/tx/" + "ef" * 32
    # copy on click
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    mixer.locator(".tx-chip-text").click()
    page.wait_for_function("() => document.querySelector('.tx-chip.tx-copied') !== null")
    assert page.evaluate("() => navigator.clipboard.readText()") == MIXER
    # the raw JSON stays one click away
    assert MIXER in card.locator(".tx-tool-json pre").text_content()


def test_hashes_in_the_answer_are_chips(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "content", "text": f"The mixer {MIXER} received it in tx `{HASH}`.\n\nDone."},
                {"type": "done", "stop_reason": "end_turn"}])  # fmt: skip
    chips = page.locator(".tx-content .tx-chip")
    assert chips.count() == 2
    assert [c.get_attribute("data-kind") for c in chips.all()] == ["address", "tx"]
    # the chain is not said in running text: Blockscan searches every EVM explorer
    assert chips.nth(1).locator("a").get_attribute("href") == f"https://blockscan.com/tx/{HASH}"
    assert page.locator(".tx-content p").first.inner_text().startswith("The mixer 0xe10c…c834")


def test_run_sql_rows_render_as_a_table(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [
        {"type": "tool_call", "id": "s", "name": "run_sql", "args": {"query": "SELECT chain, count(*) AS n ..."}},
        {"type": "tool_result", "id": "s", "name": "run_sql", "status": "ok",
         "result": {"headline": "2 rows × 2 columns", "columns": ["chain", "n"], "rows": [["tron", 622], ["ethereum", 4370]]}},
    ])  # fmt: skip
    page.locator(".tx-tool-result > summary").click()
    assert page.locator(".tx-rtable tbody tr").all_inner_texts() == ["tron\t622", "ethereum\t4,370"]


def test_an_error_card_keeps_its_layout_for_a_long_error(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.set_viewport_size({"width": 700, "height": 600})
    page.evaluate("() => window.flow.startTurn('q')")
    model_text = "The tool 'annotate' changes case data and this session's grant is read-only. " * 3
    analyst = ("annotate was not run: this session's grant does not allow it. The assistant was told to describe "
               "the change for you to make or to allow. " + "More words to make it long. " * 3)  # fmt: skip
    assert len(analyst) >= 200
    feed(page, [
        {"type": "tool_call", "id": "e", "name": "annotate",
         "args": {"target_kind": "flag", "target": "FLG-60401e4871", "action": "confirm_flag",
                  "payload": {"note": "Peel chain confirmed against the trace " * 4}}},
        {"type": "tool_result", "id": "e", "name": "annotate", "status": "error", "duration_ms": 4,
         "result": {"error": {"type": "denied", "message": model_text}}, "analyst_message": analyst},
    ])  # fmt: skip
    card = page.locator(".tx-tool")
    line_height = page.evaluate(
        "() => parseFloat(getComputedStyle(document.querySelector('.tx-tool-status')).lineHeight)"
    )
    for part in (".tx-tool-head", ".tx-tool-status", ".tx-tool-duration", ".tx-tool-error"):
        height = card.locator(part).bounding_box()["height"]
        assert height < 2 * line_height, f"{part} wraps: {height}px"
    assert card.locator(".tx-tool-status").inner_text() == "error"
    assert card.locator(".tx-tool-duration").inner_text() == "4 ms"
    # the analyst's sentence, cut with an ellipsis; whole on a click; the model's text stays in the JSON
    error = card.locator(".tx-tool-error")
    assert error.inner_text() == analyst.strip() or error.inner_text() == analyst
    assert page.evaluate(
        "() => { const e = document.querySelector('.tx-tool-error'); return e.scrollWidth > e.clientWidth; }"
    )
    error.click()
    assert error.bounding_box()["height"] > 2 * line_height
    assert model_text.strip() in card.locator(".tx-tool-json pre").text_content()


def test_an_error_row_shows_its_details_on_demand(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('q')")
    feed(page, [{"type": "error", "kind": "backend", "message": "Something went wrong while talking to the model provider.",
                 "details": "ERROR tahrix_lab.agent.loop: backend fake failed (status=None): script ran out"}])  # fmt: skip
    details = page.locator(".tx-error .tx-error-details")
    assert details.locator("pre").is_hidden()
    details.locator("summary").click()
    assert "script ran out" in details.locator("pre").inner_text()
