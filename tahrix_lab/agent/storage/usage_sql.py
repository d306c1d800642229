"""The cost query's SQL for both engines: token sums of model calls, grouped in the engine.

Ten million calls cannot be pulled into Python to be priced, so the engine sums them per
asked dimension (user, team, case, session, purpose, model, backend, hour or day) plus
what the price depends on: model, backend, the price period (``_period``: how many of the
given price-change instants lie at or before the call) and the input-token tier
(``_tier``: how many of the given tier thresholds the call's input exceeds). Prices are
linear within one (model, backend, period, tier), so the caller prices each group's sums
with the pricer and gets what pricing every call alone would give.

The two engines differ only in the placeholder and the epoch arithmetic (``Dialect``).

PostgreSQL keeps a rollup, ``usage_daily`` (pg_schema 0003): each session's calls summed
per UTC day, model, backend and input-size class, kept by a trigger as messages are
written. DuckDB sums ten million calls in about a second; PostgreSQL reads every row's
tuple far slower, so there the query reads the rollup whenever it can answer exactly:
no ``hour`` key, ``since``/``until`` on midnights, and every tier threshold asked on
``SIZE_LADDER`` (a size class lies wholly on one side of each). Otherwise it reads the
calls themselves, exact and slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# dimension -> the key's SQL over m (messages), s (sessions) and c (session_cases)
_KEYS: dict[str, str] = {
    "model": "m.model_id",
    "backend": "m.backend",
    "user": 's."user"',
    "team": "s.team",
    "purpose": "s.purpose",
    "case": "c.case_id",
    "session": "m.session_id",
}
TIME_KEYS = {"hour": 3600, "day": 86400}  # epoch hours or days: cheap integer keys
DIMENSIONS = (*_KEYS, *TIME_KEYS)
# Every input-token tier threshold in genai-prices' table (pricing._breakpoints over all
# models): the rollup's size classes are cut at each, so any model's tiers are exact.
SIZE_LADDER = (32000, 100000, 128000, 199999, 200000, 256000, 272000, 512000, 524288)
SUM_COLUMNS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "_reported",
)


@dataclass(frozen=True)
class Dialect:
    mark: str  # the parameter placeholder
    epoch_div: str  # "{col}" and "{per}": whole periods of per seconds since 1970
    double: str


DUCKDB = Dialect("?", "epoch_us({col}) // {per}000000", "DOUBLE")
POSTGRES = Dialect("%s", "floor(extract(epoch FROM {col}) / {per})::BIGINT", "float8")


def usage_sums_sql(
    dialect: Dialect,
    by: Sequence[str],
    *,
    filters: dict[str, Any],
    changes: Sequence[datetime] = (),
    tiers: Sequence[int] = (),
    rollup: bool = False,
) -> tuple[str, list[Any], list[str]]:
    """The grouped query, its parameters and the names of its columns.

    ``by``: dimensions from ``DIMENSIONS`` (model and backend are always keys); ``filters``:
    since, until, user, team, purpose, case, through_seq (``None`` means no filter).
    ``through_seq`` keeps the calls written at or before that ``seq`` (the budget's first
    read, so the calls it syncs afterwards are never counted twice) and adds a ``_last``
    column, each group's latest ``created_at`` (where the budget places the group's spend)."""
    unknown = [d for d in by if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown cost dimension(s) {unknown}; choose from {DIMENSIONS}")
    if rollup and _rollup_answers(by, filters, changes, tiers):
        return _rollup_sql(by, filters=filters, changes=changes, tiers=tiers)
    q = dialect.mark
    keys: list[tuple[str, str]] = []
    for d in dict.fromkeys([*by, "model", "backend"]):
        if d in TIME_KEYS:
            keys.append((d, dialect.epoch_div.format(col="m.created_at", per=TIME_KEYS[d])))
        else:
            keys.append((d, _KEYS[d]))
    # the period is its own key unless a time key already says it (changes fall on midnights)
    if not any(d in TIME_KEYS for d in by):
        keys.append(("_period", " + ".join(f"(m.created_at >= {q})::INTEGER" for _ in changes) or "0"))
    keys.append(
        ("_tier", " + ".join(f"(coalesce(m.input_tokens, 0) > {int(t)})::INTEGER" for t in tiers) or "0")
    )
    params: list[Any] = list(changes) if not any(d in TIME_KEYS for d in by) else []
    where, wparams = ["m.role = 'assistant'"], []
    for name, clause in (
        ("since", f"m.created_at >= {q}"),
        ("until", f"m.created_at < {q}"),
        ("user", f's."user" = {q}'),
        ("team", f"s.team = {q}"),
        ("purpose", f"s.purpose = {q}"),
        ("case", f"c.case_id = {q}"),
        ("through_seq", f"m.seq <= {q}"),
    ):
        if filters.get(name) is not None:
            where.append(clause)
            wparams.append(filters[name])
    used = set(by) | {k for k, v in filters.items() if v is not None}
    joins = ""
    if used & {"user", "team", "purpose"}:
        joins += " JOIN sessions s ON s.id = m.session_id"
    if "case" in used:
        joins += " LEFT JOIN session_cases c ON c.session_id = m.session_id"
    d = dialect.double
    last = filters.get("through_seq") is not None
    sql = (
        f"SELECT {', '.join(f'{expr} AS k{i}' for i, (_, expr) in enumerate(keys))}, count(*) AS calls, "
        f"sum(m.input_tokens::{d}), sum(m.output_tokens::{d}), sum(m.cache_read_tokens::{d}), "
        f"sum(m.cache_write_tokens::{d}), count(coalesce(m.input_tokens, m.output_tokens))"
        f"{', max(m.created_at)' if last else ''} FROM messages m{joins} WHERE {' AND '.join(where)} "
        f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}"
    )
    return sql, params + wparams, [name for name, _ in keys] + list(SUM_COLUMNS) + (["_last"] if last else [])


def _midnight(at: datetime | None) -> bool:
    return at is None or (at.timestamp() % 86400 == 0)


def _rollup_answers(
    by: Sequence[str], filters: dict[str, Any], changes: Sequence[datetime], tiers: Sequence[int]
) -> bool:
    """Whether ``usage_daily`` gives the exact answer (see the module docstring)."""
    return (
        filters.get("through_seq") is None  # the rollup keeps no seq
        and "hour" not in by
        and _midnight(filters.get("since"))
        and _midnight(filters.get("until"))
        and all(_midnight(c) for c in changes)
        and set(tiers) <= set(SIZE_LADDER)
    )


def _rollup_sql(
    by: Sequence[str], *, filters: dict[str, Any], changes: Sequence[datetime], tiers: Sequence[int]
) -> tuple[str, list[Any], list[str]]:
    """The grouped query over PostgreSQL's ``usage_daily`` (same columns as over the calls)."""
    keys: list[tuple[str, str]] = []
    for d in dict.fromkeys([*by, "model", "backend"]):
        keys.append((d, {"day": "m.day", "model": "m.model_id", "backend": "m.backend"}.get(d) or _KEYS[d]))
    days = [int(c.timestamp()) // 86400 for c in changes]
    if "day" not in by:
        keys.append(("_period", " + ".join(f"(m.day >= {d})::INTEGER" for d in days) or "0"))
    # size class k holds inputs in (LADDER[k-1], LADDER[k]]: over a tier threshold t iff t <= LADDER[k-1]
    over = [sum(1 for t in tiers if t <= SIZE_LADDER[k - 1]) if k else 0 for k in range(len(SIZE_LADDER) + 1)]
    keys.append(("_tier", "(ARRAY[" + ", ".join(map(str, over)) + "])[m.size_class + 1]"))
    where, params = ["TRUE"], []
    for name, clause in (
        ("since", "m.day >= %s"),
        ("until", "m.day < %s"),
        ("user", 's."user" = %s'),
        ("team", "s.team = %s"),
        ("purpose", "s.purpose = %s"),
        ("case", "c.case_id = %s"),
    ):
        value = filters.get(name)
        if value is not None:
            where.append(clause)
            params.append(int(value.timestamp()) // 86400 if name in ("since", "until") else value)
    used = set(by) | {k for k, v in filters.items() if v is not None}
    joins = ""
    if used & {"user", "team", "purpose"}:
        joins += " JOIN sessions s ON s.id = m.session_id"
    if "case" in used:
        joins += " LEFT JOIN session_cases c ON c.session_id = m.session_id"
    sql = (
        f"SELECT {', '.join(f'{expr} AS k{i}' for i, (_, expr) in enumerate(keys))}, sum(m.calls)::BIGINT, "
        "sum(m.input_tokens::float8), sum(m.output_tokens::float8), sum(m.cache_read_tokens::float8), "
        f"sum(m.cache_write_tokens::float8), sum(m.reported)::BIGINT FROM usage_daily m{joins} WHERE {' AND '.join(where)} "
        f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}"
    )
    return sql, params, [name for name, _ in keys] + list(SUM_COLUMNS)


def as_dicts(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(names, r, strict=True)) for r in rows]
