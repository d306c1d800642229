"""The fund-flow graph in real Chromium on a bare page (fast), and with the flags panel in real
JupyterLab (the flags panel on its own: test_flags_browser.py).

Cytoscape draws on a canvas, so a test asks the graph where a node is drawn
(``renderedPosition()`` plus the container's box) and clicks there with the
real mouse, after scrolling what scrolls in a notebook (its panel, not the
window). Legibility is measured: font-size × zoom of the node labels at Fit.
Screenshots of what an analyst sees go to docs/screens/ with TAHRIX_SCREENSHOTS=docs.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.case.workspace import Workspace
from tahrix_lab.lab.panels import FlagsPanel, FlowGraphPanel
from tests.e2e.test_jupyterlab_widget import ARTIFACTS, open_notebook
from tests.e2e.test_notebook_01_browser import run_all
from tests.e2e.test_renderer_browser import PANEL_JS

pytestmark = pytest.mark.e2e

# docs/screens/ is written only when asked (TAHRIX_SCREENSHOTS=docs), so a test run leaves the tree clean
SCREENS = (
    Path(__file__).resolve().parents[2] / "docs" / "screens"
    if os.environ.get("TAHRIX_SCREENSHOTS") == "docs"
    else Path(tempfile.mkdtemp(prefix="tahrix-screens-"))
)
CY = "document.querySelector('.txp-graph').__cy"
MIN_PX = 10.0  # widgets/panels.js MIN_READABLE_PX
FONT_AT_FIT = f"() => parseFloat({CY}.nodes()[0].style('font-size')) * {CY}.zoom()"
POOL = "bsc:0xb16107f1be437c7ba6caf4a341023aed54ef125a"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The panels' synced state for the sample case, as the kernel would send it."""
    ws = Workspace(tmp_path_factory.mktemp("graph") / "case.duckdb")
    case_id = ws.load_sample_case()
    graph = FlowGraphPanel.for_case(ws, case_id, max_hops=4, min_usd=1000)
    flags = FlagsPanel.for_case(ws, case_id)
    out = {"graph": graph.graph, "rows": flags.rows, "raw": flags.raw, "triage": ws.triage(case_id)}
    graph.close()
    flags.close()
    ws.close()
    return out


def mount(pg: Any, widgets_url: str, data: dict[str, Any], *, scroller: bool = False) -> None:
    """The panel on a bare page; with ``scroller`` moved, once drawn, into a scrolling box between two
    tall spacers, as anywidget draws an output before JupyterLab puts it in its scrolling panel (so
    the box is not among the ancestors Cytoscape saw when it started)."""
    pg.set_viewport_size({"width": 1400, "height": 1000})
    pg.goto(widgets_url + "/blank.html")
    state = {
        "title": "",
        "error": "",
        "focus_request": {},
        "can_trace": True,
        "added": [],
        "note": "",
        **data,
    }
    pg.evaluate(PANEL_JS, [widgets_url, state])
    if scroller:
        pg.evaluate("""() => {
          const s = document.createElement('div');
          s.id = 'scroller';
          s.style.cssText = 'height: 900px; overflow: auto; border: 1px solid #ccc';
          const top = document.createElement('div'); top.style.height = '1200px';
          const bottom = document.createElement('div'); bottom.style.height = '1200px';
          const root = document.getElementById('root');
          document.body.appendChild(s); s.append(top, root, bottom);
        }""")


def click_node(pg: Any, node_id: str) -> None:
    box = pg.locator(".txp-graph").bounding_box()
    pos = pg.evaluate(f"(id) => {CY}.getElementById(id).renderedPosition()", node_id)
    pg.evaluate(
        f"() => {{ window.__taps = []; {CY}.one('tap', e => window.__taps.push(e.target === {CY} ? 'core' : e.target.id())); }}"
    )
    pg.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    pg.__clicked = {"node": node_id, "at": (box["x"] + pos["x"], box["y"] + pos["y"]), "box": box, "pos": pos}


