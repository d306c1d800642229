"""What a load did, per file: the errors it refuses with and the report it returns.

``LoadError`` names the file, line and column of the first problem; nothing
from a refused load is written. ``LoadReport`` holds one ``FileReport`` per
file (rows read, movements inserted, merged into existing, filled, conflicting
with the fields, skipped with the reason, unpriced, unknown decimals); the CLI
prints it as a table, a notebook shows ``_repr_html_``, ``to_frame()`` gives a
pandas DataFrame.
"""

from __future__ import annotations

import csv
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.errors import UserFacingError

if TYPE_CHECKING:
    import pandas as pd


def physical_line(file: str | os.PathLike[str], record: int) -> int:
    """The line an editor shows for a CSV file's ``record``-th record (the header is 1).

    DuckDB's reader skips blank lines and reads a quoted field over several lines as one
    record, so its record numbers drift from the lines. Read again here, only when a load
    is refused; a file that cannot be read so keeps the record number."""
    seen, end = 0, 0
    try:
        with open(file, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            for row in reader:
                start, end = end + 1, reader.line_num
                if row:
                    seen += 1
                    if seen == record:
                        return start
    except (OSError, UnicodeDecodeError, csv.Error):
        pass
    return record


class LoadError(UserFacingError):
    """A file could not be loaded; nothing from it was written."""

    def __init__(
        self,
        file: str | os.PathLike[str],
        message: str,
        *,
        line: int | None = None,
        column: str | None = None,
        record: int | None = None,
    ):
        if record is not None:  # the record number DuckDB's reader gives: as the file's line
            line = physical_line(file, record)
        where = str(file)
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column!r}"
        super().__init__(f"{where}: {message}")
        self.file = str(file)
        self.line = line
        self.column = column


@dataclass
class Conflict:
    """Two sources disagree on one field of one movement (or transaction / asset)."""

    table: str
    key: str
    field: str
    existing: str | None
    incoming: str | None
    line: int | None = None


@dataclass
class FileReport:
    file: str
    format: str
    rows_read: int = 0
    inserted: int = 0  # movements (transfers) new to the case
    merged: int = 0  # movements already in the case (from this or another file)
    filled: int = 0  # of the merged: rows this file added a field to
    conflicting: int = 0  # movements with at least one conflicting field
    conflicts: list[Conflict] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows
    unpriced: int = 0  # this file's movements with no USD value (NULL, not 0)
    unknown_decimals: int = 0  # this file's token movements whose amount is unknown
    tables: dict[str, int] = field(default_factory=dict)  # other tables: rows inserted
    notes: list[str] = field(default_factory=list)
    sha256: str | None = None  # of the file's bytes: an unchanged file loaded again is not re-read

    def skip(self, reason: str, n: int) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + int(n)

    def row(self) -> dict[str, Any]:
        return {
            "file": os.path.basename(self.file),
            "format": self.format,
            "rows read": self.rows_read,
            "inserted": self.inserted,
            "merged": self.merged,
            "filled": self.filled,
            "conflicting": self.conflicting,
            "conflict fields": ", ".join(sorted({c.field for c in self.conflicts})),
            "skipped": sum(self.skipped.values()),
            "skip reasons": "; ".join(f"{k}: {v}" for k, v in sorted(self.skipped.items())),
            "unpriced": self.unpriced,
            "unknown decimals": self.unknown_decimals,
        }


@dataclass
class LoadReport:
    case_id: str
    inserted: dict[str, int] = field(default_factory=dict)  # per table, all files of the load
    skipped_duplicates: dict[str, int] = field(default_factory=dict)  # per table: rows already present
    files: list[FileReport] = field(default_factory=list)
    derived_utxo_transfers: int = 0
    unknown_categories: dict[str, int] = field(default_factory=dict)  # label category as written -> labels

    def add_inserted(self, table: str, n: int) -> None:
        self.inserted[table] = self.inserted.get(table, 0) + int(n)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "inserted": self.inserted,
            "skipped_duplicates": self.skipped_duplicates,
            "derived_utxo_transfers": self.derived_utxo_transfers,
            "unknown_categories": self.unknown_categories,
            "files": [asdict(f) for f in self.files],
        }

    def rows(self) -> list[dict[str, Any]]:
        return [f.row() for f in self.files]

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows())

    def _repr_html_(self) -> str:
        html: str = self.to_frame().to_html(index=False)
        return f"<p>Load into <b>{self.case_id}</b></p>" + html

    def table(self) -> str:
        """The report as a fixed-width text table (the CLI prints it)."""
        cols = ["file", "format", "rows read", "inserted", "merged", "filled", "conflicting", "skipped",
                "unpriced", "unknown decimals"]  # fmt: skip
        rows = self.rows()
        widths = {c: max([len(c), *(len(str(r[c])) for r in rows)]) for c in cols}
        lines = ["  ".join(c.ljust(widths[c]) for c in cols), "  ".join("-" * widths[c] for c in cols)]
        lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
        for f in self.files:
            for reason, n in sorted(f.skipped.items()):
                lines.append(f"{os.path.basename(f.file)}: skipped {n}: {reason}")
            for c in f.conflicts[:20]:
                where = f" (line {c.line})" if c.line else ""
                lines.append(
                    f"{os.path.basename(f.file)}{where}: conflict in {c.table} {c.key} field {c.field}: "
                    f"kept {c.existing!r}, file has {c.incoming!r}"
                )
            if len(f.conflicts) > 20:
                lines.append(f"{os.path.basename(f.file)}: … {len(f.conflicts) - 20} more conflicts")
            lines += [f"{os.path.basename(f.file)}: {n}" for n in f.notes]
        if self.derived_utxo_transfers:
            lines.append(f"derived UTXO transfers: {self.derived_utxo_transfers}")
        for cat, n in sorted(self.unknown_categories.items()):
            lines.append(f"unknown label category kept as written: {cat!r} ({n} labels)")
        return "\n".join(lines)
