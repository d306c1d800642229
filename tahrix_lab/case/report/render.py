"""The report's sections as one self-contained HTML page, or as Markdown.

HTML: inline CSS, the graph as inline SVG, no script, no external URL (a link
in a finding keeps its text and loses its target), so it opens offline and
prints as is. Everything from the model or the case goes through
``html.escape``. The only line that changes between two builds of the same
record is the one starting ``Generated``.
"""

from __future__ import annotations

import base64
import re
from html import escape
from typing import Any

from tahrix_lab.case.report.gather import Section
from tahrix_lab.case.report.graph_svg import SVG_STYLE

GENERATED = "Generated"
_STATUS_MARK = {"verified": "✓", "close": "≈", "not_found": "✗"}

CSS = (
    """
body { font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; margin: 0; background: #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px;
  margin-top: 32px; } h3 { font-size: 15px; margin: 18px 0 6px; }
.sub { color: #57606a; margin: 0 0 16px; }
nav ol { columns: 2; color: #0969da; padding-left: 20px; } a { color: #0969da; text-decoration: none; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 12.5px; }
th, td { border: 1px solid #d0d7de; padding: 4px 6px; text-align: left; vertical-align: top; overflow-wrap: break-word; }
td:first-child { white-space: nowrap; } td code { word-break: break-all; }
th { background: #f6f8fa; } code { font: 12px ui-monospace, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.finding { border: 1px solid #d0d7de; border-left: 4px solid #8c959f; border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
.finding[data-status=accepted], .finding[data-status=edited] { border-left-color: #1a7f37; }
.f-head { font-size: 12px; color: #57606a; } .f-body { margin: 4px 0; white-space: pre-wrap; }
.f-cites { font-size: 12px; color: #57606a; }
.badge { border-radius: 10px; padding: 0 8px; background: #eaeef2; font-weight: 600; }
.cite { border-bottom: 1px dotted #1a7f37; color: inherit; }
.cite[data-status=close] { border-bottom: 2px wavy #9a6700; background: #fff8c5; }
.cite[data-status=not_found] { border-bottom: 2px wavy #cf222e; background: #ffebe9; }
.graph { overflow-x: auto; border: 1px solid #d0d7de; border-radius: 6px; }
.generated { color: #8c959f; font-size: 12px; }
@media print { main { max-width: none; padding: 0; } .graph { overflow: visible; } .graph svg { max-width: 100%; height: auto; }
  h2 { break-after: avoid; } #appendix-citations, #provenance { break-before: page; } nav { display: none; } }
"""
    + SVG_STYLE
)


def to_html(title: str, sections: list[Section], generated: str) -> str:
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>{escape(title)}</h1>",
        '<p class="sub">Case report: every hash, address, amount, time and id cited in the findings is checked '
        "against the case's evidence (appendix A).</p>",
        "<nav><ol>"
        + "".join(f'<li><a href="#{s.id}">{escape(s.title)}</a></li>' for s in sections)
        + "</ol></nav>",
    ]
    for s in sections:
        out.append(f'<section id="{s.id}"><h2>{escape(s.title)}</h2>')
        out.extend(_html_block(b) for b in s.blocks)
        out.append("</section>")
    out.append(f'<p class="generated">{GENERATED} {escape(generated)}</p>')
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def _cell_html(cell: Any) -> str:
    if isinstance(cell, tuple) and cell[0] == "code":
        return f"<code>{escape(str(cell[1]))}</code>"
    if isinstance(cell, tuple) and cell[0] == "link":
        return f'<a href="{escape(cell[2])}">{escape(str(cell[1]))}</a>'
    return escape(str(cell))


def _html_block(b: tuple[Any, ...]) -> str:
    kind = b[0]
    if kind == "p":
        return f"<p>{escape(b[1])}</p>"
    if kind == "h":
        return f"<h3>{escape(b[1])}</h3>"
    if kind == "anchor":
        return f'<h3 id="{escape(b[1])}">{escape(b[2])}</h3>'
    if kind == "svg":
        return f'<div class="graph">{b[1]}</div>'
    if kind == "table":
        head = "".join(f"<th>{escape(h)}</th>" for h in b[1]) if any(b[1]) else ""
        body = "".join("<tr>" + "".join(f"<td>{_cell_html(c)}</td>" for c in row) + "</tr>" for row in b[2])
        return f"<table>{f'<thead><tr>{head}</tr></thead>' if head else ''}<tbody>{body}</tbody></table>"
    if kind == "finding":
        return _finding_html(b[1])
    raise ValueError(f"unknown block {kind!r}")


