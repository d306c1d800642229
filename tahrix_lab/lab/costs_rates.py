"""The SQL views ``usage`` and ``costs`` in a DuckDB workspace, for analysts' own SQL, and
the ``model_prices`` table they join: the pricer's rate rows, copied once.

These views are a DuckDB convenience (``create_views``); the reports (``lab.costs``) ask the
store, on either engine. On PostgreSQL the same figures come from ``costs``/``call_costs``.

Pricing 10 million calls one by one in Python would take minutes, so the rows
of ``Pricer.rates`` (genai-prices cut into linear pieces: one row per model,
backend, price period and input-token tier, USD per million tokens of each
kind) are copied into a small table for the models present, and the views
apply ``cost_sql`` to them in SQL. ``prices`` is the case package's
asset-price table, hence the name. ``model_prices_unknown`` remembers the
models with no known price, so they are not looked up again. Both are emptied
when the installed genai-prices version changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import astuple
from datetime import datetime

import duckdb
from genai_prices import __version__ as GENAI_PRICES_VERSION

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer, applies_sql, cost_sql
from tahrix_lab.agent.storage import TranscriptStore

SOURCE = f"genai-prices {GENAI_PRICES_VERSION}"

_PRICES_DDL = """
CREATE TABLE IF NOT EXISTS model_prices (
    model_id VARCHAR NOT NULL,
    backend VARCHAR,
    valid_from TIMESTAMPTZ,
    valid_to TIMESTAMPTZ,
    min_input_tokens BIGINT NOT NULL,
    max_input_tokens BIGINT,
    input_per_mtok DOUBLE NOT NULL,
    output_per_mtok DOUBLE NOT NULL,
    cache_read_per_mtok DOUBLE NOT NULL,
    cache_write_per_mtok DOUBLE NOT NULL,
    source VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS model_prices_unknown (model_id VARCHAR, backend VARCHAR, source VARCHAR);
"""


_KNOWN = "p.model_id IS NOT NULL AND (u.input_tokens IS NOT NULL OR u.output_tokens IS NOT NULL)"
_NOTE_SQL = """
CASE WHEN u.input_tokens IS NULL AND u.output_tokens IS NULL THEN 'usage not reported'
     WHEN p.model_id IS NULL THEN 'no price known for ' || coalesce(u.model, '?') || ' on ' || coalesce(u.backend, '?')
END
"""
_PRICE_JOIN = (
    "LEFT JOIN model_prices p ON p.model_id = u.model AND p.backend IS NOT DISTINCT FROM u.backend AND "
    + applies_sql("p", "u.created_at", "coalesce(u.input_tokens, 0)")
)
_USAGE_SQL = (
    'SELECT s."user", s.team, m.session_id, s.purpose, c.case_id, m.position, m.created_at, '
    "m.backend, m.model_id AS model, m.input_tokens, m.output_tokens, m.cache_read_tokens, "
    "m.cache_write_tokens, m.reasoning_tokens, m.latency_ms, m.ttft_ms, m.stop_reason "
    "FROM messages m JOIN sessions s ON s.id = m.session_id "
    "LEFT JOIN session_cases c ON c.session_id = m.session_id WHERE m.role = 'assistant'"
)


def create_views(store: TranscriptStore, pricer: Pricer | None = None) -> None:
    """(Re)create ``usage``, ``model_prices`` and ``costs`` in a DuckDB workspace."""
    if store.engine != "duckdb":
        raise ConfigurationError(
            f"The SQL views are made in a DuckDB workspace; {store.path} is PostgreSQL: "
            "use costs() or call_costs(), which work on both."
        )
    refresh_prices(store, pricer)
    cur = store.cursor()
    cur.execute(f"CREATE OR REPLACE VIEW usage AS {_USAGE_SQL}")
    cur.execute(
        "CREATE OR REPLACE VIEW costs AS SELECT *, uncached_cost_usd - cost_usd AS saved_usd FROM ("
        f"SELECT u.*, CASE WHEN {_KNOWN} THEN {cost_sql('u', 'p')} END AS cost_usd, {_NOTE_SQL} AS unknown_price, "
        f"CASE WHEN {_KNOWN} THEN {cost_sql('u', 'p', cached=False)} END AS uncached_cost_usd "
        f"FROM usage u {_PRICE_JOIN})"
    )


def refresh_prices(store: TranscriptStore, pricer: Pricer | None = None, *, rebuild: bool = False) -> int:
    """Fill ``model_prices`` for every (model, backend) in the transcript that has no rates yet.

    Rebuilds when the installed genai-prices version changed. Returns the number
    of new (model, backend) pairs looked up.
    """
    cur = store.cursor()
    ensure_prices(cur, rebuild=rebuild)
    present = cur.execute(
        "SELECT DISTINCT model_id, backend FROM messages WHERE role = 'assistant' AND model_id IS NOT NULL"
    ).fetchall()
    looked_up = set(
        cur.execute(
            "SELECT model_id, backend FROM model_prices UNION SELECT model_id, backend FROM model_prices_unknown"
        ).fetchall()
    )
    pairs = [pair for pair in present if pair not in looked_up]
    add_prices(cur, pairs, pricer)
    return len(pairs)


def ensure_prices(cur: duckdb.DuckDBPyConnection, *, rebuild: bool = False) -> None:
    """Create the price tables; empty them when genai-prices was upgraded (or asked to)."""
    cur.execute(_PRICES_DDL)
    stale = cur.execute(
        "SELECT count(*) FROM (SELECT source FROM model_prices UNION ALL SELECT source FROM model_prices_unknown) "
        "WHERE source <> ?",
        [SOURCE],
    ).fetchone()
    if rebuild or (stale and stale[0]):
        cur.execute("DELETE FROM model_prices")
        cur.execute("DELETE FROM model_prices_unknown")


def add_prices(
    cur: duckdb.DuckDBPyConnection, pairs: Iterable[tuple[str, str | None]], pricer: Pricer | None
) -> None:
    """Copy the pricer's rate rows of each (model, backend) into the table."""
    pricer = pricer or DEFAULT_PRICER
    for model_id, backend in pairs:
        rows = pricer.rates(model_id, backend)
        if not rows:
            cur.execute("INSERT INTO model_prices_unknown VALUES (?, ?, ?)", [model_id, backend, SOURCE])
            continue
        cur.executemany(
            "INSERT INTO model_prices VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [[*astuple(r), SOURCE] for r in rows],
        )


def price_breaks(cur: duckdb.DuckDBPyConnection) -> tuple[list[datetime], list[int]]:
    """Every price-change date and tier threshold in ``model_prices``: each model's are a subset."""
    changes = [
        r[0]
        for r in cur.execute(
            "SELECT DISTINCT valid_from FROM model_prices WHERE valid_from IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]
    tiers = [
        int(r[0])
        for r in cur.execute(
            "SELECT DISTINCT min_input_tokens FROM model_prices WHERE min_input_tokens >= 0 ORDER BY 1"
        ).fetchall()
    ]
    return changes, tiers


__all__ = ["SOURCE", "add_prices", "create_views", "ensure_prices", "price_breaks", "refresh_prices"]
