"""SQL fragments the source loaders share: quoting, number clean-up, exact scaling.

Amounts are scaled as text, never through floats: ``raw_from_decimal`` turns
``"1,250.5"`` with 18 decimals into ``"1250500000000000000000"`` and refuses
(returns NULL, so the caller names the line) a value with more fraction digits
than the token has; ``decimal_from_raw`` turns a uint256 string into
``DECIMAL(38,18)`` without going through a 128-bit integer.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

from tahrix_lab.case.chains import EVM_CHAINS

EVM_IN = "(" + ", ".join(f"'{c}'" for c in EVM_CHAINS) + ")"
UNKNOWN_TEXTS = "('N/A', 'NA', 'N.A.', '-', '--', 'NULL', 'NONE', 'NAN', '?')"
DECIMAL_RE = r"^[0-9]+(\.[0-9]+)?$"
INTEGER_RE = r"^[0-9]+$"


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_STAGED = re.compile(r'"c[0-9]+"')


def text(expr: str | None) -> str:
    """A text field: trimmed, empty as NULL; a missing column is NULL. (``N/A`` in a hash or address
    column is refused by the checks; in a number it is unknown: see ``number``.) A column of a
    staged CSV (``"c3"``) is trimmed already (``csvfile.stage_csv``): it is used as it is, since
    DuckDB would evaluate ``nullif(trim(…))`` again at every use, twice each."""
    if expr is None:
        return "NULL"
    if _STAGED.fullmatch(expr):
        return expr
    return f"nullif(trim({expr}), '')"


def number(expr: str | None) -> str:
    """A number as exported: thousands separators, ``$`` and spaces dropped; blank/``N/A`` NULL."""
    if expr is None:
        return "NULL"
    t = text(expr)
    cleaned = f"replace(replace(replace({t}, ',', ''), '$', ''), ' ', '')"
    # most values are plain already (a digit first, nothing to drop): those skip the clean-up
    plain = f"(NOT contains({t}, ',') AND NOT contains({t}, '$') AND NOT contains({t}, ' ') AND {t}[1] BETWEEN '0' AND '9')"
    return (
        f"CASE WHEN {t} IS NULL THEN NULL WHEN {plain} THEN {t} "
        f"WHEN upper({t}) IN {UNKNOWN_TEXTS} THEN NULL ELSE nullif({cleaned}, '') END"
    )


def raw_from_decimal(s: str, dec: str) -> str:
    """Exact base units from a decimal text ``s`` (already cleaned) and decimals ``dec``."""
    frac = f"split_part({s}, '.', 2)"
    digits = f"ltrim(split_part({s}, '.', 1) || rpad({frac}, {dec}, '0'), '0')"
    return (
        f"CASE WHEN {s} IS NULL OR {dec} IS NULL OR length({frac}) > {dec} THEN NULL "
        f"ELSE CASE WHEN {digits} = '' THEN '0' ELSE {digits} END END"
    )


def decimal_from_raw(raw: str, dec: str) -> str:
    """``DECIMAL(38,18)`` from base units (text) and decimals; NULL when decimals are unknown."""
    padded = f"(CASE WHEN length({raw}) <= {dec} THEN repeat('0', {dec} + 1 - length({raw})) || {raw} ELSE {raw} END)"
    as_text = f"(CASE WHEN {dec} = 0 THEN {raw} ELSE left({padded}, length({padded}) - {dec}) || '.' || right({padded}, {dec}) END)"
    return (
        f"CASE WHEN {raw} IS NULL OR {dec} IS NULL THEN NULL ELSE TRY_CAST({as_text} AS DECIMAL(38,18)) END"
    )


def fetch_one(cur: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> tuple[Any, ...]:
    """One row, with the result read to the end (a half-read result blocks the cursor)."""
    rows = cur.execute(sql, params if params is not None else []).fetchall()
    return tuple(rows[0]) if rows else ()


def fetch_value(cur: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> Any:
    row = fetch_one(cur, sql, params)
    return row[0] if row else None
