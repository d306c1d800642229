"""Export and import a workspace's record as JSON Lines, losslessly and all-or-nothing.

One line per session: ``{"format": "tahrix-session/1", "session": {...}, "messages": [...],
"turn_ends": [...], "case": {...}}`` using the transcript's own ``to_dict`` forms, so every
field (usage, stop reasons, tool inputs and results, reasoning signatures, media references,
timings, timestamps to the microsecond) survives a round trip: an exported and re-imported
session diffs as identical. ``case`` (when the session works on a case or has seen things)
carries its case link with the assistant's grant (``case_sessions``) and what it has seen
(``case_session_seen``). Then one line per case-level row of the record, every column, times
in UTC to the microsecond: who may open the case (``tahrix-case-access/1``), what analysts
wrote (``tahrix-annotation/1``: flag decisions, roles, analysts' labels, notes, reviews; a
removed one with ``"value": null``), the audit entries with before and after
(``tahrix-audit/1``) and how the case's evidence was made (``tahrix-manifest/1``: one line per
step of its manifest, number and id kept, entry and fingerprint with sorted keys), so
``tahrix case open CASE`` rebuilds and verifies the evidence on the target's hosts.

Everything here is the record, read and written through the store, so the same file moves a
workspace between engines: ``tahrix export`` from the DuckDB file, ``tahrix import`` with
``TAHRIX_DB=postgresql://…`` (and back); ``tahrix export --case CASE`` moves one case's
sessions and rows. Importing into a DuckDB workspace where a case's evidence is loaded also
lays the case's annotations over that evidence (``record_sync.take_record``).

Import reads and checks every line first (``transfer_read``); one bad line (named by its
number and field) and nothing is written. Then everything is written in one transaction. A
session or row already in the target is an error, or left as it is with ``on_conflict="skip"``.
A manifest step is one of a history: it is skipped only when the target has that very step (same
case, number and ``step_id``); another step at its number, or a gap before it, would fork or
break the history and is always refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, Literal

from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.flow.textsafe import json_safe
from tahrix_lab.lab.transfer_read import (
    ACCESS_FORMAT,
    ANNOTATION_FORMAT,
    AUDIT_FORMAT,
    FORMAT,
    LINK_TABLE,
    MANIFEST_FORMAT,
    SEEN_TABLE,
    ImportRefused,
    Record,
    Row,
    read_records,
)

OnConflict = Literal["error", "skip"]
# Each kind of row: a key that tells two rows apart, and how a clash is named.
_KEYS = {
    "access": (("case_id", "user"), "user", "already has access to this case in"),
    "annotations": (("case_id", "kind", "key"), "key", "already has an annotation of this kind in"),
    "audit": (("audit_id",), "audit_id", "is already in"),
}


def _plain(value: Any) -> Any:
    """A row's value as exported: times in UTC to the microsecond; JSON objects with their keys
    sorted (PostgreSQL's jsonb keeps no order), so both engines export the same bytes."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {k: _plain(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _line(record: dict[str, Any]) -> str:
    line = json.dumps(record, ensure_ascii=False, allow_nan=False)
    return json_safe(line) + "\n"  # C1 controls as \u escapes: safe to print, still lossless


def session_record(
    store: TranscriptStore, session_id: str, seen: list[dict[str, Any]] | None = None
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
    case: dict[str, Any] = {}
    link = store.case_link(session_id)
    if link is not None:
        case[LINK_TABLE] = [{k: _plain(v) for k, v in link.items()}]
    seen = store.seen_rows([session_id]) if seen is None else seen
    if seen:
        case[SEEN_TABLE] = [{k: _plain(v) for k, v in r.items() if k != "session_id"} for r in seen]
    if case:
        record["case"] = case
    return record


def export_sessions(
    store: TranscriptStore,
    out: IO[str],
    session_ids: Iterable[str] | None = None,
    *,
    case: str | None = None,
) -> int:
    """Write sessions (all of them, oldest first, when ``session_ids`` is None) and, for a whole
    workspace or one ``case``, the case-level rows; returns the number of sessions."""
    with store.lease():  # one consistent view of the file
        if case is not None:
            ids = [link["session_id"] for link in store.case_links(case_id=case)]
            cases = [case]
        elif session_ids is None:
            ids = [s.id for s in reversed(store.list_sessions())]
            cases = store.record_cases()
        else:
            ids, cases = list(session_ids), []
        seen: dict[str, list[dict[str, Any]]] = {sid: [] for sid in ids}
        for row in store.seen_rows(ids):
            seen[row["session_id"]].append(row)
        for sid in ids:
            out.write(_line(session_record(store, sid, seen[sid])))
        for c in cases:
            for fmt, rows in ((ACCESS_FORMAT, store.case_access(case_id=c)),
                              (ANNOTATION_FORMAT, store.annotations(c)),
                              (AUDIT_FORMAT, store.audit_entries(c)),
                              (MANIFEST_FORMAT, store.case_manifest(c))):  # fmt: skip
                for row in rows:
                    out.write(_line({"format": fmt, **{k: _plain(v) for k, v in row.items()}}))
    return len(ids)


# -- writing -------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    case_rows: int = 0  # case rows written: links, what sessions saw, access, annotations, audit, steps
    case_rows_skipped: int = 0  # case rows already in the target, left as they are
    missing_cases: list[str] = field(default_factory=list)  # cases whose evidence is not loaded here


def import_sessions(
    store: TranscriptStore,
    lines: Iterable[str],
    on_conflict: OnConflict = "error",
    *,
    source: str = "the input",
) -> ImportReport:
    """Import sessions and case rows, all or nothing. A session id or a case row already in
    the store (or twice in the input) is an error, or skipped with ``on_conflict="skip"``."""
    batch = read_records(lines, source=source)
    report = ImportReport()
    with store.transaction():  # one transaction: every check sees what is written
        problems: list[str] = []
        todo = _new_sessions(store, batch.sessions, on_conflict, report, problems)
        # audit entries of older exports rode on their session: they join the audit rows
        rows = batch.rows + [Row(r.line, "audit", a) for r in todo for a in r.audit]
        fresh = _new_rows(store, [r for r in rows if r.kind != "manifests"], on_conflict, report, problems)
        steps = _new_steps(store, [r for r in rows if r.kind == "manifests"], on_conflict, report, problems)
        if problems:
            raise ImportRefused(source, problems, len(batch.sessions) + len(batch.rows))
        links = [_link(r.session.id, r.link) for r in todo if r.link is not None]
        store.import_sessions(
            [(r.session, r.messages) for r in todo], links, [end for r in todo for end in r.turn_ends]
        )
        seen = [row for r in todo for row in r.seen]
        store.import_case_rows(seen=seen, **fresh)
        store.import_manifest_steps(steps)
        report.imported = [r.session.id for r in todo]
        report.case_rows = len(links) + len(seen) + len(steps) + sum(len(v) for v in fresh.values())
        # every case of the input, skipped rows too: importing again after loading a case's
        # evidence (``--skip-existing``) lays its record over it
        cases = {r.link["case_id"] for r in batch.sessions if r.link is not None} | {
            r.row["case_id"] for r in rows
        }
        report.missing_cases = _lay_over_evidence(store, sorted(cases))
    return report


def _new_sessions(
    store: TranscriptStore,
    records: list[Record],
    on_conflict: OnConflict,
    report: ImportReport,
    problems: list[str],
) -> list[Record]:
    known = store.existing_session_ids([r.session.id for r in records])
    todo: list[Record] = []
    for r in records:
        if r.session.id in known:
            if on_conflict == "skip":
                report.skipped.append(r.session.id)
                report.case_rows_skipped += len(r.seen) + len(r.audit) + (r.link is not None)
                continue
            problems.append(
                f"line {r.line}: session.id: {r.session.id} is already in {store.path!r} "
                "(use --skip-existing to leave it as it is)"
            )
            continue
        known.add(r.session.id)
        todo.append(r)
    return todo


def _new_rows(
    store: TranscriptStore,
    rows: list[Row],
    on_conflict: OnConflict,
    report: ImportReport,
    problems: list[str],
) -> dict[str, list[dict[str, Any]]]:
    """The rows to write, by kind; a clash with the store or an earlier line is a problem, or skipped."""
    known: set[tuple[str, tuple[Any, ...]]] = set()
    for case_id in sorted({r.row["case_id"] for r in rows}):
        for kind, have in (("access", store.case_access(case_id=case_id)),
                           ("annotations", store.annotations(case_id)), ("audit", store.audit_entries(case_id))):  # fmt: skip
            known |= {(kind, tuple(row[k] for k in _KEYS[kind][0])) for row in have}
    fresh: dict[str, list[dict[str, Any]]] = {"access": [], "annotations": [], "audit": []}
    for r in rows:
        names, where, clash = _KEYS[r.kind]
        key = (r.kind, tuple(r.row[k] for k in names))
        if key in known:
            if on_conflict == "skip":
                report.case_rows_skipped += 1
                continue
            problems.append(
                f"line {r.line}: {where}: {r.row[where]} {clash} {store.path!r} "
                "(use --skip-existing to leave it as it is)"
            )
            continue
        known.add(key)
        fresh[r.kind].append(r.row)
    return fresh


def _new_steps(
    store: TranscriptStore,
    rows: list[Row],
    on_conflict: OnConflict,
    report: ImportReport,
    problems: list[str],
) -> list[dict[str, Any]]:
    """The manifest steps to write. A step the target has (same case, number and id) is a clash
    (or skipped); another step at its number, its id elsewhere, or a gap before it is always
    refused: the evidence's history would fork or break, and no host could replay it."""
    have: dict[tuple[str, int], str] = {}  # (case, step) -> step_id, in the target or earlier lines
    for case_id in sorted({r.row["case_id"] for r in rows}):
        have |= {(case_id, s["step"]): s["step_id"] for s in store.case_manifest(case_id)}
    ids = {step_id: key for key, step_id in have.items()}
    fresh: list[dict[str, Any]] = []
    for r in rows:
        key, step_id = (r.row["case_id"], r.row["step"]), r.row["step_id"]
        at = f"line {r.line}: step: step {key[1]} of case {key[0]!r}"
        if have.get(key) == step_id:
            if on_conflict == "skip":
                report.case_rows_skipped += 1
                continue
            problems.append(f"{at} is already in {store.path!r} (use --skip-existing to leave it as it is)")
        elif key in have:
            problems.append(
                f"{at} is another step there (step_id {have[key]}, here {step_id}): importing it would "
                "fork the case's evidence history (import the case into a record without steps of it, "
                "then load or `tahrix case open` it there)"
            )
        elif step_id in ids:
            problems.append(f"line {r.line}: step_id: {step_id} is already step {ids[step_id][1]} of case "
                            f"{ids[step_id][0]!r}")  # fmt: skip
        elif key[1] > 0 and (key[0], key[1] - 1) not in have:
            problems.append(f"{at} follows no step {key[1] - 1}: the case's history would have a gap")
        else:
            have[key], ids[step_id] = step_id, key
            fresh.append(r.row)
    return fresh


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


def _lay_over_evidence(store: TranscriptStore, cases: list[str]) -> list[str]:
    """In a DuckDB workspace, lay each imported case's record over its loaded evidence (flag
    decisions, roles, labels, notes, the audit log); the cases not loaded here."""
    from tahrix_lab.agent.storage.schema import has_table

    if not cases or store.engine != "duckdb" or not has_table(store.cursor(), "cases"):
        return []
    from tahrix_lab.case.db import CaseDB
    from tahrix_lab.case.record_sync import take_record

    db = CaseDB(store.connection, record=store)
    missing = []
    for case_id in cases:
        if db.case_exists(case_id):
            take_record(db, case_id)
        else:
            missing.append(case_id)
    return missing


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
