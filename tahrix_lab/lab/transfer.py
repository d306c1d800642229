"""Export and import sessions as JSON Lines, losslessly and all-or-nothing.

One line per session: ``{"format": "tahrix-session/1", "session": {...},
"messages": [...], "turn_ends": [...], "case": {...}}`` using the transcript's own ``to_dict``
forms, so every field (usage, stop reasons, tool inputs and results, reasoning
signatures, media references, timings, timestamps to the microsecond)
survives a round trip: an exported and re-imported session diffs as
identical. ``case`` (when the session works on a case) carries its case link
and grant (``case_sessions``: from the record, so on either engine) and, from a
DuckDB workspace, its rows of the case package's tables there — its audit
entries (``audit_log``) and what it has seen (``case_session_seen``) — so a
session moved between workspaces keeps its case, its costs by case and its
history. Moving a workspace between engines: ``tahrix export`` from the DuckDB
file, ``tahrix import`` with ``TAHRIX_DB=postgresql://…`` (and back). The record
(sessions, messages, turn ends' messages, links, grants) moves whole; a record in
PostgreSQL has no ``audit_log``/``case_session_seen`` table (they are the case
workspace's), so their rows are counted as left out (``case_rows_left``).

Import reads and checks every record first; one bad record (one line naming
its line number and the field) and nothing is written. Then everything is
written in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import IO, Any, Literal

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message, Session
from tahrix_lab.flow.textsafe import json_safe

FORMAT = "tahrix-session/1"
OnConflict = Literal["error", "skip"]
# The case package's per-session tables, read and written by name so this module needs
# no import of the case package (a workspace without it exports none).
CASE_TABLES = ("case_sessions", "audit_log", "case_session_seen")
LINK_TABLE = "case_sessions"  # the name the format keeps for the record's session-case link
_EXTRA_TABLES = ("audit_log", "case_session_seen")
_MAX_ERRORS = 20


def _tables(store: TranscriptStore) -> dict[str, dict[str, str]]:
    """The case package's per-session tables in a DuckDB workspace beside the record:
    table → column → DuckDB type (none on PostgreSQL)."""
    if store.engine != "duckdb":
        return {}
    rows = (
        store.cursor()
        .execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_name IN ? AND table_schema = current_schema() ORDER BY table_name, ordinal_position",
            [list(_EXTRA_TABLES)],
        )
        .fetchall()
    )
    out: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        out.setdefault(table, {})[column] = kind
    return out


def _plain(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "JSON" and isinstance(value, str):
        return json.loads(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _case_rows(store: TranscriptStore, session_id: str, tables: dict[str, dict[str, str]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for table, columns in tables.items():
        cur = store.cursor().execute(f"SELECT * FROM {table} WHERE session_id = ?", [session_id])
        names = [d[0] for d in cur.description]
        rows = [
            {n: _plain(v, columns.get(n, "")) for n, v in zip(names, r, strict=True)} for r in cur.fetchall()
        ]
        if rows:
            found[table] = rows
    return found


def session_record(
    store: TranscriptStore, session_id: str, tables: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    session = store.get_session(session_id)
    record: dict[str, Any] = {
        "format": FORMAT,
        "session": session.to_dict(),
        "messages": [m.to_dict() for m in store.load_messages(session_id)],
    }
    ends = store.load_turn_ends(session_id)
    if ends:
        record["turn_ends"] = ends
    case = _case_rows(store, session_id, _tables(store) if tables is None else tables)
    link = store.case_link(session_id)
    if link is not None:
        case[LINK_TABLE] = [{k: _plain(v, "") for k, v in link.items()}]
    if case:
        record["case"] = case
    return record


def export_sessions(store: TranscriptStore, out: IO[str], session_ids: Iterable[str] | None = None) -> int:
    """Write sessions (all of them, oldest first, when ``session_ids`` is None); returns the count."""
    with store.lease():  # one consistent view of the file
        ids = (
            list(session_ids) if session_ids is not None else [s.id for s in reversed(store.list_sessions())]
        )
        tables = _tables(store)
        for sid in ids:
            line = json.dumps(session_record(store, sid, tables), ensure_ascii=False, allow_nan=False)
            out.write(json_safe(line) + "\n")  # C1 controls as \u escapes: safe to print, still lossless
    return len(ids)


# -- reading -------------------------------------------------------------------------------------


@dataclass
class Record:
    line: int
    session: Session
    messages: list[Message]
    case: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    turn_ends: list[dict[str, Any]] = field(default_factory=list)


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


def _check(number: int, record: Any) -> tuple[Record | None, str | None]:
    """A record, or the one problem with it (``line N: field: what``)."""

    def bad(where: str, what: str) -> tuple[None, str]:
        return None, f"line {number}: {where}: {what}"

    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return bad("format", f'not a Tahrix session record (expected "format": "{FORMAT}")')
    s = record.get("session")
    if not isinstance(s, dict):
        return bad("session", "missing, or not an object")
    if not isinstance(s.get("id"), str) or not s["id"]:
        return bad("session.id", "missing, or not a string")
    messages = record.get("messages", [])
    if not isinstance(messages, list):
        return bad("messages", f"must be a list, not {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return bad(f"messages[{i}]", "not an object")
        if m.get("role") not in ("user", "assistant", "tool", "system"):
            return bad(f"messages[{i}].role", f"{m.get('role')!r} is not user, assistant, tool or system")
        parts = m.get("parts", [])
        if not isinstance(parts, list):
            return bad(f"messages[{i}].parts", f"must be a list, not {type(parts).__name__}")
        for j, p in enumerate(parts):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                return bad(f"messages[{i}].parts[{j}]", 'not an object with a "type"')
        if "usage" in m and m["usage"] is not None and not isinstance(m["usage"], dict):
            return bad(f"messages[{i}].usage", "not an object")
    case = record.get("case", {})
    if not isinstance(case, dict) or any(
        t not in CASE_TABLES or not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows)
        for t, rows in case.items()
    ):
        return bad("case", f"must map {', '.join(CASE_TABLES)} to lists of rows")
    try:
        session = Session.from_dict(s)
    except (KeyError, TypeError, ValueError) as exc:
        return bad("session", f"malformed ({exc})")
    out: list[Message] = []
    for i, m in enumerate(messages):
        try:
            msg = Message.from_dict(m)
        except (KeyError, TypeError, ValueError) as exc:
            return bad(f"messages[{i}]", f"malformed ({exc})")
        msg.session_id = session.id
        out.append(msg)
    ends = record.get("turn_ends", [])
    names = {"position", "stop_reason", "error_kind", "error_message"}
    if not isinstance(ends, list) or not all(
        isinstance(e, dict) and set(e) <= names and isinstance(e.get("position"), int) for e in ends
    ):
        return bad("turn_ends", "must be a list of {position, stop_reason, error_kind, error_message}")
    return Record(number, session, out, case, [{**e, "session_id": session.id} for e in ends]), None


def read_records(lines: Iterable[str], *, source: str = "the input") -> list[Record]:
    """Every record, checked; ``ImportRefused`` lists every bad one, an empty input says so."""
    records: list[Record] = []
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
            raw = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: column {exc.pos + 1}: not valid JSON ({exc.msg})")
            continue
        record, problem = _check(number, raw)
        if problem:
            problems.append(problem)
        elif record is not None:
            records.append(record)
    if problems:
        raise ImportRefused(source, problems, total)
    if not records:
        raise ConfigurationError(f"{source} is empty: there are no sessions in it to import.")
    return records


# -- writing -------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    case_rows: int = 0  # rows of the case tables (links, grants, audit entries) written
    case_rows_left: int = 0  # rows of case tables the target has none of (audit entries into PostgreSQL)
    missing_cases: list[str] = field(default_factory=list)  # linked cases not loaded here


def import_sessions(
    store: TranscriptStore,
    lines: Iterable[str],
    on_conflict: OnConflict = "error",
    *,
    source: str = "the input",
) -> ImportReport:
    """Import sessions, all or nothing. A session id already in the store (or twice in the
    input) is an error, or skipped with ``on_conflict="skip"``."""
    records = read_records(lines, source=source)
    report = ImportReport()
    with store.transaction():  # one transaction: every check sees what is written
        tables = _tables(store)
        known = store.existing_session_ids([r.session.id for r in records])
        problems: list[str] = []
        todo: list[Record] = []
        for r in records:
            if r.session.id in known:
                if on_conflict == "skip":
                    report.skipped.append(r.session.id)
                    continue
                problems.append(
                    f"line {r.line}: session.id: {r.session.id} is already in {store.path!r} "
                    "(use --skip-existing to leave it as it is)"
                )
                continue
            links = r.case.get(LINK_TABLE, [])
            if len(links) > 1 or any(row.get("session_id", r.session.id) != r.session.id for row in links):
                problems.append(f"line {r.line}: case.{LINK_TABLE}: one link, of this session, at most")
                continue
            if any(not isinstance(row.get("case_id"), str) for row in links):
                problems.append(f"line {r.line}: case.{LINK_TABLE}.case_id: missing, or not a string")
                continue
            known.add(r.session.id)
            todo.append(r)
        if problems:
            raise ImportRefused(source, problems, len(records))
        links = [_link(r.session.id, row) for r in todo for row in r.case.get(LINK_TABLE, [])]
        report.case_rows += len(links)
        for r in todo:
            for table, rows in r.case.items():
                if table == LINK_TABLE:
                    continue
                if table not in tables:
                    report.case_rows_left += len(rows)
                    continue
                report.case_rows += _write_rows(store, table, tables[table], rows)
        store.import_sessions(
            [(r.session, r.messages) for r in todo], links, [end for r in todo for end in r.turn_ends]
        )
        report.imported = [r.session.id for r in todo]
        linked = sorted({link["case_id"] for link in links})
        if linked and store.engine == "duckdb" and _has_table(store.cursor(), "cases"):
            have = {
                c[0]
                for c in store.cursor()
                .execute("SELECT case_id FROM cases WHERE case_id IN ?", [linked])
                .fetchall()
            }
            report.missing_cases = [c for c in linked if c not in have]
    return report


def _link(session_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """A link row as exported (ISO times; naive ones are UTC, as older workspaces wrote them)."""

    def when(value: Any) -> datetime | None:
        if value is None:
            return None
        at = datetime.fromisoformat(value) if isinstance(value, str) else value
        return at if at.tzinfo is not None else at.replace(tzinfo=UTC)

    grant = row.get("grant") or {}
    return {
        "session_id": session_id, "case_id": row["case_id"],
        "grant": json.loads(grant) if isinstance(grant, str) else grant, "created_by": row.get("created_by"),
        "created_at": when(row.get("created_at")) or datetime.now(UTC), "updated_at": when(row.get("updated_at")),
    }  # fmt: skip


def _write_rows(
    store: TranscriptStore, table: str, columns: dict[str, str], rows: list[dict[str, Any]]
) -> int:
    """Rows of one of the case package's tables in a DuckDB workspace, as exported."""
    cur = store.cursor()
    for row in rows:
        names = [n for n in row if n in columns]
        values = [
            json.dumps(row[n]) if columns[n] == "JSON" and row[n] is not None else row[n] for n in names
        ]
        cur.execute(
            f"INSERT INTO {table} ({', '.join(_ident(n) for n in names)}) VALUES ({', '.join(['?'] * len(names))})",
            values,
        )
    return len(rows)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _has_table(cur: Any, name: str) -> bool:
    row = cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = current_schema()",
        [name],
    ).fetchone()
    return bool(row and row[0])


__all__ = [
    "FORMAT",
    "ImportRefused",
    "ImportReport",
    "Record",
    "export_sessions",
    "import_sessions",
    "read_records",
    "session_record",
]
