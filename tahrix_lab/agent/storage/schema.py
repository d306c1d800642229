"""The transcript's schema in DuckDB: its migrations and the columns the store writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tahrix_lab.agent.storage.interface import (
    ACCESS_COLUMNS,
    ANNOTATION_COLUMNS,
    AUDIT_COLUMNS,
    SEEN_COLUMNS,
)
from tahrix_lab.agent.storage.migrations import Migration


def has_table(cur: Any, name: str) -> bool:
    """Whether the DuckDB file holds a table of that name in the current schema."""
    found = cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = current_schema()",
        [name],
    ).fetchone()
    return bool(found and found[0])


def _copy_case_sessions(cur: Any) -> None:
    """Keep the links of a workspace made before 0004: the case package's ``case_sessions``
    rows (naive UTC timestamps) move into the record's ``session_cases``."""
    if has_table(cur, "case_sessions"):
        cur.execute(
            'INSERT INTO session_cases (session_id, case_id, "grant", created_by, created_at, updated_at) '
            'SELECT session_id, CAST(case_id AS VARCHAR), "grant", created_by, '
            "timezone('UTC', coalesce(created_at, current_timestamp::TIMESTAMP)), timezone('UTC', updated_at) "
            "FROM case_sessions ON CONFLICT DO NOTHING"
        )


def _copy_case_session_seen(cur: Any) -> None:
    """Keep what sessions saw in a workspace made before 0007: the case package's
    ``case_session_seen`` rows (naive UTC timestamps) move into the record's ``session_seen``."""
    if has_table(cur, "case_session_seen"):
        cur.execute(
            "INSERT INTO session_seen (session_id, kind, key, first_at) SELECT session_id, kind, key, "
            "timezone('UTC', coalesce(first_at, current_timestamp::TIMESTAMP)) FROM case_session_seen "
            "ON CONFLICT DO NOTHING"
        )


# What a session has seen (addresses, transactions, flags), so a tool answers "new since you
# last looked": per session, in the record (both engines), keyed by kind and key.
SEEN_TABLE = """
CREATE TABLE session_seen (
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    first_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, kind, key)
);
"""

ANNOTATION_TABLES = """
CREATE TABLE case_annotations (
    case_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value JSONTYPE,
    updated_by TEXT,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (case_id, kind, key)
);
CREATE TABLE case_audit (
    audit_id TEXT PRIMARY KEY,
    at_time TIMESTAMPTZ NOT NULL,
    actor TEXT NOT NULL,
    session_id TEXT,
    case_id TEXT NOT NULL,
    action TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    before JSONTYPE,
    after JSONTYPE,
    reverted_by TEXT
);
CREATE INDEX case_audit_case ON case_audit (case_id);
"""