def wait_for_details(pg: Any, name: str) -> None:
    """The drawer shows ``name``'s details; if it never does, say what the last click hit."""
    try:
        pg.locator(".txp-drawer.open .txp-details-title", has_text=name).wait_for()
    except Exception as exc:
        x, y = pg.__clicked["at"]
        seen = pg.evaluate(
            f"""(id) => ({{taps: window.__taps, drawer: document.querySelector('.txp-drawer').className,
              title: (document.querySelector('.txp-details-title') || {{}}).textContent,
              at: document.elementFromPoint({x}, {y})?.tagName, pos: {CY}.getElementById(id).renderedPosition(),
              box: document.querySelector('.txp-graph').getBoundingClientRect().toJSON()}})""",
            pg.__clicked["node"],
        )
        raise AssertionError(f"no {name!r} details after clicking {pg.__clicked}: {seen}") from exc


def click_edge(pg: Any, selector: str) -> dict[str, Any]:
    box = pg.locator(".txp-graph").bounding_box()
    mid = pg.evaluate(
        f"() => {{ const e = {CY}.edges('{selector}')[0]; return {{...e.renderedMidpoint(), raw: e.data('raw')}}; }}"
    )
    pg.mouse.click(box["x"] + mid["x"], box["y"] + mid["y"])
    return dict(mid["raw"])


def test_graph_reads_at_fit_and_clicks_land_after_scrolling(page: Any, widgets_url: str, sample: Any) -> None:
    mount(page, widgets_url, {"kind": "graph", "graph": sample["graph"]}, scroller=True)
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length === {len(sample['graph']['nodes'])}")
    page.locator(".txp-graph").scroll_into_view_if_needed()
    page.locator(".txp-fit").click()
    assert page.evaluate(FONT_AT_FIT) >= MIN_PX - 1e-6
    # names, never "start" or "unlabelled"
    names = page.evaluate(f"() => {CY}.nodes().map(n => n.data('display').split('\\n')[0])")
    assert "perpetrator" in names and "suspect" in names
    assert not {"start", "unlabelled"} & set(names)
    # edge labels never overlap each other or a node
    boxes = page.evaluate(
        f"() => {CY}.edges(':visible').filter(e => !e.hasClass('txp-nolabel')).map(e => e.boundingBox("
        "{includeNodes: false, includeEdges: false, includeLabels: true}))"
    )
    nodes = page.evaluate(f"() => {CY}.nodes().map(n => n.boundingBox({{includeLabels: false}}))")
    hit = lambda a, b: a["x1"] < b["x2"] and b["x1"] < a["x2"] and a["y1"] < b["y2"] and b["y1"] < a["y2"]  # noqa: E731
    assert boxes and not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] + nodes if hit(a, b)]

    click_node(page, "ethereum:0x1983968a3f592f44f8d31f1a41570ee7a8143bd1")  # caches the container's place
    page.locator(".txp-drawer.open .txp-details-title").wait_for()
    page.locator(".txp-close").click()
    perp = "ethereum:0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"
    # The box scrolls, not the window: by 260 px, or less if the perpetrator would leave the box's
    # visible part (where a click is the page's, not the graph's): its place depends on the layout.
    scrolled = page.evaluate(
        f"""(id) => {{ const s = document.getElementById('scroller');
          const y = document.querySelector('.txp-graph').getBoundingClientRect().top
            + {CY}.getElementById(id).renderedPosition().y;
          const by = Math.round(Math.min(260, y - s.getBoundingClientRect().top - 60));
          s.scrollTop += by; return by; }}""",
        perp,
    )
    assert scrolled >= 100, scrolled  # far enough that a stale cached place would miss the node
    click_node(page, perp)
    wait_for_details(page, "perpetrator")
    drawer = page.locator(".txp-drawer").inner_text()
    for want in ("traced out", "case in", "Flags (3)", "copy", "explorer ↗", "Trace onward from here"):
        assert want in drawer, want
    # wheel zoom keeps the point under the pointer where it was
    box = page.locator(".txp-graph").bounding_box()
    before = page.evaluate(f"(id) => {CY}.getElementById(id).renderedPosition()", perp)
    zoom = page.evaluate(f"() => {CY}.zoom()")
    # Cytoscape leaves the wheel to the page for 250 ms after a page scroll (no zoom hijack mid-scroll)
    page.wait_for_function(f"() => !{CY}.renderer().scrollingPage")
    page.mouse.move(box["x"] + before["x"], box["y"] + before["y"])
    page.mouse.wheel(0, -200)
    page.wait_for_function(f"() => {CY}.zoom() > {zoom}")
    after = page.evaluate(f"(id) => {CY}.getElementById(id).renderedPosition()", perp)
    assert abs(after["x"] - before["x"]) < 3 and abs(after["y"] - before["y"]) < 3
    assert page.console_errors == []


