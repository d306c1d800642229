"""The record's schema in PostgreSQL: named migrations, tracked like DuckDB's (``_migrations``).

The columns mirror ``schema`` (DuckDB) so export and import move rows unchanged. Two
additions serve a team: ``write_id`` makes every write idempotent (a retry after a dropped
connection finds its row instead of writing it twice), and ``seq`` (the order messages
were written in) is given out under one lock per insert, so the budget's "calls since
seq N" never skips a call that committed late. ``parts`` is ``json``, not ``jsonb``: the
stored text keeps its key order, so a replay sends the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tahrix_lab.agent.storage.migrations import Migration
from tahrix_lab.agent.storage.schema import ANNOTATION_TABLES, MANIFEST_TABLE, SEEN_TABLE
from tahrix_lab.agent.storage.usage_sql import SIZE_LADDER


def _plus(column: str) -> str:
    """The rollup's sum of a nullable column: unknown only while every call's is unknown."""
    return f"CASE WHEN u.{column} IS NULL THEN EXCLUDED.{column} ELSE u.{column} + coalesce(EXCLUDED.{column}, 0) END"


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_transcript",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            "user" TEXT NOT NULL,
            purpose TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            system_prompt TEXT,
            created_at TIMESTAMPTZ NOT NULL,
            replay_of TEXT,
            title TEXT
        );
        CREATE INDEX sessions_created_at ON sessions (created_at);
        CREATE TABLE messages (
            session_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            backend TEXT,
            model_id TEXT,
            stop_reason TEXT,
            raw_stop_reason TEXT,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            reasoning_tokens BIGINT,
            tools_offered TEXT[],
            latency_ms DOUBLE PRECISION,
            ttft_ms DOUBLE PRECISION,
            parts JSON NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            write_id UUID UNIQUE,
            PRIMARY KEY (session_id, position)
        );
        -- the budget's first read (calls of the last 30 days) and cost queries by time
        CREATE INDEX messages_calls_at ON messages (created_at) WHERE role = 'assistant';
        CREATE VIEW parts AS
        SELECT m.session_id, m.position AS message_position, (p.i - 1)::INTEGER AS position,
               p.part->>'type' AS type, p.part->>'text' AS text,
               p.part->>'tool_use_id' AS tool_use_id, p.part->>'tool_name' AS tool_name,
               p.part->'tool_input' AS tool_input, p.part->'tool_result' AS tool_result,
               p.part->>'tool_status' AS tool_status, p.part->>'media_ref' AS media_ref,
               p.part->>'media_type' AS media_type, p.part->>'signature' AS signature
        FROM messages m, json_array_elements(m.parts) WITH ORDINALITY AS p(part, i);
        CREATE TABLE turn_ends (
            session_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            stop_reason TEXT,
            error_kind TEXT,
            error_message TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            write_id UUID UNIQUE
        );
        CREATE INDEX turn_ends_session ON turn_ends (session_id, position);
        """,
    ),
    Migration(
        "0002_team_and_case_links",
        # as DuckDB's 0004: a session's team, and the session-case links with their grants
        """
        ALTER TABLE sessions ADD COLUMN team TEXT;
        CREATE TABLE session_cases (
            session_id TEXT PRIMARY KEY,
            case_id TEXT NOT NULL,
            "grant" JSON NOT NULL,
            created_by TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at TIMESTAMPTZ
        );
        CREATE INDEX session_cases_case ON session_cases (case_id);
        """,
    ),
    Migration(
        "0003_usage_daily",
        # The cost queries' rollup (usage_sql.py): each session's calls summed per UTC day,
        # model, backend and input-size class (how many thresholds of SIZE_LADDER, every tier
        # threshold genai-prices uses, the call's input exceeds). Kept by a trigger in the
        # statement that inserts the message, so it is always exactly the calls committed; a
        # team's cost report reads it instead of every call. Rebuilt from the messages here.
        f"""
        CREATE TABLE usage_daily (
            session_id TEXT NOT NULL,
            day INTEGER NOT NULL,
            model_id TEXT,
            backend TEXT,
            size_class SMALLINT NOT NULL,
            calls BIGINT NOT NULL,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            reported BIGINT NOT NULL,
            UNIQUE NULLS NOT DISTINCT (session_id, day, model_id, backend, size_class)
        );
        CREATE FUNCTION usage_size_class(n BIGINT) RETURNS SMALLINT IMMUTABLE LANGUAGE sql AS $$
            SELECT ({" + ".join(f"(coalesce(n, 0) > {t})::INTEGER" for t in SIZE_LADDER)})::SMALLINT
        $$;
        CREATE FUNCTION usage_day(at TIMESTAMPTZ) RETURNS INTEGER IMMUTABLE LANGUAGE sql AS $$
            SELECT floor(extract(epoch FROM at) / 86400)::INTEGER
        $$;
        CREATE FUNCTION usage_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO usage_daily AS u VALUES (
                NEW.session_id, usage_day(NEW.created_at), NEW.model_id, NEW.backend,
                usage_size_class(NEW.input_tokens), 1, NEW.input_tokens, NEW.output_tokens,
                NEW.cache_read_tokens, NEW.cache_write_tokens,
                (NEW.input_tokens IS NOT NULL OR NEW.output_tokens IS NOT NULL)::INTEGER)
            ON CONFLICT (session_id, day, model_id, backend, size_class) DO UPDATE SET
                calls = u.calls + 1,
                input_tokens = {_plus("input_tokens")},
                output_tokens = {_plus("output_tokens")},
                cache_read_tokens = {_plus("cache_read_tokens")},
                cache_write_tokens = {_plus("cache_write_tokens")},
                reported = u.reported + EXCLUDED.reported;
            RETURN NULL;
        END $$;
        CREATE TRIGGER usage_daily_add AFTER INSERT ON messages
            FOR EACH ROW WHEN (NEW.role = 'assistant') EXECUTE FUNCTION usage_daily_add();
        CREATE FUNCTION usage_daily_rebuild() RETURNS void LANGUAGE sql AS $$
            DELETE FROM usage_daily;
            INSERT INTO usage_daily
            SELECT session_id, usage_day(created_at), model_id, backend, usage_size_class(input_tokens),
                   count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens),
                   sum(cache_write_tokens), count(coalesce(input_tokens, output_tokens))
            FROM messages WHERE role = 'assistant' GROUP BY 1, 2, 3, 4, 5;
        $$;
        SELECT usage_daily_rebuild();
        """,
    ),
    Migration(
        "0004_case_access",
        # as DuckDB's 0005: who may open which case, as what, granted by whom and when
        """
        CREATE TABLE case_access (
            case_id TEXT NOT NULL,
            "user" TEXT NOT NULL,
            role TEXT NOT NULL,
            granted_by TEXT,
            granted_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (case_id, "user")
        );
        CREATE INDEX case_access_user ON case_access ("user");
        """,
    ),
    Migration(
        "0005_case_annotations",
        # as DuckDB's 0006: what analysts write on a case, and the audit entries
        ANNOTATION_TABLES.replace("JSONTYPE", "JSONB"),
    ),
    Migration(
        "0006_session_seen",
        # as DuckDB's 0007: what a session has seen (a record in PostgreSQL never had the
        # case package's table, so there is nothing to copy)
        SEEN_TABLE,
    ),
    Migration(
        "0007_case_manifests",
        # as DuckDB's 0008: how each case's evidence was made, step by step
        MANIFEST_TABLE.replace("JSONTYPE", "JSONB"),
    ),
)

