"""Cost analysis in DuckDB: the ``usage`` and ``costs`` views and helpers that return DataFrames.

The rates are the pricer's (``tahrix_lab.agent.pricing``), copied into the
``model_prices`` table (``costs_rates``); the views join the calls with it and
apply ``cost_sql``, the pricer's formula in SQL:

    usage   one row per model call: user, session, purpose, case_id (when the
            case package links sessions in ``case_sessions``), backend, model,
            tokens, latency, time.
    costs   usage + ``cost_usd`` (NULL when unknown, never 0) + ``unknown_price``
            (why the cost is unknown) + ``uncached_cost_usd`` (the same tokens
            priced as plain input, as if nothing had been cached) and
            ``saved_usd`` (their difference: what prompt caching saved; below
            0 when a call paid for cache writes it did not read back).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import duckdb

from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.pricing import Pricer, applies_sql, cost_sql
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.lab.costs_rates import add_prices, ensure_prices, price_breaks, refresh_prices

if TYPE_CHECKING:
    import pandas as pd  # imported where used: `import tahrix_lab.lab` stays light

# The dimensions a cost report may be grouped by, and the SQL for each.
DIMENSIONS: dict[str, str] = {
    "model": "u.model",
    "backend": "u.backend",
    "user": 'u."user"',
    "purpose": "u.purpose",
    "case": "u.case_id",
    "session": "u.session_id",
    "hour": "date_trunc('hour', u.created_at)",
    "day": "date_trunc('day', u.created_at)",
    "week": "date_trunc('week', u.created_at)",
    "month": "date_trunc('month', u.created_at)",
}
# costs(): first-level keys are cheap integers (no time-zone arithmetic on
# 10 M rows), turned into timestamps on the few aggregated rows
_INNER: dict[str, str] = {
    **DIMENSIONS,
    "hour": "epoch_us(u.created_at) // 3600000000",
    "day": "epoch_us(u.created_at) // 86400000000",
    "week": "epoch_us(u.created_at) // 86400000000",
    "month": "epoch_us(u.created_at) // 86400000000",
}
_OUTER: dict[str, str] = {
    **{k: f'"{k}"' for k in DIMENSIONS},
    "hour": 'to_timestamp("hour" * 3600)',
    "day": 'to_timestamp("day" * 86400)',
    "week": "date_trunc('week', to_timestamp(\"week\" * 86400))",
    "month": "date_trunc('month', to_timestamp(\"month\" * 86400))",
}
# which dimensions need the sessions table (or case_sessions) joined in
_NEEDS_SESSIONS = {"user", "purpose", "case", "session"}

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


# -- views --------------------------------------------------------------------------------


def _has_table(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = current_schema()",
        [name],
    ).fetchone()
    return bool(row and row[0])


def _usage_sql(cur: duckdb.DuckDBPyConnection, *, with_sessions: bool = True) -> str:
    """One row per model call; joins sessions (and case links) only when asked."""
    if not with_sessions:
        return (
            'SELECT NULL::VARCHAR AS "user", m.session_id, NULL::VARCHAR AS purpose, NULL::VARCHAR AS case_id, '
            "m.position, m.created_at, m.backend, m.model_id AS model, m.input_tokens, m.output_tokens, "
            "m.cache_read_tokens, m.cache_write_tokens, m.reasoning_tokens, m.latency_ms, m.ttft_ms, "
            "m.stop_reason FROM messages m WHERE m.role = 'assistant'"
        )
    case_join, case_col = "", "NULL::VARCHAR"
    if _has_table(cur, "case_sessions"):
        # a session is linked to at most one case in practice; min() keeps one row per call regardless
        case_join = (
            "LEFT JOIN (SELECT session_id, min(CAST(case_id AS VARCHAR)) AS case_id FROM case_sessions "
            "GROUP BY session_id) cs ON cs.session_id = m.session_id"
        )
        case_col = "cs.case_id"
    return (
        f'SELECT s."user", m.session_id, s.purpose, {case_col} AS case_id, m.position, m.created_at, '
        "m.backend, m.model_id AS model, m.input_tokens, m.output_tokens, m.cache_read_tokens, "
        "m.cache_write_tokens, m.reasoning_tokens, m.latency_ms, m.ttft_ms, m.stop_reason "
        f"FROM messages m JOIN sessions s ON s.id = m.session_id {case_join} WHERE m.role = 'assistant'"
    )


def create_views(store: TranscriptStore, pricer: Pricer | None = None) -> None:
    """(Re)create ``usage``, ``model_prices`` and ``costs`` in the store's database."""
    refresh_prices(store, pricer)
    cur = store.cursor()
    cur.execute(f"CREATE OR REPLACE VIEW usage AS {_usage_sql(cur)}")
    cur.execute(
        "CREATE OR REPLACE VIEW costs AS SELECT *, uncached_cost_usd - cost_usd AS saved_usd FROM ("
        f"SELECT u.*, CASE WHEN {_KNOWN} THEN {cost_sql('u', 'p')} END AS cost_usd, {_NOTE_SQL} AS unknown_price, "
        f"CASE WHEN {_KNOWN} THEN {cost_sql('u', 'p', cached=False)} END AS uncached_cost_usd "
        f"FROM usage u {_PRICE_JOIN})"
    )


