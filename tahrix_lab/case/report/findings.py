"""Findings: the paragraphs of the chosen sessions' answers, each accepted, edited or dropped by the analyst.

A finding is one paragraph or list item of a turn's final answer (headings are
context, not findings). Its id is stable (``FND-`` + a hash of session, message
and place), so a review made before new turns arrive still applies. Reviews
are kept in ``report_reviews`` (who, when, the edited text); the latest one per
finding wins and a finding nobody reviewed is reported as "not reviewed".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from tahrix_lab.agent.errors import UserFacingError
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.migrations import Migration, apply_migrations
from tahrix_lab.agent.transcript import Message
from tahrix_lab.case.db import CaseDB, jdict, jsonable, utcnow_naive
from tahrix_lab.case.record_sync import TABLES, push, sync_annotations

MIGRATIONS = (
    Migration(
        "0001_report_reviews",
        """
        CREATE TABLE report_reviews (case_id VARCHAR NOT NULL, finding_id VARCHAR NOT NULL,
          action VARCHAR NOT NULL, text VARCHAR, decided_by VARCHAR NOT NULL, decided_at TIMESTAMP NOT NULL);
        """,
    ),
)
ACTIONS = ("accept", "edit", "drop")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def ensure_tables(db: CaseDB) -> None:
    with db.connection.lease():
        apply_migrations(db.connection, "case_report", MIGRATIONS)


TABLES["review"] = ensure_tables  # reviews from a team's record land in this table


def final_answers(messages: list[Message]) -> list[Message]:
    """The last assistant message with text in each turn (the synthesis after any tools)."""
    out: list[Message] = []
    last: Message | None = None
    for m in messages:
        if m.role == "user":
            if last is not None:
                out.append(last)
            last = None
        elif m.role == "assistant" and m.text.strip():
            last = m
    if last is not None:
        out.append(last)
    return out


def split_answer(text: str) -> list[str]:
    """Paragraphs and list items of an answer, headings and rules left out."""
    parts: list[str] = []
    current: list[str] = []

    def flush() -> None:
        joined = "\n".join(current).strip()
        if joined:
            parts.append(joined)
        current.clear()

    for line in text.splitlines():
        if not line.strip() or _HEADING.match(line) or re.fullmatch(r"\s*([-*_])(\s*\1){2,}\s*", line):
            flush()
        elif _ITEM.match(line):
            flush()
            current.append(_ITEM.sub("", line, count=1))
        else:
            current.append(line.strip())
    flush()
    return parts


def session_findings(store: TranscriptStore, session_id: str) -> list[dict[str, Any]]:
    messages = store.load_messages(session_id)
    out = []
    for m in final_answers(messages):
        for i, text in enumerate(split_answer(m.text)):
            fid = "FND-" + hashlib.sha1(f"{session_id}|{m.position}|{i}".encode()).hexdigest()[:10]
            out.append({"finding_id": fid, "session_id": session_id, "position": m.position, "text": text})
    return out


def tool_results(store: TranscriptStore, session_id: str) -> list[tuple[str, Any]]:
    """``(tool name, result)`` of every successful tool call of a session."""
    return [
        (p.tool_name or "", p.tool_result)
        for m in store.load_messages(session_id)
        if m.role == "tool"
        for p in m.parts
        if p.type == "tool_result" and p.tool_status != "error"
    ]


def findings(
    db: CaseDB, store: TranscriptStore, case_id: str, sessions: Iterable[str]
) -> list[dict[str, Any]]:
    """Every finding of the sessions with its latest review (``status``: accepted, edited, dropped, not reviewed)."""
    ensure_tables(db)
    sync_annotations(db, case_id)
    found = [f for s in sessions for f in session_findings(store, s)]
    reviews = {
        r["finding_id"]: r
        for r in db.rows(
            "SELECT * FROM report_reviews WHERE case_id = ? QUALIFY row_number() OVER "
            "(PARTITION BY finding_id ORDER BY decided_at DESC, rowid DESC) = 1",
            [case_id],
        )
    }
    out = []
    for f in found:
        r = reviews.get(f["finding_id"])
        status = (
            {"accept": "accepted", "edit": "edited", "drop": "dropped"}[r["action"]] if r else "not reviewed"
        )
        text = r["text"] if r and r["action"] == "edit" else f["text"]
        review = jsonable({"by": r["decided_by"], "at": r["decided_at"]}) if r else None
        out.append({**f, "original": f["text"], "text": text, "status": status, "review": review})
    return out


def review(
    db: CaseDB, case_id: str, finding_id: str, action: str, *, by: str, text: str | None = None
) -> dict[str, Any]:
    """Record the analyst's decision on one finding (``edit`` needs the new ``text``)."""
    if action not in ACTIONS:
        raise UserFacingError(
            f"A finding is accepted, edited or dropped ({', '.join(ACTIONS)}), not {action!r}."
        )
    if action == "edit" and not (text or "").strip():
        raise UserFacingError("An edit needs the finding's new text.")
    if not by.strip():
        raise UserFacingError("Say who reviews the finding (by=...).")
    ensure_tables(db)
    at = utcnow_naive()
    row = {"action": action, "text": text if action == "edit" else None, "decided_by": by, "decided_at": at}
    with db.write() as cur:
        cur.execute(
            "INSERT INTO report_reviews VALUES (?, ?, ?, ?, ?, ?)", [case_id, finding_id, *row.values()]
        )
        if db.record_elsewhere:  # a team's record: the review, audited, for every host
            audit_id = db.audit(cur, actor=by, session_id=None, case_id=case_id, action=f"review:{action}",
                                target_kind="finding", target_id=finding_id, before=None, after=row)  # fmt: skip
            push(db, cur, audit_id, "review", finding_id, {**row, "decided_at": at.isoformat()})
    return jdict({"finding_id": finding_id, "action": action, "by": by, "at": at})
