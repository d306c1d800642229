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
from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer, Rate
from tahrix_lab.agent.storage.usage_sql import TIME_KEYS
from tahrix_lab.agent.store import TranscriptStore
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
# (model, backend) pairs seen per store target: their price breaks cut the next sums
_SEEN: dict[str, set[tuple[str, str | None]]] = {}


def _dims(by: str | Iterable[str]) -> list[str]:
    names = [b.strip() for b in by.split(",")] if isinstance(by, str) else [str(b) for b in by]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in DIMENSIONS]
    if unknown:
        raise ConfigurationError(
            f"Cannot group costs by {', '.join(map(repr, unknown))}; choose from: {', '.join(DIMENSIONS)}."
        )
    return names


def _breaks(pricer: Pricer, pairs: Iterable[tuple[str, str | None]]) -> tuple[list[datetime], list[int]]:
    """Every price-change instant and input-token tier threshold of these models."""
    changes: set[datetime] = set()
    tiers: set[int] = set()
    for model, backend in pairs:
        for r in pricer.rates(model, backend):
            if r.valid_from is not None:
                changes.add(r.valid_from)
            if r.min_input_tokens >= 0:
                tiers.add(r.min_input_tokens)
    return sorted(changes), sorted(tiers)


def _sums(
    store: TranscriptStore, sql_by: list[str], filters: dict[str, Any], pricer: Pricer
) -> tuple[list[dict[str, Any]], tuple[list[datetime], list[int]]]:
    """The engine's grouped sums, cut at the price breaks of the models present: those
    seen before are known; a model seen for the first time may add breaks (then once more)."""
    seen = _SEEN.setdefault(store.path, set())
    breaks = _breaks(pricer, seen)
    rows = store.usage_sums(sql_by, changes=breaks[0], tiers=breaks[1], **filters)
    new = {(r["model"], r["backend"]) for r in rows if r["model"] is not None} - seen
    if new:
        seen |= new
        if _breaks(pricer, seen) != breaks:
            breaks = _breaks(pricer, seen)
            rows = store.usage_sums(sql_by, changes=breaks[0], tiers=breaks[1], **filters)
    return rows, breaks


def _label(dim: str, row: dict[str, Any]) -> Any:
    if dim == "hour":
        return _EPOCH + timedelta(hours=row["hour"])
    if dim in ("day", "week", "month"):
        day = (_EPOCH + timedelta(days=row["day"])).date()
        if dim == "week":
            day -= timedelta(days=day.weekday())
        elif dim == "month":
            day = day.replace(day=1)
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    return row[dim]


def _rate(row: dict[str, Any], breaks: tuple[list[datetime], list[int]], pricer: Pricer) -> Rate | None:
    """The rate in force for a group: at its hour or day, else at the start of its price
    period; for an input size inside its tier."""
    changes, tiers = breaks
    time_key = next((k for k in TIME_KEYS if k in row), None)
    if time_key is not None:
        at = _EPOCH + timedelta(seconds=row[time_key] * TIME_KEYS[time_key])
    else:
        at = changes[row["_period"] - 1] if row["_period"] else _EPOCH
    size = tiers[row["_tier"] - 1] + 1 if row["_tier"] else 0
    return pricer.rate(row["model"], row["backend"], at=at, input_tokens=size)


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
    import pandas as pd

    dims = _dims(by)
    store = store if store is not None else TranscriptStore()
    pricer = pricer or DEFAULT_PRICER
    sql_by = list(dict.fromkeys("day" if d in ("week", "month") else d for d in dims))
    filters = {"since": _as_time(since), "until": _as_time(until), "user": user, "team": team,
               "purpose": purpose, "case": case}  # fmt: skip
    rows, breaks = _sums(store, sql_by, filters, pricer)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        key = tuple(_label(d, r) for d in dims)
        acc = out.setdefault(key, {"calls": 0, **dict.fromkeys(_SUMS), "cost_usd": None,
                                   "uncached_cost_usd": None, "unknown_cost_calls": 0})  # fmt: skip
        acc["calls"] += int(r["calls"])
        for col in _SUMS:
            if r[col] is not None:
                acc[col] = (acc[col] or 0) + round(r[col])
        rate = _rate(r, breaks, pricer) if r["model"] is not None else None
        reported = int(r["_reported"])
        acc["unknown_cost_calls"] += int(r["calls"]) - (reported if rate is not None else 0)
        if rate is not None and reported:
            usage = Usage(*(round(r[c] or 0) for c in _SUMS))
            acc["cost_usd"] = (acc["cost_usd"] or 0.0) + rate.cost(usage)
            acc["uncached_cost_usd"] = (acc["uncached_cost_usd"] or 0.0) + rate.cost(usage, cached=False)
    records = []
    for key in sorted(out, key=lambda k: [(v is None, v if v is not None else "") for v in k]):
        acc = out[key]
        saved = None if acc["cost_usd"] is None else acc["uncached_cost_usd"] - acc["cost_usd"]
        records.append({**dict(zip(dims, key, strict=True)), "calls": acc["calls"],
                        **{c: acc[c] for c in _SUMS}, "cost_usd": acc["cost_usd"], "saved_usd": saved,
                        "uncached_cost_usd": acc["uncached_cost_usd"],
                        "unknown_cost_calls": acc["unknown_cost_calls"]})  # fmt: skip
    columns = [*dims, "calls", *_SUMS, "cost_usd", "saved_usd", "uncached_cost_usd", "unknown_cost_calls"]
    df = pd.DataFrame.from_records(records, columns=columns)
    for col in _SUMS:
        df[col] = df[col].astype("Int64")
    for col in ("cost_usd", "saved_usd", "uncached_cost_usd"):
        df[col] = df[col].astype("float64")
    for col in ("calls", "unknown_cost_calls"):
        df[col] = df[col].astype("int64")
    for col in set(dims) & {"hour", "day", "week", "month"}:
        df[col] = pd.to_datetime(df[col], utc=True)
    return df


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