# One row per step that made a case's evidence (a load, a detector run), in order: ``step``
# counts from 0 per case; ``step_id`` makes a retried write find its row.
MANIFEST_TABLE = """
CREATE TABLE case_manifests (
    case_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    step_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    entry JSONTYPE NOT NULL,
    fingerprint JSONTYPE NOT NULL,
    recorded_by TEXT,
    recorded_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (case_id, step)
);
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_transcript",
        """
        CREATE TABLE sessions (
            id VARCHAR PRIMARY KEY,
            "user" VARCHAR NOT NULL,
            purpose VARCHAR NOT NULL,
            status VARCHAR NOT NULL DEFAULT 'active',
            system_prompt VARCHAR,
            created_at TIMESTAMPTZ NOT NULL,
            replay_of VARCHAR,
            title VARCHAR
        );
        -- One row per message; its parts ride along as a JSON array so a
        -- message and its parts are written by one statement (atomic, and
        -- one fsync). The parts view below gives SQL one row per part.
        CREATE TABLE messages (
            session_id VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            role VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            backend VARCHAR,
            model_id VARCHAR,
            stop_reason VARCHAR,
            raw_stop_reason VARCHAR,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            reasoning_tokens BIGINT,
            tools_offered VARCHAR[],
            latency_ms DOUBLE,
            ttft_ms DOUBLE,
            parts JSON NOT NULL,
            PRIMARY KEY (session_id, position)
        );
        CREATE VIEW parts AS
        SELECT m.session_id, m.position AS message_position, p.i AS position,
               p.part->>'type' AS type, p.part->>'text' AS text,
               p.part->>'tool_use_id' AS tool_use_id, p.part->>'tool_name' AS tool_name,
               p.part->'tool_input' AS tool_input, p.part->'tool_result' AS tool_result,
               p.part->>'tool_status' AS tool_status, p.part->>'media_ref' AS media_ref,
               p.part->>'media_type' AS media_type, p.part->>'signature' AS signature
        FROM messages m, LATERAL (
            SELECT unnest(range(json_array_length(m.parts)::BIGINT)) AS i,
                   m.parts->(unnest(range(json_array_length(m.parts)::BIGINT))::INTEGER) AS part
        ) p;
        """,
    ),
    # How each turn ended (stopped, refused by the budget, failed), which the
    # messages alone do not say: history draws "Stopped." and errors from it.
    # ``position`` is the last message's position when the turn ended.
    Migration(
        "0002_turn_ends",
        """
        CREATE TABLE turn_ends (
            session_id VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            stop_reason VARCHAR,
            error_kind VARCHAR,
            error_message VARCHAR,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    Migration(
        "0003_message_seq",
        # The order messages were written in, across processes (the file is written by one
        # process at a time): the budget reads "calls since the last one I saw" by it.
        """
        CREATE SEQUENCE message_seq;
        ALTER TABLE messages ADD COLUMN seq BIGINT DEFAULT nextval('message_seq');
        """,
    ),
    Migration(
        "0004_team_and_case_links",
        # A session's team (team cost reports), and which case a session works on with the
        # assistant's grant: part of the record, so costs by case and the case tools read
        # it on either engine. Rows of the case package's older ``case_sessions`` are copied.
        """
        ALTER TABLE sessions ADD COLUMN team VARCHAR;
        CREATE TABLE session_cases (
            session_id VARCHAR PRIMARY KEY,
            case_id VARCHAR NOT NULL,
            "grant" JSON NOT NULL,
            created_by VARCHAR,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
            updated_at TIMESTAMPTZ
        );
        """,
        then=_copy_case_sessions,
    ),
    Migration(
        "0005_case_access",
        # Who may open which case (the service page, its jobs, MCP), as what, granted by whom
        # and when. The role is checked by the store (DuckDB's CHECK cannot be altered later).
        """
        CREATE TABLE case_access (
            case_id VARCHAR NOT NULL,
            "user" VARCHAR NOT NULL,
            role VARCHAR NOT NULL,
            granted_by VARCHAR,
            granted_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (case_id, "user")
        );
        """,
    ),
    Migration(
        "0006_case_annotations",
        # What analysts write on a case (flag decisions, roles, their labels, notes) and the
        # audit entries: the record's copy, read by hosts whose evidence is in another file.
        ANNOTATION_TABLES.replace("JSONTYPE", "JSON").replace("TEXT", "VARCHAR"),
    ),
    Migration(
        "0007_session_seen",
        # What a session has seen moves from the case package's ``case_session_seen`` into the
        # record (copied here), so it is shared by a team's hosts and moves with the session.
        SEEN_TABLE.replace("TEXT", "VARCHAR"),
        then=_copy_case_session_seen,
    ),
    Migration(
        "0008_case_manifests",
        # How each case's evidence was made (files and their SHA-256, load reports, detector
        # parameters, the evidence's fingerprint after each step): any host rebuilds or
        # verifies the same evidence from it (case/manifest_open.py).
        MANIFEST_TABLE.replace("JSONTYPE", "JSON").replace("TEXT", "VARCHAR"),
    ),
)

# Each table a case's rows move into, with its columns (quoted: "user" is a keyword).
CASE_ROW_TABLES = {
    "access": ("case_access", ACCESS_COLUMNS),
    "annotations": ("case_annotations", ANNOTATION_COLUMNS),
    "audit": ("case_audit", AUDIT_COLUMNS),
    "seen": ("session_seen", SEEN_COLUMNS),
}


def quoted(columns: Sequence[str]) -> str:
    """Column names for SQL, each quoted (``"user"`` is a keyword on both engines)."""
    return ", ".join(f'"{c}"' for c in columns)


_JSON = ("before", "after", "entry", "fingerprint")


def json_row(row: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    """A case row's values to write, its JSON columns as text as ``record_annotation`` writes
    them (an audit entry's missing before/after as JSON ``null``, a removed annotation's value
    as SQL NULL)."""
    return [
        json.dumps(row[c]) if c in _JSON or (c == "value" and row[c] is not None) else row[c] for c in columns
    ]


RECORD_CASES = (
    "SELECT case_id FROM session_cases UNION SELECT case_id FROM case_access "
    "UNION SELECT case_id FROM case_annotations UNION SELECT case_id FROM case_audit "
    "UNION SELECT case_id FROM case_manifests"
)

MESSAGE_COLUMNS = (
    "session_id, position, role, created_at, backend, model_id, stop_reason, raw_stop_reason, "
    "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, "
    "tools_offered, latency_ms, ttft_ms, parts"
)
INSERT_MESSAGE = f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES ({', '.join(['?'] * 17)})"
SESSION_COLUMNS = 'id, "user", purpose, status, system_prompt, created_at, replay_of, title, team'
