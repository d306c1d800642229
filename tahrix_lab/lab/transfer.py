"""Export and import sessions as JSON Lines, losslessly.

One line per session: ``{"format": "tahrix-session/1", "session": {...},
"messages": [...]}`` using the transcript's own ``to_dict`` forms, so every
field (usage, stop reasons, tool inputs and results, reasoning signatures,
media references, timings, timestamps to the microsecond) survives a round
trip: an exported and re-imported session diffs as identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.transcript import Message, Session

FORMAT = "tahrix-session/1"
OnConflict = Literal["error", "skip"]


def session_record(store: TranscriptStore, session_id: str) -> dict[str, Any]:
    session = store.get_session(session_id)
    return {
        "format": FORMAT,
        "session": session.to_dict(),
        "messages": [m.to_dict() for m in store.load_messages(session_id)],
    }


def export_sessions(store: TranscriptStore, out: IO[str], session_ids: Iterable[str] | None = None) -> int:
    """Write sessions (all of them, oldest first, when ``session_ids`` is None); returns the count."""
    ids = list(session_ids) if session_ids is not None else [s.id for s in reversed(store.list_sessions())]
    for sid in ids:
        out.write(json.dumps(session_record(store, sid), ensure_ascii=False, allow_nan=False) + "\n")
    return len(ids)


def read_records(lines: Iterable[str]) -> Iterator[tuple[Session, list[Message]]]:
    """Parse JSON Lines into sessions, with a clear error naming the bad line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"Line {number} is not valid JSON: {exc.msg}.") from None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ConfigurationError(
                f'Line {number} is not a Tahrix session record (expected "format": "{FORMAT}").'
            )
        try:
            session = Session.from_dict(record["session"])
            messages = [Message.from_dict(m) for m in record.get("messages", [])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"Line {number} has a malformed session record: {exc!r}.") from None
        yield session, messages


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def import_sessions(
    store: TranscriptStore, lines: Iterable[str], on_conflict: OnConflict = "error"
) -> ImportReport:
    """Import sessions; a session id already in the store is an error, or skipped with ``on_conflict="skip"``."""
    report = ImportReport()
    for session, messages in read_records(lines):
        exists = store.cursor().execute("SELECT count(*) FROM sessions WHERE id = ?", [session.id]).fetchone()
        if exists and exists[0]:
            if on_conflict == "skip":
                report.skipped.append(session.id)
                continue
            raise ConfigurationError(
                f"Session {session.id} is already in {store.path!r}; use --skip-existing to leave it as it is."
            )
        for m in messages:
            m.session_id = session.id
        store.import_session(session, messages)
        report.imported.append(session.id)
    return report


__all__ = ["FORMAT", "ImportReport", "export_sessions", "import_sessions", "read_records", "session_record"]