def test_a_node_never_reads_tainted_0_where_taint_passed(page: Any, widgets_url: str, sample: Any) -> None:
    """No taint arrives at the trace's start (it sends it) and a swap router passes it on: "tainted $0"
    there would read as "no stolen funds here"."""
    mount(page, widgets_url, {"kind": "graph", "graph": sample["graph"]})
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length === {len(sample['graph']['nodes'])}")
    shown = page.evaluate(f"() => Object.fromEntries({CY}.nodes().map(n => [n.id(), n.data('display')]))")
    nodes = {n["id"]: n for n in sample["graph"]["nodes"]}
    perp = "ethereum:0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"
    router = next(i for i, n in nodes.items() if n["category"] == "defi_dex" and n["tainted_usd"] == 0)
    assert nodes[perp]["hop"] == 0 and nodes[perp]["tainted_usd"] == 0  # the trace's start
    assert shown[perp].endswith("trace start") and shown[router].endswith("swap: passed on")
    assert not [i for i, text in shown.items() if "tainted $0" in text]
    assert all(
        "tainted " in shown[i] for i, n in nodes.items() if (n.get("tainted_usd") or 0) > 0
    )  # the others keep their figure
    click_node(page, perp)
    wait_for_details(page, "perpetrator")
    row = page.locator(".txp-drawer dt", has_text="tainted").locator("xpath=following-sibling::dd[1]")
    assert row.inner_text() == "trace start"
    assert page.console_errors == []


def test_an_edge_click_lists_its_transactions(page: Any, widgets_url: str, sample: Any) -> None:
    mount(page, widgets_url, {"kind": "graph", "graph": sample["graph"]})
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length > 3")
    raw = click_edge(page, '[kind = "bridge"]')
    page.locator(".txp-drawer.open .txp-txs").wait_for()
    rows = page.locator(".txp-drawer .txp-tx")
    assert rows.count() == 2  # the two legs of the crossing
    assert "bridge crossing (stargate" in page.locator(".txp-drawer dl").inner_text()
    links = page.locator(".txp-drawer .txp-tx a.txp-link")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert hrefs == [t["explorer"] for t in raw["txs"]] and hrefs[0].startswith(
        ("https://etherscan.io/tx/", "https://bscscan.com/tx/")
    )
    raw = click_edge(page, '[short *= "×"]')  # an edge that stands for several transfers
    page.locator(".txp-drawer .txp-details-title", has_text="→").wait_for()
    assert (
        raw["transfers"] > 1
        and f"Transactions ({raw['transfers']})" in page.locator(".txp-drawer").inner_text()
    )
    assert page.locator(".txp-drawer .txp-tx").count() == len(raw["txs"])
    first = page.locator(".txp-drawer .txp-tx").first.inner_text()
    assert raw["txs"][0]["tx_hash"][:6] in first and raw["txs"][0]["symbol"] in first
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "graph-edge.png"))
    assert page.console_errors == []


