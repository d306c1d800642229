"""The flags panel in real Chromium, on a bare page: the triage rows and their evidence, the
analyst's Confirm / Dismiss, and a panel narrower than the table's columns (the service page's
side). The fund-flow graph's own tests, and both panels in JupyterLab, are in test_graph_browser.
Screenshots of what an analyst sees go to docs/screens/ with TAHRIX_SCREENSHOTS=docs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_graph_browser import SCREENS, mount, sample  # noqa: F401  (sample: the panels' state)

pytestmark = pytest.mark.e2e


def test_flags_panel_opens_on_triage_and_a_row_shows_its_evidence(
    page: Any,
    widgets_url: str,
    sample: Any,  # noqa: F811
) -> None:
    mount(
        page, widgets_url, {"kind": "flags", "rows": sample["rows"], "raw": sample["raw"], "title": "Flags"}
    )
    rows = page.locator(".txp-triage tr.txp-row")
    assert [rows.nth(i).get_attribute("data-row") for i in range(rows.count())] == [
        r["row_id"] for r in sample["triage"]["rows"]
    ]
    perp = next(r for r in sample["rows"] if r["role"] == "perpetrator")
    row = page.locator(f'tr.txp-row[data-row="{perp["row_id"]}"]')
    cells = row.inner_text()
    for want in ("perpetrator", "ethereum", "$21.5M", "new", perp["explanation"][:20]):
        assert want in cells, want
    row.click()
    evidence = page.locator(f'tr.txp-evidence[data-row="{perp["row_id"]}"]')
    assert evidence.locator(".txp-flag").count() == perp["flag_count"]
    assert page.evaluate("() => window.panelSent") == [{"type": "select", "row_id": perp["row_id"]}]
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "flags-triage.png"))
    page.locator(".txp-view").click()  # raw view one click away
    assert page.locator(".txp-table tbody tr").count() == len(sample["raw"])
    # focus(flag_id) from Python opens the row that holds it
    other = sample["rows"][5]
    page.evaluate(
        "(f) => window.panelModel.set('focus_request', {n: 1, row_id: f.row_id, flag_id: f.flag_id})",
        {"row_id": other["row_id"], "flag_id": other["flags"][0]["flag_id"]},
    )
    page.locator(f'tr.txp-evidence[data-row="{other["row_id"]}"] .txp-flag.txp-selected').wait_for()
    assert page.console_errors == []


def test_confirm_and_dismiss_on_a_flag_send_the_analysts_decision(
    page: Any,
    widgets_url: str,
    sample: Any,  # noqa: F811
) -> None:
    data = {"kind": "flags", "rows": sample["rows"], "raw": sample["raw"], "title": "Flags"}
    perp = next(r for r in sample["rows"] if r["role"] == "perpetrator")
    mount(page, widgets_url, data)  # a panel made without an analyst: no buttons
    page.locator(f'tr.txp-row[data-row="{perp["row_id"]}"]').click()
    assert (
        page.locator(f'tr.txp-evidence[data-row="{perp["row_id"]}"] .txp-flag').count() == perp["flag_count"]
    )
    assert page.locator(".txp-decide").count() == 0

    mount(page, widgets_url, {**data, "can_decide": True})
    page.locator(f'tr.txp-row[data-row="{perp["row_id"]}"]').click()
    first = page.locator(f'tr.txp-evidence[data-row="{perp["row_id"]}"] .txp-flag').first
    assert first.locator(".txp-decide").all_inner_texts() == ["Confirm", "Dismiss"]
    first.locator('.txp-decide[data-action="confirm_flag"]').click()
    sent = page.evaluate("() => window.panelSent")
    assert sent[-1] == {"type": "decide", "flag_id": perp["flags"][0]["flag_id"], "action": "confirm_flag"}
    assert sent[-2]["type"] == "select"  # the click on the button did not toggle the row again
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "flags-decide.png"))
    assert first.locator(".txp-decide:disabled").count() == 2  # once: until the kernel redraws the row
    # the kernel could not record it: the panel says so and the buttons come back
    page.evaluate(
        "() => window.panelModel.set('error', 'Confirming it was not recorded: the record is down')"
    )
    first = page.locator(f'tr.txp-evidence[data-row="{perp["row_id"]}"] .txp-flag').first
    assert first.locator(".txp-decide:not(:disabled)").count() == 2
    assert page.console_errors == []


def test_the_last_decision_can_be_undone_from_the_panel(
    page: Any,
    widgets_url: str,
    sample: Any,  # noqa: F811
) -> None:
    """A dismissed flag leaves the triage: the notice above it names the decision and offers Undo."""
    data = {
        "kind": "flags",
        "rows": sample["rows"],
        "raw": sample["raw"],
        "title": "Flags",
        "can_decide": True,
    }
    mount(page, widgets_url, data)
    notice = page.locator(".txp-notice")
    assert notice.is_hidden()
    row = sample["rows"][1]
    flag = row["flags"][0]
    flag_id = flag["flag_id"]
    page.locator(f'tr.txp-row[data-row="{row["row_id"]}"]').click()
    page.locator(f'.txp-flag[data-flag="{flag_id}"] .txp-decide[data-action="dismiss_flag"]').click()
    assert page.evaluate("() => window.panelSent")[-1]["type"] == "decide"
    # the kernel recorded it: the rows without the flag, and the decision with its audit id
    page.evaluate(
        """([f, rows]) => { window.panelModel.set('rows', rows);
          window.panelModel.set('last_decision', {flag_id: f, action: 'dismiss_flag', audit_id: 'AUD-1'}); }""",
        [flag_id, [r for r in sample["rows"] if r["row_id"] != row["row_id"]]],
    )
    kind = flag["flag_type"].replace("_", " ")
    assert notice.is_visible() and notice.inner_text().startswith(f"Dismissed {flag_id} ({kind}).")
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "flags-undo.png"))
    notice.locator(".txp-undo").click()
    assert page.evaluate("() => window.panelSent")[-1] == {"type": "undo"}
    assert notice.locator(".txp-undo:disabled").count() == 1  # once
    page.evaluate("() => window.panelModel.set('last_decision', {})")  # the kernel took it back
    assert notice.is_hidden()
    # a decision the kernel did not get an audit id for (a custom decide) offers no Undo
    page.evaluate(
        "(f) => window.panelModel.set('last_decision', {flag_id: f, action: 'confirm_flag'})", flag_id
    )
    assert notice.is_hidden()
    assert page.console_errors == []


def test_a_narrow_flags_panel_keeps_why_in_view(
    page: Any,
    widgets_url: str,
    sample: Any,  # noqa: F811
) -> None:
    """The service page's side panel (615 px at 1280-1440 px windows) is narrower than the
    triage's columns: the time and why move under the label, nothing runs off the panel's edge."""
    mount(
        page, widgets_url, {"kind": "flags", "rows": sample["rows"], "raw": sample["raw"], "title": "Flags"}
    )
    perp = next(r for r in sample["rows"] if r["role"] == "perpetrator")
    row = page.locator(f'tr.txp-row[data-row="{perp["row_id"]}"]')
    scroll = page.locator(".txp-triage-scroll")
    wide = scroll.evaluate("s => s.scrollWidth <= s.clientWidth")
    assert wide and row.locator("td.txp-explanation").is_visible()  # wide: the why column
    assert not row.locator(".txp-why-line").is_visible()

    page.evaluate("() => { document.getElementById('root').style.width = '615px'; }")
    page.wait_for_function(
        "() => document.querySelector('td.txp-explanation').getBoundingClientRect().width < 1"
    )
    assert scroll.evaluate("s => s.scrollWidth <= s.clientWidth"), "the table runs off the panel's edge"
    line = row.locator(".txp-why-line")
    assert line.is_visible() and line.inner_text().startswith(perp["explanation"][:20])
    assert line.get_attribute("title") == f"{perp['explanation']} · 2024-03-09 → 2024-03-12"  # whole on hover
    for cell in ("severity", "label", "chains", "amount_usd", "status"):
        box, edge = row.locator(f"td.txp-{cell}").bounding_box(), scroll.bounding_box()
        assert (
            box is not None and edge is not None and box["x"] + box["width"] <= edge["x"] + edge["width"] + 1
        )
    assert row.locator("td.txp-label").evaluate("td => td.firstChild.textContent") == perp["label"]
    # an opened row's flags wrap inside the panel: every flag's Confirm / Dismiss can be reached
    page.evaluate("() => { window.panelModel.set('can_decide', true); }")
    row.click()
    label = row.locator("td.txp-label").bounding_box()
    assert label is not None and label["width"] >= 150  # not squeezed by the opened row's span
    assert scroll.evaluate("s => s.scrollWidth <= s.clientWidth")
    edge = scroll.bounding_box()
    for b in page.locator(f'tr.txp-evidence[data-row="{perp["row_id"]}"] .txp-decide').all():
        box = b.bounding_box()
        assert (
            box is not None and edge is not None and box["x"] + box["width"] <= edge["x"] + edge["width"] + 1
        )
    page.locator(".txp-panel").screenshot(path=str(SCREENS / "flags-triage-narrow.png"))
    assert page.console_errors == []
