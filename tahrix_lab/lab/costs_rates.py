"""The ``model_prices`` table the cost views join: the pricer's rate rows, copied once.

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

from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.store import TranscriptStore

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


__all__ = ["SOURCE", "add_prices", "ensure_prices", "price_breaks", "refresh_prices"]