def test_filters_legend_zoom_and_focus(page: Any, widgets_url: str, sample: Any) -> None:
    mount(page, widgets_url, {"kind": "graph", "graph": sample["graph"]})
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length > 3")
    legend = page.locator(".txp-legend").inner_text()
    for want in (
        "perpetrator",
        "suspect",
        "exchange",
        "mixer",
        "bridge",
        "transfer",
        "swap (DEX)",
        "bridge crossing",
    ):
        assert want in legend
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "graph-fit.png"))
    zoom = page.evaluate(f"() => {CY}.zoom()")
    page.locator(".txp-zoom-in").click()
    assert page.evaluate(f"() => {CY}.zoom()") == pytest.approx(zoom * 1.25)
    page.locator(".txp-filters-toggle").click()
    page.locator(".txp-min-usd").fill("1000000")
    page.locator(".txp-min-usd").dispatch_event("change")
    shown = page.evaluate(f"() => {CY}.edges(':visible').map(e => e.data('raw').usd)")
    assert shown and min(shown) >= 1_000_000
    page.locator(".txp-asset").select_option("USDC")
    assert page.evaluate(f"() => {CY}.edges(':visible').length") == 1  # the swap in
    page.locator(".txp-reset").click()
    assert page.evaluate(f"() => {CY}.edges(':visible').length") == len(sample["graph"]["edges"])
    # focus from Python: a new focus_request selects, centres and opens the node
    page.evaluate(
        "() => window.panelModel.set('focus_request', {n: 1, ids: ['ethereum:0x17420e940144702bc6b789ef81365acc3f88af59']})"
    )
    page.locator(".txp-drawer.open .txp-details-title", has_text="suspect").wait_for()
    assert page.evaluate(f"() => {CY}.$(':selected').map(n => n.id())") == [
        "ethereum:0x17420e940144702bc6b789ef81365acc3f88af59"
    ]
    assert page.console_errors == []


def test_trace_onward_keeps_the_selection_and_shows_what_it_added(
    page: Any, widgets_url: str, sample: Any
) -> None:
    graph = sample["graph"]
    smaller = {**graph, "nodes": [n for n in graph["nodes"] if n["id"] != POOL],
               "edges": [e for e in graph["edges"] if POOL not in (e["source"], e["target"])]}  # fmt: skip
    mount(page, widgets_url, {"kind": "graph", "graph": smaller})
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length > 3")
    hop = "bsc:0x1983968a3f592f44f8d31f1a41570ee7a8143bd1"
    click_node(page, hop)
    page.locator(".txp-trace").click()
    assert page.evaluate("() => window.panelSent") == [{"type": "trace", "node": hop}]
    page.evaluate(
        "([g, pool]) => { window.panelModel.data.added = [pool]; window.panelModel.data.note = 'Traced onward';"
        " window.panelModel.set('graph', g); }",
        [graph, POOL],
    )
    page.wait_for_function(f"() => {CY}.nodes().length === {len(graph['nodes'])}")
    assert page.evaluate(f"() => {CY}.$(':selected').map(n => n.id())") == [hop]
    assert "hop 2" in page.locator(".txp-drawer.open .txp-details-title").inner_text()
    # the new node is in view (focused on what was added, not a re-fit of everything)
    pos = page.evaluate(f"(id) => {CY}.getElementById(id).renderedPosition()", POOL)
    size = page.evaluate(f"() => [{CY}.width(), {CY}.height()]")
    assert 0 < pos["x"] < size[0] and 0 < pos["y"] < size[1]
    assert page.evaluate(f"(id) => {CY}.getElementById(id).hasClass('txp-added')", POOL)
    assert page.locator(".txp-note").inner_text() == "Traced onward"
    # a trace that finds nothing new sends no graph: the note alone brings the button back
    page.locator(".txp-trace").click()
    assert page.locator(".txp-trace").inner_text() == "Tracing…"
    page.evaluate("() => window.panelModel.set('note', 'Traced onward from hop 2: nothing new.')")
    assert page.locator(".txp-trace").inner_text() == "Trace onward from here"
    assert page.locator(".txp-note").inner_text() == "Traced onward from hop 2: nothing new."
    assert page.console_errors == []


