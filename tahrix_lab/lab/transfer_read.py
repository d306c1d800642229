"""Reading and checking an export (``tahrix import``): every line, before anything is written.

A line is one JSON object whose ``format`` says what it is: a session
(``tahrix-session/1``: the session, its messages, turn ends, its case link and what it has
seen) or one of a case's record rows (``tahrix-case-access/1``, ``tahrix-annotation/1``,
``tahrix-audit/1``, ``tahrix-manifest/1``: a flat row, every column, times in ISO 8601 with
their zone; a manifest step's entry and fingerprint as JSON objects). A bad line
is named with its number and its field; one bad line and nothing is imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage.interface import ANNOTATION_KINDS, MANIFEST_KINDS, ROLES
from tahrix_lab.agent.transcript import Message, Session

FORMAT = "tahrix-session/1"
ACCESS_FORMAT = "tahrix-case-access/1"
ANNOTATION_FORMAT = "tahrix-annotation/1"
AUDIT_FORMAT = "tahrix-audit/1"
MANIFEST_FORMAT = "tahrix-manifest/1"
RowKind = Literal["access", "annotations", "audit", "manifests"]
ROW_FORMATS: dict[str, RowKind] = {
    ACCESS_FORMAT: "access",
    ANNOTATION_FORMAT: "annotations",
    AUDIT_FORMAT: "audit",
    MANIFEST_FORMAT: "manifests",
}
# What each field of a row must be: text, text or null, a timestamp, a step number, an object
# (or null), any JSON; or one of the known roles / annotation kinds / manifest step kinds.
SPECS: dict[str, dict[str, str]] = {
    "access": {"case_id": "text", "user": "text", "role": "role", "granted_by": "text?", "granted_at": "time"},
    "annotations": {"case_id": "text", "kind": "kind", "key": "text", "value": "object?",
                    "updated_by": "text?", "updated_at": "time"},
    "audit": {"audit_id": "text", "at_time": "time", "actor": "text", "session_id": "text?", "case_id": "text",
              "action": "text", "target_kind": "text", "target_id": "text", "before": "json", "after": "json",
              "reverted_by": "text?"},
    "seen": {"session_id": "text", "kind": "text", "key": "text", "first_at": "time"},
    "manifests": {"case_id": "text", "step": "step", "step_id": "text", "kind": "step kind", "entry": "object",
                  "fingerprint": "object", "recorded_by": "text?", "recorded_at": "time"},
}  # fmt: skip
# A session's ``case``: its link, what it has seen and (in exports made before audit entries
# travelled as rows of their own) its audit entries, which are read into the record's.
LINK_TABLE, SEEN_TABLE, OLD_AUDIT_TABLE = "case_sessions", "case_session_seen", "audit_log"
_MAX_ERRORS = 20


class Bad(Exception):
    """One problem with a line: where (a field) and what."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")


@dataclass
class Record:
    line: int
    session: Session
    messages: list[Message]
    link: dict[str, Any] | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    turn_ends: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Row:
    line: int
    kind: RowKind
    row: dict[str, Any]


@dataclass
class Batch:
    sessions: list[Record] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)


class ImportRefused(ConfigurationError):
    """Nothing was imported; ``problems`` holds one ``line N: field: what`` per bad record."""

    def __init__(self, source: str, problems: list[str], total: int) -> None:
        shown = problems[:_MAX_ERRORS]
        more = f"\n  … and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__(
            f"Nothing was imported from {source}: {len(problems)} bad record(s) of {total}.\n  "
            + "\n  ".join(shown)
            + more
        )
        self.problems = problems


def when(value: Any, where: str, *, naive_ok: bool = False) -> datetime:
    """A timestamp as exported; a naive one is UTC only where older exports wrote them so."""
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            at = None
        if at is not None and (at.tzinfo is not None or naive_ok):
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    raise Bad(where, f"{json.dumps(value)[:60]} is not a timestamp with its time zone (ISO 8601)")


def check_row(kind: str, raw: Any, where: str, what: str, *, naive_ok: bool = False) -> dict[str, Any]:
    """One case row (``what``: its format or table, for the message), every field present,
    known and of its type; times parsed."""
    if not isinstance(raw, dict):
        raise Bad(where, "not an object")
    spec = SPECS[kind]
    unknown = sorted(set(raw) - set(spec) - {"format"})
    if unknown:
        raise Bad(f"{where}{unknown[0]}", f"not a field of a {what} row")
    out: dict[str, Any] = {}
    for name, must in spec.items():
        if name not in raw:
            raise Bad(f"{where}{name}", "missing")
        value = raw[name]
        ok = {
            "text": isinstance(value, str) and value != "",
            "text?": value is None or isinstance(value, str),
            "object?": value is None or isinstance(value, dict),
            "object": isinstance(value, dict),
            "step": isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31,
            "step kind": value in MANIFEST_KINDS,
            "role": value in ROLES,
            "kind": value in ANNOTATION_KINDS,
        }.get(must, True)
        if not ok:
            raise Bad(f"{where}{name}", f"{json.dumps(value)[:60]} is not {_WHAT[must]}")
        out[name] = when(value, f"{where}{name}", naive_ok=naive_ok) if must == "time" else value
    return out


_WHAT = {"text": "a non-empty string", "text?": "a string or null", "object?": "an object or null",
         "object": "an object", "step": "a step number (0, 1, 2…)",
         "step kind": "one of " + ", ".join(MANIFEST_KINDS),
         "role": "one of " + ", ".join(ROLES), "kind": "one of " + ", ".join(ANNOTATION_KINDS)}  # fmt: skip


