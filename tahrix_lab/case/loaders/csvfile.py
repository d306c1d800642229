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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tahrix_lab.case.loaders.report import LoadError
from tahrix_lab.case.loaders.sqlparts import fetch_value, q

_NULL = "\x01<no field>"  # DuckDB's null string: empty fields stay '', padding becomes NULL
_LINE_RE = re.compile(r"[Ll]ine:?\s*(\d+)")
_EXTRA = 2  # fields past the header we read (and accept when empty)


def header_key(name: str) -> str:
    return re.sub(r"[\s_]+", "", name.strip().strip('"').lower())


@dataclass
class Staged:
    """One or more files of one header layout, staged in one table: ``_f`` (index into ``files``),
    ``_line`` (physical line in its file, the header is line 1), ``c0…``."""

    files: list[Path]
    table: str
    header: list[str]  # as written
    keys: dict[str, str]  # header key -> staged column (c0…)
    file_rows: list[int]  # rows read, per file

    @property
    def file(self) -> Path:
        return self.files[0]

    @property
    def rows(self) -> int:
        return sum(self.file_rows)

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


def _list(values: list[int]) -> str:
    """A list literal (a view cannot hold parameters)."""
    return "CAST([" + ", ".join(str(int(v)) for v in values) + "] AS BIGINT[])"


_FILE_RE = re.compile(r"^\s*file = (.+)$", re.MULTILINE)


def _read_error(file: Path, n: int, exc: duckdb.Error) -> LoadError:
    text = str(exc)
    m = _LINE_RE.search(text)
    line = int(m.group(1)) + 1 if m else None
    if "quoted new lines" in text:  # DuckDB names the record's first line here, the header counted
        return LoadError(file, "a quoted field holds a line break; remove the line breaks inside the "
                         "quotes (or export the file again) and load it again",
                         line=line - 1 if line else None)  # fmt: skip
    if "Expected Number of Columns" in text or "too many" in text.lower():
        return LoadError(file, f"this row has more fields than the header ({n})", line=line)
    return LoadError(file, f"the file could not be read: {text.splitlines()[0][:200]}", line=line)


def stage_csv(cur: duckdb.DuckDBPyConnection, files: Path | Sequence[Path], table: str) -> Staged:
    """Stage one file, or several files with the same header, with one ``read_csv`` (one pass
    over all of them: DuckDB reads a list of files in parallel, where per file it would not)."""
    paths = [files] if isinstance(files, Path) else list(files)
    header = read_header(paths[0])
    for other in paths[1:]:
        if read_header(other) != header:  # the caller groups by header; a guard for direct calls
            raise LoadError(other, "its header differs from the other files staged with it", line=1)
    n = len(header)
    names = [f"c{i}" for i in range(n)] + [f"x{i}" for i in range(_EXTRA)]
    raw = f"{table}_raw"
    # Read once, every field trimmed and empty as NULL (what ``sqlparts.text`` would make of it on
    # every read). A blank row, a padded (missing) last field or a non-empty one past the header
    # is flagged on the raw text.
    blank = " AND ".join(f"coalesce(c{i}, '') = ''" for i in range(n))
    trimmed = ", ".join(f"nullif(trim(c{i}), '') AS c{i}" for i in range(n))
    read = (
        f"CREATE OR REPLACE TEMP TABLE {raw} AS SELECT file_index AS _f, ({blank}) AS _blank, "
        f"c{n - 1} IS NULL AS _short, (x0 <> '' OR x1 IS NOT NULL) AS _long, {trimmed} "
        "FROM read_csv(?, header = false, skip = 1, "
        "auto_detect = false, delim = ',', quote = '\"', escape = '\"', null_padding = true, "
        "strict_mode = true, nullstr = ?, columns = ?)"
    )
    types = dict.fromkeys(names, "VARCHAR")
    try:
        cur.execute(read, [[str(f) for f in paths], _NULL, types])
    except duckdb.Error as exc:
        # DuckDB's message names the file (``file = …``); the transaction is aborted now, so
        # the files cannot be read again one by one to find it
        named = _FILE_RE.search(str(exc))
        culprit = next((f for f in paths if named and str(f) == named.group(1).strip()), paths[0])
        raise _read_error(culprit, n, exc) from None
    # Lines count from each file's first row: rowids follow the files in order (inside a
    # transaction they start at a large offset), so a file's first rowid is its base. A view, not
    # a copy: the later steps read the staged rows a few times, a copy would write them all again.
    first = dict(cur.execute(f"SELECT _f, min(rowid) FROM {raw} GROUP BY _f").fetchall())
    bases = [int(first.get(i, 0)) for i in range(len(paths))]
    cur.execute(
        f"""CREATE OR REPLACE TEMP VIEW {table} AS
        SELECT _f, rowid - {_list(bases)}[CAST(_f AS BIGINT) + 1] + 2 AS _line, _short, _long,
               {", ".join(f"c{i}" for i in range(n))}
        FROM {raw} WHERE NOT _blank"""
    )
    per_file = cur.execute(
        f"""SELECT _f, count(*), min(_line) FILTER (WHERE _short), min(_line) FILTER (WHERE _long)
            FROM {table} GROUP BY _f ORDER BY _f"""
    ).fetchall()
    rows = [0] * len(paths)
    for f, count, fewer, more in per_file:
        file = paths[f]
        if fewer is not None and (more is None or fewer <= more):
            raise LoadError(file, f"this row has fewer fields than the header ({n})", record=int(fewer))
        if more is not None:
            raise LoadError(file, f"this row has more fields than the header ({n})", record=int(more))
        rows[f] = int(count)
    keys: dict[str, str] = {}
    for i, h in enumerate(header):
        keys.setdefault(header_key(h), f"c{i}")
    return Staged(paths, table, header, keys, rows)


def first_bad(cur: duckdb.DuckDBPyConnection, st: Staged, checks: list[tuple[str, str, str]]) -> None:
    """Refuse at the earliest row where a check fails: ``(column shown, SQL true when bad, message)``.

    The message may hold ``{value}`` (the offending text, shortened). With several files staged
    together, the first file (in load order) holding a bad row is named, as a load one by one would.
    """
    if not checks:
        return
    select = ", ".join(f"min(_line) FILTER (WHERE {cond})" for _, cond, _ in checks)
    # one pass over all staged files; a few rows back (one per file)
    per_file = cur.execute(f"SELECT _f, {select} FROM {st.table} GROUP BY _f ORDER BY _f").fetchall()
    found = next((r for r in per_file if any(v is not None for v in r[1:])), None)
    if found is None:
        return
    f = found[0]
    line, i = min((line, i) for i, line in enumerate(found[1:]) if line is not None)
    column, _, message = checks[i]
    ref = st.keys.get(header_key(column))
    value = (
        fetch_value(cur, f"SELECT {q(ref)} FROM {st.table} WHERE _f = ? AND _line = ?", [f, line])
        if ref
        else None
    )
    shown = repr(str(value)[:60]) if value is not None else "an empty value"
    raise LoadError(st.files[f], message.format(value=shown), record=int(line), column=column)
