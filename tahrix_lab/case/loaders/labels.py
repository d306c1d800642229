"""Label categories normalised at load to the one taxonomy (``case.taxonomy``).

The SQL key mirrors ``taxonomy._key`` (lower case, runs of space, dash, slash
and dot as one underscore); ``test_loaders_labels`` checks the two agree. A
category no alias knows is kept as written and counted in the load report.
"""

from __future__ import annotations

import duckdb

from tahrix_lab.case.taxonomy import ALIASES, CATEGORIES

_KEY_SQL = "trim(regexp_replace(lower(trim(category)), '[\\s\\-/.]+', '_', 'g'), '_')"


def normalise_labels(cur: duckdb.DuckDBPyConnection, case_id: str) -> dict[str, int]:
    """Rewrite the case's label categories to canonical ids; return unknown spelling -> labels."""
    mapping = {c: c for c in CATEGORIES} | ALIASES
    cur.execute("CREATE OR REPLACE TEMP TABLE _cat_map (k VARCHAR, canonical VARCHAR)")
    cur.execute(
        "INSERT INTO _cat_map SELECT unnest($k), unnest($v)",
        {"k": list(mapping), "v": list(mapping.values())},
    )
    cur.execute(
        f"""UPDATE labels SET category = m.canonical FROM _cat_map m
            WHERE labels.case_id = $case AND m.k = {_KEY_SQL.replace("category", "labels.category")}
              AND labels.category <> m.canonical""",
        {"case": case_id},
    )
    rows = cur.execute(
        "SELECT category, count(*) FROM labels WHERE case_id = $case AND category NOT IN (SELECT canonical FROM _cat_map) "
        "GROUP BY ALL ORDER BY 1",
        {"case": case_id},
    ).fetchall()
    cur.execute("DROP TABLE IF EXISTS _cat_map")
    return {r[0]: int(r[1]) for r in rows}