# -- reports ------------------------------------------------------------------------------


def _dims(by: str | Iterable[str]) -> list[str]:
    names = [b.strip() for b in by.split(",")] if isinstance(by, str) else [str(b) for b in by]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in DIMENSIONS]
    if unknown:
        raise ConfigurationError(
            f"Cannot group costs by {', '.join(map(repr, unknown))}; choose from: {', '.join(DIMENSIONS)}."
        )
    return names


def costs(
    store: TranscriptStore | None = None,
    by: str | Sequence[str] = ("model", "day"),
    *,
    since: datetime | date | None = None,
    until: datetime | date | None = None,
    user: str | None = None,
    purpose: str | None = None,
    case: str | None = None,
    pricer: Pricer | None = None,
) -> pd.DataFrame:
    """Calls, tokens and USD grouped by ``by`` (any of ``DIMENSIONS``; periods are UTC).

    ``cost_usd`` sums the calls whose price is known; ``unknown_cost_calls``
    counts the others (their cost is unknown, not zero). ``uncached_cost_usd``
    prices the same calls with nothing cached and ``saved_usd`` is the
    difference: what prompt caching saved (negative when writes cost more than
    the reads saved). The figures equal the
    per-call ``costs`` view summed, but are computed faster: prices are linear
    within a (price period, input-token tier), so the calls are first summed
    per model, backend, period and tier — cheap integer keys — and only those
    few sums are joined with the ``model_prices`` table. (Plain input, ``input -
    cache_read - cache_write``, is clamped at 0 per group rather than per call:
    the two differ only for rows that break the usage convention.)
    """
    dims = _dims(by)
    store = store if store is not None else TranscriptStore()
    cur = store.cursor()
    ensure_prices(cur)
    needs_sessions = bool(set(dims) & _NEEDS_SESSIONS) or any(v is not None for v in (user, purpose, case))
    where, params = ["TRUE"], []
    for clause, value in (
        ("u.created_at >= ?", _as_time(since)),
        ("u.created_at < ?", _as_time(until)),
        ('u."user" = ?', user),
        ("u.purpose = ?", purpose),
        ("u.case_id = ?", case),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    usage_sql = _usage_sql(cur, with_sessions=needs_sessions)

    breaks = price_breaks(cur)
    _sum_calls(cur, dims, usage_sql, where, params, breaks)
    # models seen for the first time are looked up now (rarely); new price
    # breakpoints mean the sums must be cut again
    new = cur.execute(
        "SELECT DISTINCT model, backend FROM _lab_costs_sums a WHERE model IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM model_prices p WHERE p.model_id = a.model AND p.backend IS NOT DISTINCT FROM a.backend) "
        "AND NOT EXISTS (SELECT 1 FROM model_prices_unknown q WHERE q.model_id = a.model "
        "AND q.backend IS NOT DISTINCT FROM a.backend)"
    ).fetchall()
    if new:
        add_prices(cur, new, pricer)
        if price_breaks(cur) != breaks:
            breaks = price_breaks(cur)
            _sum_calls(cur, dims, usage_sql, where, params, breaks)

    changes, tiers = breaks
    # a representative time and input size for each (period, tier) bucket
    period_at = "".join(
        f"WHEN a._period = {i + 1} THEN '{d.isoformat()}'::TIMESTAMPTZ " for i, d in enumerate(changes)
    )
    period_at = (
        f"CASE {period_at}ELSE '1970-01-01'::TIMESTAMPTZ END" if changes else "'1970-01-01'::TIMESTAMPTZ"
    )
    tier_in = "".join(f"WHEN a._tier = {i + 1} THEN {t + 1} " for i, t in enumerate(tiers))
    tier_in = f"CASE {tier_in}ELSE 0 END" if tiers else "0"
    outer = [f'{_OUTER[d]} AS "{d}"' for d in dims]
    group_outer = ", ".join(str(i + 1) for i in range(len(dims)))
    sql = f"""
        WITH priced AS (
            SELECT a.*, p.model_id IS NOT NULL AS _known,
                   {cost_sql("a", "p")} AS _cost, {cost_sql("a", "p", cached=False)} AS _uncached
            FROM _lab_costs_sums a LEFT JOIN model_prices p
              ON p.model_id = a.model AND p.backend IS NOT DISTINCT FROM a.backend
             AND {applies_sql("p", period_at, tier_in)}
        )
        SELECT {"".join(f"{c}, " for c in outer)}
               sum(calls)::BIGINT AS calls,
               sum(input_tokens)::BIGINT AS input_tokens,
               sum(output_tokens)::BIGINT AS output_tokens,
               sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
               sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
               sum(CASE WHEN _known AND _reported > 0 THEN _cost END) AS cost_usd,
               sum(CASE WHEN _known AND _reported > 0 THEN _uncached - _cost END) AS saved_usd,
               sum(CASE WHEN _known AND _reported > 0 THEN _uncached END) AS uncached_cost_usd,
               sum(CASE WHEN _known THEN calls - _reported ELSE calls END)::BIGINT AS unknown_cost_calls
        FROM priced
        {f"GROUP BY {group_outer} ORDER BY {group_outer}" if dims else ""}
    """
    df = cur.execute(sql).df()
    cur.execute("DROP TABLE IF EXISTS _lab_costs_sums")
    for col in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        df[col] = df[col].astype("Int64")
    return df


def _sum_calls(
    cur: duckdb.DuckDBPyConnection,
    dims: list[str],
    usage_sql: str,
    where: list[str],
    params: list[Any],
    breaks: tuple[list[datetime], list[int]],
) -> None:
    """Sum the calls per requested dimension, model, backend, price period and tier
    into the temporary table ``_lab_costs_sums`` (sums as DOUBLE: exact far beyond
    any token count, and much faster than DuckDB's 128-bit integer sums)."""
    changes, tiers = breaks
    # with a day (or finer) key the period follows from it; otherwise it is its own key
    time_key = next((d for d in dims if d in ("hour", "day", "week", "month")), None)
    if time_key is None or not changes:
        period = (
            " + ".join(f"(u.created_at >= '{d.isoformat()}'::TIMESTAMPTZ)::INTEGER" for d in changes) or "0"
        )
        period_key: str | None = f"{period} AS _period"
        period_col = "_period"
    else:
        per = 3600 if time_key == "hour" else 86400
        cuts = " + ".join(f'("{time_key}" >= {int(d.timestamp()) // per})::INTEGER' for d in changes)
        period_key, period_col = None, f"{cuts} AS _period"
    tier = " + ".join(f"(coalesce(u.input_tokens, 0) > {t})::INTEGER" for t in tiers) or "0"
    keys = [f'{_INNER[d]} AS "{d}"' for d in dims]
    keys += [] if "model" in dims else ["u.model"]
    keys += [] if "backend" in dims else ["u.backend"]
    keys += [period_key] if period_key else []
    keys += [f"{tier} AS _tier"]
    inner = f"""
        SELECT {", ".join(keys)},
               count(*) AS calls,
               sum(u.input_tokens::DOUBLE) AS input_tokens,
               sum(u.output_tokens::DOUBLE) AS output_tokens,
               sum(u.cache_read_tokens::DOUBLE) AS cache_read_tokens,
               sum(u.cache_write_tokens::DOUBLE) AS cache_write_tokens,
               count(coalesce(u.input_tokens, u.output_tokens)) AS _reported
        FROM ({usage_sql}) u
        WHERE {" AND ".join(where)}
        GROUP BY ALL
    """
    extra = "" if period_key else f", {period_col}"
    cur.execute(f"CREATE OR REPLACE TEMP TABLE _lab_costs_sums AS SELECT *{extra} FROM ({inner})", params)


def _as_time(value: datetime | date | None) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def costs_by_user(store: TranscriptStore, **kw: Any) -> pd.DataFrame:
    return costs(store, ("user",), **kw).sort_values("cost_usd", ascending=False, ignore_index=True)


def costs_by_case(store: TranscriptStore, **kw: Any) -> pd.DataFrame:
    return costs(store, ("case",), **kw).sort_values("cost_usd", ascending=False, ignore_index=True)


def costs_by_purpose(store: TranscriptStore, **kw: Any) -> pd.DataFrame:
    return costs(store, ("purpose",), **kw).sort_values("cost_usd", ascending=False, ignore_index=True)


def month_start(now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    return datetime(now.year, now.month, 1, tzinfo=UTC)


def month_to_date(store: TranscriptStore, user: str, *, now: datetime | None = None) -> pd.DataFrame:
    """One user's spend since the first of this month, by model."""
    return costs(store, ("model",), user=user, since=month_start(now))


def call_costs(
    store: TranscriptStore, *, session_id: str | None = None, pricer: Pricer | None = None
) -> pd.DataFrame:
    """The ``costs`` view as a DataFrame, one row per call (optionally for one session)."""
    create_views(store, pricer)
    if session_id is None:
        return store.cursor().execute("SELECT * FROM costs ORDER BY created_at, session_id, position").df()
    return (
        store.cursor()
        .execute("SELECT * FROM costs WHERE session_id = ? ORDER BY position", [session_id])
        .df()
    )


def budget_status(store: TranscriptStore, budget: Budget, users: Iterable[str] | None = None) -> pd.DataFrame:
    """Each user's spend and fill against ``budget`` (the same buckets the loop enforces),
    nearest to a cap first."""
    if users is None:
        users = [
            r[0] for r in store.cursor().execute('SELECT DISTINCT "user" FROM sessions ORDER BY 1').fetchall()
        ]
    rows = []
    for user in users:
        spent = budget.spent(user, store=store)
        fill = budget.meter(user, store=store)
        fills = [v for v in fill.values() if v is not None]
        rows.append(
            {
                "user": user,
                "usd_30d": spent["monthly_usd"],
                "monthly_cap_usd": budget.monthly_usd,
                "monthly_fill": fill["monthly_usd"],
                "hour_tokens": spent["per_hour_tokens"],
                "hour_fill": fill["per_hour_tokens"],
                "minute_fill": fill["per_minute_tokens"],
                "max_fill": max(fills) if fills else None,
                "unknown_cost_calls": int(spent["unknown_cost_calls"]),
            }
        )
    import pandas as pd

    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.sort_values("max_fill", ascending=False, na_position="last", ignore_index=True)


__all__ = [
    "DIMENSIONS",
    "budget_status",
    "call_costs",
    "costs",
    "costs_by_case",
    "costs_by_purpose",
    "costs_by_user",
    "create_views",
    "month_to_date",
]
