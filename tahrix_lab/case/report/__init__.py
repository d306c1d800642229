"""The case report: findings the analyst reviewed, every citation checked, and the evidence behind it.

``build_report(db, store, case_id, sessions=…, trace=…, triage=…)`` gathers the
sections (``gather``) and renders them (``render``) as one self-contained HTML
page and as Markdown. ``Workspace.report`` and ``tahrix case report`` call it;
docs/report.md says what each section holds. Findings are reviewed with
``findings.review`` (accept, edit, drop; who and when are kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.case.db import CaseDB
from tahrix_lab.case.report.findings import findings, review
from tahrix_lab.case.report.gather import Section, gather
from tahrix_lab.case.report.render import GENERATED, to_html, to_markdown


def software_version() -> str:
    try:
        return metadata.version("tahrix-lab")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


@dataclass(frozen=True)
class Report:
    case_id: str
    sessions: tuple[str, ...]
    html: str
    markdown: str
    sections: tuple[Section, ...]

    def write(self, path: str | Path) -> Path:
        """``.md`` / ``.markdown`` writes the Markdown, anything else the HTML page."""
        p = Path(path)
        p.write_text(
            self.markdown if p.suffix.lower() in (".md", ".markdown") else self.html, encoding="utf-8"
        )
        return p


def build_report(
    db: CaseDB,
    store: TranscriptStore,
    case_id: str,
    *,
    sessions: list[str],
    trace: dict[str, Any],
    triage: dict[str, Any],
    generated_at: datetime | None = None,
) -> Report:
    sections = gather(db, store, case_id, sessions, trace, triage, software_version())
    title_row = db.one("SELECT title FROM cases WHERE case_id = ?", [case_id]) or {}
    title = f"{case_id} — {title_row.get('title') or 'case report'}"
    at = (
        (generated_at or datetime.now(UTC))
        .astimezone(UTC)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )
    stamp = f"{at} by tahrix_lab {software_version()}"
    return Report(case_id, tuple(sessions), to_html(title, sections, stamp), to_markdown(title, sections, stamp),
                  tuple(sections))  # fmt: skip


__all__ = ["GENERATED", "Report", "Section", "build_report", "findings", "review", "software_version"]