MESSAGE_COLUMNS = (
    "session_id, position, role, created_at, backend, model_id, stop_reason, raw_stop_reason, "
    "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, "
    "tools_offered, latency_ms, ttft_ms, parts"
)
SESSION_COLUMNS = 'id, "user", purpose, status, system_prompt, created_at, replay_of, title, team'
# Any fixed number: every message insert takes this transaction-level lock, so seq is
# handed out in commit order (see the module docstring).
SEQ_LOCK = 0x7A1A_5E01

_TRACKING = (
    "CREATE TABLE IF NOT EXISTS _migrations (namespace TEXT NOT NULL, name TEXT NOT NULL, "
    "applied_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (namespace, name))"
)
_MIGRATE_LOCK = 0x7A1A_5E02  # one migrating process at a time


def applied(conn: Any, namespace: str) -> list[str]:
    """The migrations recorded for ``namespace`` (``conn``: a psycopg connection)."""
    conn.execute(_TRACKING)
    rows = conn.execute(
        "SELECT name FROM _migrations WHERE namespace = %s ORDER BY applied_at, name", [namespace]
    )
    return [r[0] for r in rows.fetchall()]


def migrate(conn: Any, namespace: str, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded, each in its own transaction; the names applied.

    An advisory lock lets two processes that start at once take turns."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATE_LOCK])
        done = set(applied(conn, namespace))
        ran = []
        for m in migrations:
            if m.name in done:
                continue
            with conn.transaction():
                conn.execute(m.sql)
                if m.then is not None:
                    m.then(conn)
                conn.execute("INSERT INTO _migrations (namespace, name) VALUES (%s, %s)", [namespace, m.name])
            ran.append(m.name)
        return ran
