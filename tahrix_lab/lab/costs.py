"""Cost analysis on either engine: calls, tokens and USD as DataFrames.

The store sums the calls in the engine (``TranscriptStore.usage_sums``: ten million calls
never come into Python), grouped by the asked dimensions plus what a price depends on:
model, backend, price period and input-token tier. Prices are linear within one of those
groups, so each group's sums are priced here with the one pricer's rate rows
(``agent.pricing``, genai-prices) and the result equals pricing every call alone. The tier
is the call's own input size, so a long-context call is priced at its tier however it is
grouped. (Plain input, ``input - cache_read - cache_write``, is clamped at 0 per group
rather than per call: the two differ only for rows that break the usage convention.)

    costs        grouped: any of ``DIMENSIONS`` (user, team, case, model, day, ...)
    call_costs   one row per call: user, team, session, purpose, case_id, backend, model,
                 tokens, ``cost_usd`` (NULL when unknown, never 0) with ``unknown_price``
                 (why), ``uncached_cost_usd`` (the same tokens priced as plain input) and
                 ``saved_usd`` (what prompt caching saved)

``create_views`` (``costs_rates``) adds the same per-call figures as SQL views in a DuckDB
workspace, for analysts' own SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.usage_sql import TIME_KEYS
from tahrix_lab.agent.transcript import Usage
from tahrix_lab.lab.costs_rates import create_views

if TYPE_CHECKING:
    import pandas as pd  # imported where used: `import tahrix_lab.lab` stays light

# The dimensions a cost report may be grouped by (periods are UTC).
DIMENSIONS = (
    "model",
    "backend",
    "user",
    "team",
    "purpose",
    "case",
    "session",
    "hour",
    "day",
    "week",
    "month",
)
_SUMS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _dims(by: str | Iterable[str]) -> list[str]:
    names = [b.strip() for b in by.split(",")] if isinstance(by, str) else [str(b) for b in by]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in DIMENSIONS]
    if unknown:
        raise ConfigurationError(
            f"Cannot group costs by {', '.join(map(repr, unknown))}; choose from: {', '.join(DIMENSIONS)}."
        )
    return names


def _sums(
    store: TranscriptStore, sql_by: list[str], filters: dict[str, Any], pricer: Pricer
) -> tuple[pd.DataFrame, tuple[list[datetime], list[int]]]:
    """The engine's grouped sums, cut at the price breaks of the models present (one quick
    look at which models those are, then one grouped query)."""
    import pandas as pd

    breaks = pricer.breaks(store.models_used())
    names, rows = store.usage_sums(sql_by, changes=breaks[0], tiers=breaks[1], **filters)
    return pd.DataFrame.from_records(rows, columns=names), breaks


def _rate_columns(
    df: pd.DataFrame, sql_by: list[str], breaks: tuple[list[datetime], list[int]], pricer: Pricer
) -> Any:
    """Per group, USD per million input, output, cache-read and cache-write tokens of the rate in
    force (NaN when unknown): looked up once per model, backend, time bucket and tier, at the
    group's hour or day (price changes fall on midnights), else at the start of its price
    period, for an input size inside its tier."""
    import numpy as np

    changes, tiers = breaks
    time_key = next((k for k in TIME_KEYS if k in sql_by), None)
    when = df[time_key] if time_key is not None else df["_period"]
    keys = list(
        zip(df["model"].tolist(), df["backend"].tolist(), when.tolist(), df["_tier"].tolist(), strict=True)
    )
    found: dict[tuple[Any, ...], int] = {}
    table: list[tuple[float, float, float, float]] = []
    index = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        j = found.get(key)
        if j is None:
            model, backend, at_key, tier = key
            if time_key is not None:
                at = _EPOCH + timedelta(seconds=int(at_key) * TIME_KEYS[time_key])
            else:
                at = changes[int(at_key) - 1] if at_key else _EPOCH
            rate = pricer.tier_rate(model, backend, at=at, tier=int(tier), tiers=tiers)
            nan = float("nan")
            table.append(
                (
                    rate.input_per_mtok,
                    rate.output_per_mtok,
                    rate.cache_read_per_mtok,
                    rate.cache_write_per_mtok,
                )
                if rate is not None
                else (nan, nan, nan, nan)
            )
            j = found[key] = len(table) - 1
        index[i] = j
    return np.array(table, dtype=np.float64).reshape(-1, 4)[index]


def _periods(df: pd.DataFrame, dims: list[str]) -> None:
    """Hours and days since 1970 as UTC timestamps; weeks (from Monday) and months from days."""
    import pandas as pd

    if "hour" in df:
        df["hour"] = pd.to_datetime(df["hour"] * 3600, unit="s", utc=True)
    if "day" in df:
        day = pd.Series(pd.to_datetime(df["day"] * 86400, unit="s", utc=True), index=df.index)
        if "week" in dims:
            df["week"] = day - pd.to_timedelta(day.dt.day_of_week, unit="D")
        if "month" in dims:
            df["month"] = day - pd.to_timedelta(day.dt.day - 1, unit="D")
        df["day"] = day


def _sum_known(x: pd.Series) -> Any:
    return x.sum(min_count=1)  # all unknown stays unknown (NaN), never 0


def costs(
    store: TranscriptStore | None = None,
    by: str | Sequence[str] = ("model", "day"),
    *,
    since: datetime | date | None = None,
    until: datetime | date | None = None,
    user: str | None = None,
    team: str | None = None,
    purpose: str | None = None,
    case: str | None = None,
    pricer: Pricer | None = None,
) -> pd.DataFrame:
    """Calls, tokens and USD grouped by ``by`` (any of ``DIMENSIONS``; periods are UTC).

    ``cost_usd`` sums the calls whose price is known; ``unknown_cost_calls`` counts the
    others (their cost is unknown, not zero). ``uncached_cost_usd`` prices the same calls
    with nothing cached and ``saved_usd`` is the difference: what prompt caching saved
    (negative when writes cost more than the reads saved).
    """
    import numpy as np
    import pandas as pd

    dims = _dims(by)
    store = store if store is not None else TranscriptStore()
    pricer = pricer or DEFAULT_PRICER
    sql_by = list(dict.fromkeys("day" if d in ("week", "month") else d for d in dims))
    filters = {"since": _as_time(since), "until": _as_time(until), "user": user, "team": team,
               "purpose": purpose, "case": case}  # fmt: skip
    df, breaks = _sums(store, sql_by, filters, pricer)
    columns = [*dims, "calls", *_SUMS, "cost_usd", "saved_usd", "uncached_cost_usd", "unknown_cost_calls"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    rates = _rate_columns(df, sql_by, breaks, pricer)
    i, o, r, w = (df[c].astype("float64").fillna(0).to_numpy() for c in _SUMS)
    known = ~np.isnan(rates[:, 0]) & (df["_reported"].to_numpy() > 0)
    # Rate.cost over each group's sums: plain input clamped at 0, then each kind at its rate
    cost = (
        np.maximum(i - r - w, 0) * rates[:, 0] + r * rates[:, 2] + w * rates[:, 3] + o * rates[:, 1]
    ) / 1e6
    df["cost_usd"] = np.where(known, cost, np.nan)
    df["uncached_cost_usd"] = np.where(known, (i * rates[:, 0] + o * rates[:, 1]) / 1e6, np.nan)
    df["unknown_cost_calls"] = df["calls"] - np.where(np.isnan(rates[:, 0]), 0, df["_reported"])
    for c in _SUMS:
        df[c] = df[c].astype("float64")
    _periods(df, dims)
    summed = ("calls", "unknown_cost_calls", *_SUMS, "cost_usd", "uncached_cost_usd")
    if dims:  # min_count=1: a group whose costs are all unknown stays unknown (NaN), never 0
        out = df.groupby(dims, dropna=False, sort=True)[list(summed)].sum(min_count=1).reset_index()
    else:
        out = pd.DataFrame([{c: _sum_known(df[c]) for c in summed}])
    out["saved_usd"] = out["uncached_cost_usd"] - out["cost_usd"]
    for d in dims:
        if d not in TIME_KEYS and d not in ("week", "month"):  # a key the record left NULL stays None
            out[d] = out[d].astype(object).where(out[d].notna(), None)
    out = out[columns]
    for col in _SUMS:
        out[col] = out[col].round().astype("Int64")
    for col in ("calls", "unknown_cost_calls"):
        out[col] = out[col].astype("int64")
    return out


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
    """One row per call (optionally of one session), oldest first, priced at its own time and size."""
    import pandas as pd

    pricer = pricer or DEFAULT_PRICER
    rows = store.usage_rows(session_ids=[session_id] if session_id is not None else None)
    for r in rows:
        r["model"] = r.pop("model_id")
        usage = Usage(r["input_tokens"], r["output_tokens"], r["cache_read_tokens"], r["cache_write_tokens"])
        rate = pricer.rate(r["model"], r["backend"], at=r["created_at"], input_tokens=r["input_tokens"] or 0)
        r["unknown_price"] = None
        if r["input_tokens"] is None and r["output_tokens"] is None:
            r["unknown_price"] = "usage not reported"
        elif rate is None:
            r["unknown_price"] = f"no price known for {r['model'] or '?'} on {r['backend'] or '?'}"
        known = r["unknown_price"] is None and rate is not None
        r["cost_usd"] = rate.cost(usage) if known and rate else None
        r["uncached_cost_usd"] = rate.cost(usage, cached=False) if known and rate else None
        r["saved_usd"] = None if r["cost_usd"] is None else r["uncached_cost_usd"] - r["cost_usd"]
    df = pd.DataFrame.from_records(rows)
    for col in ("cost_usd", "uncached_cost_usd", "saved_usd"):
        if col in df:
            df[col] = df[col].astype("float64")
    return df


def budget_status(store: TranscriptStore, budget: Budget, users: Iterable[str] | None = None) -> pd.DataFrame:
    """Each user's spend and fill against ``budget`` (the same buckets the loop enforces),
    nearest to a cap first."""
    if users is None:
        users = store.users()
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