# -- real JupyterLab: the notebook scrolls its panel, not the window ---------------------------------
NOTEBOOK = [
    "print('\\n'.join(f'line {i}' for i in range(60)))  # enough above the graph to scroll",
    """from tahrix_lab.case.workspace import Workspace
from tahrix_lab.lab import FlagsPanel, FlowGraphPanel
ws = Workspace({db!r})
case_id = ws.load_sample_case()
flags = FlagsPanel.for_case(ws, case_id)
graph = FlowGraphPanel.for_case(ws, case_id, max_hops=4, min_usd=1000)
flags.link(graph)
graph""",
    "flags",
    "print('\\n'.join(f'line {i}' for i in range(60)))  # and below it",
]


def scroll_graph_to_mid_page(page: Any) -> None:
    page.evaluate("""() => {
      const g = document.querySelector('.txp-graph');
      let s = g.parentElement;
      while (s && !(s.scrollHeight > s.clientHeight && /(auto|scroll)/.test(getComputedStyle(s).overflowY))) s = s.parentElement;
      const want = g.getBoundingClientRect().top - s.getBoundingClientRect().top - (s.clientHeight - g.clientHeight) / 2;
      s.scrollTop += want;
    }""")
    page.wait_for_timeout(300)


def test_graph_and_flags_in_jupyterlab(jupyter_lab: Any, page: Any) -> None:
    page.set_viewport_size({"width": 1400, "height": 1000})
    db = jupyter_lab.root / "graph.duckdb"
    jupyter_lab.write_notebook("graph.ipynb", [c.replace("{db!r}", repr(str(db))) for c in NOTEBOOK])
    try:
        open_notebook(page, jupyter_lab, "graph.ipynb")
        run_all(page)
        page.wait_for_function(
            "() => { const g = document.querySelector('.txp-graph'); return g && g.__cy && g.__cy.nodes().length > 10; }",
            timeout=120_000,
        )
        page.locator(".txp-triage tr.txp-row").first.wait_for()
        with Workspace(jupyter_lab.root / "check.duckdb") as ws:
            triage = ws.triage(ws.load_sample_case())
        rows = page.locator(".txp-triage tr.txp-row")
        assert [rows.nth(i).get_attribute("data-row") for i in range(rows.count())] == [
            r["row_id"] for r in triage["rows"]
        ]
        scroll_graph_to_mid_page(page)
        assert page.evaluate("() => window.scrollY") == 0  # JupyterLab scrolled its panel
        page.locator(".txp-fit").click()
        px = page.evaluate(FONT_AT_FIT)
        assert px >= MIN_PX - 1e-6, px
        perp = "ethereum:0x33736dcca7f0c99e80b5244a4767e1fa79823eb2"
        click_node(page, perp)
        page.locator(".txp-drawer.open .txp-details-title", has_text="perpetrator").wait_for()
        page.locator(".txp-close").click()
        # scroll again by a little, then click an edge where it is drawn now
        page.evaluate("() => { const g = document.querySelector('.txp-graph'); let s = g.parentElement;"
                      " while (s && s.scrollHeight <= s.clientHeight) s = s.parentElement; s.scrollTop += 120; }")  # fmt: skip
        page.wait_for_timeout(200)
        raw = click_edge(page, '[kind = "transfer"]')
        page.locator(".txp-drawer.open .txp-txs").wait_for()
        assert page.locator(".txp-drawer .txp-tx").count() == len(raw["txs"])
        # a flag row click highlights its subject in the graph (through the kernel)
        suspect = next(r for r in triage["rows"] if r["role"] == "suspect")
        page.locator(f'tr.txp-row[data-row="{suspect["row_id"]}"]').click()
        page.wait_for_function(
            f"() => {CY}.$('.txp-focus').map(n => n.id()).join() === {json.dumps(','.join(suspect['addresses']))}"
        )
        scroll_graph_to_mid_page(page)
        page.locator(".txp-panel[data-kind='graph']").screenshot(path=str(SCREENS / "graph-node.png"))
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        print(
            page.evaluate(
                "() => [...document.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText.slice(0, 500))"
            )
        )
        print(page.console_errors)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab-graph-failure.png"), full_page=True)
        raise
    finally:
        jupyter_lab.shutdown_kernels()