def _finding_html(f: dict[str, Any]) -> str:
    review = f.get("review")
    who = f" by {review['by']} at {review['at']}" if review else ""
    head = (f'<div class="f-head"><b>F{f["n"]}</b> <span class="badge">{escape(f["status"])}</span>{escape(who)} · '
            f"session <code>{escape(f['session_id'])}</code></div>")  # fmt: skip
    refs = " ".join(
        f'<a class="cite" data-status="{c["status"]}" href="#ev-{c["ref"]}">{c["ref"]} {_STATUS_MARK[c["status"]]}</a>'
        if c.get("match") else f'<span class="cite" data-status="{c["status"]}">{c["ref"]} {_STATUS_MARK[c["status"]]}</span>'
        for c in f["citations"]
    )  # fmt: skip
    cites = f'<div class="f-cites">{escape(f["line"])}{": " + refs if refs else ""}</div>'
    return (f'<div class="finding" id="F{f["n"]}" data-status="{escape(f["status"])}">{head}'
            f'<div class="f-body">{_inline(f["text"], f["citations"])}</div>{cites}</div>')  # fmt: skip


def _inline(text: str, citations: list[dict[str, Any]]) -> str:
    """Escaped text with code spans and bold, link targets dropped, each citation marked by its status."""
    text = re.sub(r"\[([^\]]+)\]\([^)\s]+\)", r"\1", text)  # a link keeps its text, never its target
    marks: list[str] = []
    for c in sorted(citations, key=lambda c: -len(c["text"])):
        token = f"\x00{len(marks)}\x00"
        if c["text"] in text:
            text = text.replace(c["text"], token)
            title = c.get("note") or c["status"].replace("_", " ")
            marks.append(f'<a class="cite" data-status="{c["status"]}" href="#ev-{c["ref"]}" title="{escape(title)}">'
                         f"{escape(c['text'])}</a>")  # fmt: skip
    out = escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: marks[int(m.group(1))], out)


def to_markdown(title: str, sections: list[Section], generated: str) -> str:
    out = [f"# {title}", ""]
    for s in sections:
        out += [f'<a id="{s.id}"></a>', "", f"## {s.title}", ""]
        for b in s.blocks:
            out += [*_md_block(b), ""]
    out += [f"{GENERATED} {generated}", ""]
    return "\n".join(out)


def _cell_md(cell: Any) -> str:
    if isinstance(cell, tuple) and cell[0] == "code":
        text = f"`{cell[1]}`"
    elif isinstance(cell, tuple) and cell[0] == "link":
        text = f"[{cell[1]}]({cell[2]})"
    else:
        text = str(cell)
    return text.replace("|", "\\|").replace("\n", " ")


def _md_block(b: tuple[Any, ...]) -> list[str]:
    kind = b[0]
    if kind == "p":
        return [b[1]]
    if kind == "h":
        return [f"### {b[1]}"]
    if kind == "anchor":
        return [f'<a id="{b[1]}"></a>', "", f"### {b[2]}"]
    if kind == "svg":
        data = base64.b64encode(b[1].encode()).decode()
        return [f"![Fund-flow graph](data:image/svg+xml;base64,{data})"]
    if kind == "table":
        heads = [h or " " for h in b[1]]
        rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        return rows + ["| " + " | ".join(_cell_md(c) for c in row) + " |" for row in b[2]]
    f = b[1]
    review = f.get("review")
    who = f" by {review['by']} at {review['at']}" if review else ""
    refs = ", ".join(f"[{c['ref']}](#ev-{c['ref']}) {_STATUS_MARK[c['status']]}" for c in f["citations"])
    return [f"**F{f['n']}** ({f['status']}{who}; session `{f['session_id']}`)", "", f["text"], "",
            f"*{f['line']}*" + (f": {refs}" if refs else "")]  # fmt: skip
