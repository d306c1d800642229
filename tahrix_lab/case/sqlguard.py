"""Read-only SQL for the assistant: one SELECT over the case tables, capped in rows and time.

The query is parsed by DuckDB itself (``json_serialize_sql``, which only
serialises SELECT statements) and its syntax tree is walked: every table must
be a case table, no table function may read files or URLs, no function from
the deny list may appear. It then runs wrapped in ``LIMIT`` on its own cursor,
interrupted when the time limit passes.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import duckdb

from tahrix_lab.case.db import CaseDB, jsonable
from tahrix_lab.case.schema import SQL_TABLES


class SQLRefused(ValueError):
    """The query is not a single read-only SELECT over the case tables."""


ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
DENIED_PREFIXES = (
    "read_",
    "parquet_",
    "duckdb_",
    "pragma_",
    "sqlite_",
    "postgres_",
    "mysql_",
    "iceberg_",
    "delta_",
)
DENIED_FUNCTIONS = frozenset(
    {"glob", "getenv", "query", "query_table", "sniff_csv", "current_setting", "http_get", "http_post",
     "load_extension", "install_extension", "read_text", "read_blob", "checkpoint", "force_checkpoint",
     "set_variable", "getvariable", "which_secret", "shell"}
)  # fmt: skip


def _walk(
    node: Any, tables: set[str], functions: set[str], table_functions: set[str], ctes: set[str]
) -> None:
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "BASE_TABLE":
            schema = node.get("schema_name") or ""
            catalog = node.get("catalog_name") or ""
            if catalog or schema not in ("", "main"):
                raise SQLRefused(
                    f"Only the case tables can be read (not {catalog}.{schema}.{node.get('table_name')})."
                )
            tables.add(str(node.get("table_name", "")).lower())
        elif kind == "TABLE_FUNCTION":
            fn = node.get("function") or {}
            table_functions.add(str(fn.get("function_name", "")).lower())
        if node.get("class") == "FUNCTION" and "function_name" in node:
            functions.add(str(node["function_name"]).lower())
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map", []):
                ctes.add(str(entry.get("key", "")).lower())
        for value in node.values():
            _walk(value, tables, functions, table_functions, ctes)
    elif isinstance(node, list):
        for value in node:
            _walk(value, tables, functions, table_functions, ctes)


def check_sql(cur: duckdb.DuckDBPyConnection, query: str) -> set[str]:
    """Refuse anything but one SELECT over case tables; return the tables it reads."""
    if not query.strip():
        raise SQLRefused("The query is empty.")
    raw = cur.execute("SELECT json_serialize_sql(?)", [query]).fetchone()
    tree: dict[str, Any] = json.loads(raw[0]) if raw else {"error": True}
    if tree.get("error"):
        message = str(tree.get("error_message", "parse error"))
        if "Only SELECT" in message:
            raise SQLRefused(
                "Only a single SELECT statement is allowed (no writes, DDL, COPY, ATTACH, PRAGMA or SET)."
            )
        raise SQLRefused(f"The query could not be parsed: {message[:200]}")
    statements: list[Any] = tree.get("statements") or []
    if len(statements) != 1:
        raise SQLRefused(f"Send exactly one SELECT statement (got {len(statements)}).")
    tables: set[str] = set()
    functions: set[str] = set()
    table_functions: set[str] = set()
    ctes: set[str] = set()
    _walk(statements[0], tables, functions, table_functions, ctes)
    bad_tf = sorted(table_functions - ALLOWED_TABLE_FUNCTIONS)
    if bad_tf:
        raise SQLRefused(
            f"Table functions such as {', '.join(bad_tf)} are not allowed: query the case tables only."
        )
    bad_fn = sorted(f for f in functions if f in DENIED_FUNCTIONS or f.startswith(DENIED_PREFIXES))
    if bad_fn:
        raise SQLRefused(f"The function(s) {', '.join(bad_fn)} are not allowed here.")
    unknown = sorted(tables - ctes - SQL_TABLES)
    if unknown:
        raise SQLRefused(
            f"Only the case tables can be read; not {', '.join(unknown)}. Tables: {', '.join(sorted(SQL_TABLES))}."
        )
    return tables - ctes


# Tables without a case_id column (shared reference data).
UNSCOPED = frozenset({"chains", "assets", "prices"})


def _scope(cur: duckdb.DuckDBPyConnection, case_id: str) -> None:
    """Shadow each case table, on this cursor only, by a temp view of one case's rows."""
    cur.execute("SET VARIABLE tahrix_case = ?", [case_id])
    row = cur.execute("SELECT current_database()").fetchone()
    catalog = '"' + str(row[0] if row else "memory").replace('"', '""') + '"'
    for table in sorted(SQL_TABLES - UNSCOPED):
        cur.execute(
            f"CREATE TEMP VIEW {table} AS SELECT * FROM {catalog}.main.{table} "
            "WHERE case_id = getvariable('tahrix_case')"
        )


def run_sql(
    db: CaseDB, query: str, *, limit: int = 200, timeout_s: float = 10.0, case_id: str | None = None
) -> dict[str, Any]:
    """Run a checked query on a fresh cursor; rows capped at ``limit``, interrupted after
    ``timeout_s``; with ``case_id`` the case tables show only that case's rows."""
    cur = db.connection.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")
        tables = check_sql(cur, query)
        if case_id is not None:
            _scope(cur, case_id)
        body = query.strip().rstrip(";")
        timer = threading.Timer(timeout_s, cur.interrupt)
        timer.start()
        try:
            res = cur.execute(f"SELECT * FROM (\n{body}\n) AS q LIMIT {int(limit) + 1}")
            columns = [d[0] for d in res.description]
            rows = res.fetchall()
        except duckdb.InterruptException:
            raise SQLRefused(
                f"The query ran longer than {timeout_s:g} s and was stopped; narrow it."
            ) from None
        except duckdb.Error as exc:
            raise SQLRefused(f"The query failed: {str(exc).splitlines()[0][:300]}") from None
        finally:
            timer.cancel()
    finally:
        cur.close()
    truncated = len(rows) > limit
    return {
        "columns": columns,
        "rows": [jsonable(list(r)) for r in rows[:limit]],
        "row_count": min(len(rows), limit),
        "truncated": truncated,
        "tables": sorted(tables),
        "limits": {"max_rows": limit, "timeout_s": timeout_s},
        "scoped_to_case": case_id,
    }
