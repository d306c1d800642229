"""Read an export CSV as it really comes into a staged all-text DuckDB table.

BOM, CRLF, quoted or bare headers, a trailing empty field on every row (real
Etherscan internal exports carry one more field than the header names) and
blank lines are accepted; a row with fewer fields, or a non-empty field past
the header, is refused with its line. Columns are staged as ``c0…cN`` and
found by a normalised header key (lower case, no spaces or underscores), so
``Txn Fee (ETH)`` and ``TxnFee(ETH)`` are one column.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tahrix_lab.case.loaders.report import LoadError
from tahrix_lab.case.loaders.sqlparts import fetch_one, fetch_value, q

_NULL = "\x01<no field>"  # DuckDB's null string: empty fields stay '', padding becomes NULL
_LINE_RE = re.compile(r"[Ll]ine:?\s*(\d+)")
_EXTRA = 2  # fields past the header we read (and accept when empty)


def header_key(name: str) -> str:
    return re.sub(r"[\s_]+", "", name.strip().strip('"').lower())


@dataclass
class Staged:
    file: Path
    table: str
    header: list[str]  # as written
    keys: dict[str, str]  # header key -> staged column (c0…)
    rows: int

    def col(self, *keys: str) -> str | None:
        """The staged column (quoted) for the first of these header keys present."""
        for k in keys:
            if k in self.keys:
                return q(self.keys[k])
        return None

    def name(self, *keys: str) -> str:
        """The header as written for the first of these keys present (for error messages)."""
        for k in keys:
            if k in self.keys:
                return self.header[int(self.keys[k][1:])]
        return keys[0]

    def need(self, *keys: str) -> str:
        found = self.col(*keys)
        if found is None:
            raise LoadError(self.file, f"the column {keys[0]!r} is missing", line=1, column=keys[0])
        return found

    def drop(self, cur: duckdb.DuckDBPyConnection) -> None:
        cur.execute(f"DROP VIEW IF EXISTS {self.table}")
        cur.execute(f"DROP TABLE IF EXISTS {self.table}_raw")

    def key_starting(self, prefix: str) -> str | None:
        return next((k for k in self.keys if k.startswith(prefix)), None)


def read_header(file: Path) -> list[str]:
    try:
        with file.open(newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), [])
    except OSError as exc:
        raise LoadError(file, f"cannot open: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LoadError(file, "not a UTF-8 text file (a CSV export was expected)", line=1) from None
    except csv.Error as exc:
        raise LoadError(file, f"the header could not be read: {exc}", line=1) from None
    header = [h.strip() for h in header]
    while header and header[-1] == "":  # a trailing delimiter on the header line
        header.pop()
    if not header:
        raise LoadError(file, "the file is empty (no header row)", line=1)
    return header


def stage_csv(cur: duckdb.DuckDBPyConnection, file: Path, table: str) -> Staged:
    header = read_header(file)
    n = len(header)
    names = [f"c{i}" for i in range(n)] + [f"x{i}" for i in range(_EXTRA)]
    raw = f"{table}_raw"
    try:
        cur.execute(
            f"CREATE OR REPLACE TEMP TABLE {raw} AS SELECT * FROM read_csv(?, header = false, skip = 1, "
            "auto_detect = false, delim = ',', quote = '\"', escape = '\"', null_padding = true, "
            "strict_mode = true, nullstr = ?, columns = ?)",
            [str(file), _NULL, dict.fromkeys(names, "VARCHAR")],
        )
    except duckdb.Error as exc:
        text = str(exc)
        m = _LINE_RE.search(text)
        line = int(m.group(1)) + 1 if m else None
        if "Expected Number of Columns" in text or "too many" in text.lower():
            raise LoadError(file, f"this row has more fields than the header ({n})", line=line) from None
        raise LoadError(
            file, f"the file could not be read: {text.splitlines()[0][:200]}", line=line
        ) from None
    blank = " AND ".join(f"coalesce(c{i}, '') = ''" for i in range(n))
    # rowids inside a transaction start at a large offset: count lines from the first. A view, not a
    # copy: every later step reads the staged rows once anyway.
    base = int(fetch_value(cur, f"SELECT coalesce(min(rowid), 0) FROM {raw}") or 0)
    cur.execute(
        f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT rowid - {base} + 2 AS _line, * FROM {raw} WHERE NOT ({blank})"
    )
    bad = fetch_one(
        cur,
        f"SELECT min(_line) FILTER (WHERE c{n - 1} IS NULL), min(_line) FILTER (WHERE x0 <> '' OR x1 IS NOT NULL) "
        f"FROM {table}",
    )
    if bad and bad[0] is not None and (bad[1] is None or bad[0] <= bad[1]):
        raise LoadError(file, f"this row has fewer fields than the header ({n})", line=int(bad[0]))
    if bad and bad[1] is not None:
        raise LoadError(file, f"this row has more fields than the header ({n})", line=int(bad[1]))
    keys: dict[str, str] = {}
    for i, h in enumerate(header):
        keys.setdefault(header_key(h), f"c{i}")
    rows = int(fetch_value(cur, f"SELECT count(*) FROM {table}") or 0)
    return Staged(file, table, header, keys, rows)


def first_bad(cur: duckdb.DuckDBPyConnection, st: Staged, checks: list[tuple[str, str, str]]) -> None:
    """Refuse at the earliest row where a check fails: ``(column shown, SQL true when bad, message)``.

    The message may hold ``{value}`` (the offending text, shortened).
    """
    if not checks:
        return
    select = ", ".join(f"min(_line) FILTER (WHERE {cond})" for _, cond, _ in checks)
    found = fetch_one(cur, f"SELECT {select} FROM {st.table}")
    hits = [(line, i) for i, line in enumerate(found) if line is not None]
    if not hits:
        return
    line, i = min(hits)
    column, _, message = checks[i]
    ref = st.keys.get(header_key(column))
    value = fetch_value(cur, f"SELECT {q(ref)} FROM {st.table} WHERE _line = ?", [line]) if ref else None
    shown = repr(str(value)[:60]) if value is not None else "an empty value"
    raise LoadError(st.file, message.format(value=shown), line=int(line), column=column)