def test_counts_read_in_the_singular_for_one(page: Any, widgets_url: str) -> None:
    """ "1 flows" and "1 transfers" read as careless; one is singular everywhere the panels count."""
    a, b = "0x" + "a1" * 20, "0x" + "b2" * 20
    graph = {
        "nodes": [
            {"id": f"ethereum:{a}", "chain": "ethereum", "address": a, "role": "perpetrator", "hop": 0,
             "tainted_usd": 0.0, "in_usd": 10.0, "in_count": 1, "out_usd": 10.0, "out_count": 1},
            {"id": f"ethereum:{b}", "chain": "ethereum", "address": b, "hop": 1, "tainted_usd": 10.0},
        ],
        "edges": [{"source": f"ethereum:{a}", "target": f"ethereum:{b}", "usd": 10.0, "transfers": 1}],
    }  # fmt: skip
    mount(page, widgets_url, {"kind": "graph", "graph": graph})
    assert page.locator(".txp-count").inner_text() == "2 addresses · 1 flow"
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length === 2")
    click_node(page, f"ethereum:{a}")
    wait_for_details(page, "perpetrator")
    drawer = page.locator(".txp-drawer").inner_text()
    assert "· 1 flow\n" in drawer + "\n" and "· 1 transfer\n" in drawer + "\n"
    assert not re.search(r"\b1 (flows|transfers)\b", drawer)
    assert page.console_errors == []


OUTSIDE = f"""() => {{ const cy = {CY}, v = cy.extent();
  return cy.nodes().filter(n => {{ const b = n.boundingBox({{includeLabels: false}});
    return !n.hasClass('txp-hidden') && (b.x1 < v.x1 || b.x2 > v.x2 || b.y1 < v.y1 || b.y2 > v.y2); }}).length; }}"""


def test_a_graph_wider_than_its_panel_says_what_is_out_of_view(
    page: Any, widgets_url: str, sample: Any
) -> None:
    """Fit stops at readable text, so in a narrow panel part of the graph opens out of view: the
    panel says how many addresses are not wholly in view, "Show all" brings them in, and the note
    goes when every one is."""
    mount(page, widgets_url, {"kind": "graph", "graph": sample["graph"]})
    page.set_viewport_size({"width": 560, "height": 1000})  # the service page's graph is about this wide
    page.wait_for_function(f"() => {CY} && {CY}.nodes().length > 3")
    page.locator(".txp-fit").click()
    pill = page.locator(".txp-outside")
    pill.wait_for()
    out = page.evaluate(OUTSIDE)
    assert out > 0
    page.wait_for_function(
        "(n) => document.querySelector('.txp-outside').textContent.startsWith(n + ' address')", arg=out
    )
    assert "cut off or out of view: drag to pan" in pill.inner_text()
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "graph-outside.png"))
    # drag the graph: the count follows the view
    box = page.locator(".txp-graph").bounding_box()
    page.mouse.move(box["x"] + 40, box["y"] + 60)  # an empty corner: the drag pans, not a node
    page.mouse.down()
    page.mouse.move(box["x"] - 200, box["y"] + 60, steps=8)
    page.mouse.up()
    moved = page.evaluate(OUTSIDE)
    page.wait_for_function(
        "(n) => n === 0 ? document.querySelector('.txp-outside').hidden"
        " : document.querySelector('.txp-outside').textContent.startsWith(n + ' address')",
        arg=moved,
    )
    page.locator(".txp-show-all").click()
    page.wait_for_function("() => document.querySelector('.txp-outside').hidden")
    assert page.evaluate(OUTSIDE) == 0
    page.locator(".txp-fit").click()  # readable again: part of the graph out of view again
    page.wait_for_function("() => !document.querySelector('.txp-outside').hidden")
    page.set_viewport_size({"width": 2400, "height": 1000})  # wide enough for all at readable size
    page.locator(".txp-fit").click()
    page.wait_for_function("() => document.querySelector('.txp-outside').hidden")
    assert page.evaluate(OUTSIDE) == 0
    assert page.console_errors == []
