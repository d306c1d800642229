"""The cost query's SQL for both engines: token sums of model calls, grouped in the engine.

Ten million calls cannot be pulled into Python to be priced, so the engine sums them per
asked dimension (user, team, case, session, purpose, model, backend, hour or day) plus
what the price depends on: model, backend, the price period (``_period``: how many of the
given price-change instants lie at or before the call) and the input-token tier
(``_tier``: how many of the given tier thresholds the call's input exceeds). Prices are
linear within one (model, backend, period, tier), so the caller prices each group's sums
with the pricer and gets what pricing every call alone would give.

The two engines differ only in the placeholder and the epoch arithmetic (``Dialect``).
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
) -> tuple[str, list[Any], list[str]]:
    """The grouped query, its parameters and the names of its columns.

    ``by``: dimensions from ``DIMENSIONS`` (model and backend are always keys); ``filters``:
    since, until, user, team, purpose, case (``None`` means no filter)."""
    unknown = [d for d in by if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown cost dimension(s) {unknown}; choose from {DIMENSIONS}")
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
    sql = (
        f"SELECT {', '.join(f'{expr} AS k{i}' for i, (_, expr) in enumerate(keys))}, count(*) AS calls, "
        f"sum(m.input_tokens::{d}), sum(m.output_tokens::{d}), sum(m.cache_read_tokens::{d}), "
        f"sum(m.cache_write_tokens::{d}), count(coalesce(m.input_tokens, m.output_tokens)) "
        f"FROM messages m{joins} WHERE {' AND '.join(where)} "
        f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}"
    )
    return sql, params + wparams, [name for name, _ in keys] + list(SUM_COLUMNS)


def as_dicts(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(names, r, strict=True)) for r in rows]