def _lines(lines: Iterable[str]) -> Iterator[tuple[int, str | None]]:
    """Numbered lines; ``None`` for a line that is not text (a binary file)."""
    it = iter(lines)
    number = 0
    while True:
        number += 1
        try:
            line = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError:
            yield number, None
            return  # the rest of the stream cannot be read as text either
        yield number, (None if "\x00" in line else line)


def _messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    messages = record.get("messages", [])
    if not isinstance(messages, list):
        raise Bad("messages", f"must be a list, not {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise Bad(f"messages[{i}]", "not an object")
        if m.get("role") not in ("user", "assistant", "tool", "system"):
            raise Bad(f"messages[{i}].role", f"{m.get('role')!r} is not user, assistant, tool or system")
        parts = m.get("parts", [])
        if not isinstance(parts, list):
            raise Bad(f"messages[{i}].parts", f"must be a list, not {type(parts).__name__}")
        for j, p in enumerate(parts):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                raise Bad(f"messages[{i}].parts[{j}]", 'not an object with a "type"')
        if "usage" in m and m["usage"] is not None and not isinstance(m["usage"], dict):
            raise Bad(f"messages[{i}].usage", "not an object")
    return messages


def _case(
    case: Any, session_id: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """A session's link, seen rows and (older exports) audit entries."""
    tables = (LINK_TABLE, SEEN_TABLE, OLD_AUDIT_TABLE)
    if not isinstance(case, dict) or any(
        t not in tables or not isinstance(rows, list) for t, rows in case.items()
    ):
        raise Bad("case", f"must map {', '.join(tables)} to lists of rows")
    links = case.get(LINK_TABLE, [])
    if len(links) > 1 or any(
        not isinstance(r, dict) or r.get("session_id", session_id) != session_id for r in links
    ):
        raise Bad(f"case.{LINK_TABLE}", "one link, of this session, at most")
    if any(not isinstance(r.get("case_id"), str) for r in links):
        raise Bad(f"case.{LINK_TABLE}.case_id", "missing, or not a string")
    seen = [check_row("seen", {"session_id": session_id, **r} if isinstance(r, dict) else r,
                      f"case.{SEEN_TABLE}[{i}].", SEEN_TABLE, naive_ok=True)
            for i, r in enumerate(case.get(SEEN_TABLE, []))]  # fmt: skip
    audit = [check_row("audit", r, f"case.{OLD_AUDIT_TABLE}[{i}].", OLD_AUDIT_TABLE, naive_ok=True)
             for i, r in enumerate(case.get(OLD_AUDIT_TABLE, []))]  # fmt: skip
    if any(r["session_id"] != session_id for r in seen):
        raise Bad(f"case.{SEEN_TABLE}.session_id", "not this session's")
    return (links[0] if links else None), seen, audit


def _session(number: int, record: dict[str, Any]) -> Record:
    s = record.get("session")
    if not isinstance(s, dict):
        raise Bad("session", "missing, or not an object")
    if not isinstance(s.get("id"), str) or not s["id"]:
        raise Bad("session.id", "missing, or not a string")
    messages = _messages(record)
    link, seen, audit = _case(record.get("case", {}), s["id"])
    try:
        session = Session.from_dict(s)
    except (KeyError, TypeError, ValueError) as exc:
        raise Bad("session", f"malformed ({exc})") from None
    out: list[Message] = []
    for i, m in enumerate(messages):
        try:
            msg = Message.from_dict(m)
        except (KeyError, TypeError, ValueError) as exc:
            raise Bad(f"messages[{i}]", f"malformed ({exc})") from None
        msg.session_id = session.id
        out.append(msg)
    ends = record.get("turn_ends", [])
    names = {"position", "stop_reason", "error_kind", "error_message"}
    if not isinstance(ends, list) or not all(
        isinstance(e, dict) and set(e) <= names and isinstance(e.get("position"), int) for e in ends
    ):
        raise Bad("turn_ends", "must be a list of {position, stop_reason, error_kind, error_message}")
    return Record(number, session, out, link, seen, audit, [{**e, "session_id": session.id} for e in ends])


def _check(number: int, raw: Any) -> Record | Row:
    kind = raw.get("format") if isinstance(raw, dict) else None
    if kind in ROW_FORMATS:
        return Row(number, ROW_FORMATS[kind], check_row(ROW_FORMATS[kind], raw, "", kind))
    if kind != FORMAT:
        known = ", ".join(f'"{f}"' for f in (FORMAT, *ROW_FORMATS))
        raise Bad("format", f"not a Tahrix session record or case row (expected one of {known})")
    return _session(number, raw)


def read_records(lines: Iterable[str], *, source: str = "the input") -> Batch:
    """Every line, checked; ``ImportRefused`` lists every bad one, an empty input says so."""
    batch = Batch()
    problems: list[str] = []
    total = 0
    for number, line in _lines(lines):
        if line is None:
            problems.append(f"line {number}: not text — {source} looks like a binary file, not JSON Lines")
            total += 1
            break
        if not line.strip():
            continue
        total += 1
        try:
            found = _check(number, json.loads(line.rstrip("\r\n")))
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: column {exc.pos + 1}: not valid JSON ({exc.msg})")
        except Bad as exc:
            problems.append(f"line {number}: {exc}")
        else:
            if isinstance(found, Row):
                batch.rows.append(found)
            else:
                batch.sessions.append(found)
    if problems:
        raise ImportRefused(source, problems, total)
    if not batch.sessions and not batch.rows:
        raise ConfigurationError(f"{source} is empty: there are no sessions or case rows in it to import.")
    return batch
