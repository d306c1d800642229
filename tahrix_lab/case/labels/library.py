"""The label library's queries: what is known about an address, and from which sources.

The table (``label_library``, migration ``0003_label_library``) holds every imported
label once per workspace. Cases read labels through the ``case_labels`` view (their own
labels, analysts' labels from other cases, and the library's for the addresses they
hold); ``find`` answers for any address, in a case or not.

Ranking, the same everywhere (``db.LABEL_RANK``): a label marked as overriding (an analyst's own,
marked so) first, then the higher confidence level, a cluster definer, the newer. The
best label is only a default: every label is returned with its source, and differing
categories are a conflict the reader is told about.
"""

from __future__ import annotations

from typing import Any

from tahrix_lab.case.db import LABEL_RANK as RANK
from tahrix_lab.case.db import CaseDB, jdict, norm_address

_LIB = """
SELECT label_id, chain, address, coalesce(label, entity, source_category, source) AS label, entity, category,
       source_category, abuse, source, source_version, confidence,
       CASE WHEN overrides THEN 100 ELSE confidence_level END AS confidence_level, FALSE AS is_cluster_definer,
       valid_from, valid_to, added_by AS created_by, updated_at AS lastmod, program, asset, overrides,
       'library' AS origin, NULL AS from_case
FROM label_library"""
_CASE = """
SELECT label_id, chain, address, label, entity, category, NULL AS source_category, abuse, source,
       NULL AS source_version, confidence,
       CASE WHEN confidence = 'override' THEN 100 ELSE confidence_level END AS confidence_level,
       coalesce(is_cluster_definer, FALSE) AS is_cluster_definer, valid_from, valid_to, created_by, lastmod,
       NULL AS program, NULL AS asset, confidence = 'override' AS overrides,
       CASE WHEN label_id LIKE 'LBL-A-%' THEN 'analyst' ELSE 'case' END AS origin, case_id AS from_case
FROM labels"""


def find(db: CaseDB, address: str, chain: str | None = None) -> list[dict[str, Any]]:
    """Every label of an address (any chain unless given): the library's, analysts' and the
    cases' own, best first per chain, each with its source; ``conflict`` when categories differ."""
    raw = address.strip()
    forms = list(dict.fromkeys([raw, raw.lower()]))
    rows = db.rows(
        f"""SELECT * FROM ({_LIB} UNION ALL {_CASE}) l
            WHERE l.address IN (SELECT unnest($forms::VARCHAR[])) AND ($chain IS NULL OR l.chain = $chain)
            ORDER BY l.chain, {RANK}""",
        {"forms": forms, "chain": chain},
    )
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if norm_address(r["chain"], raw) != r["address"]:
            continue  # a lower-cased Bitcoin/Tron form is another address
        e = out.setdefault(
            (r["chain"], r["address"]), {"chain": r["chain"], "address": r["address"], "labels": []}
        )
        e["labels"].append(jdict(r))
    for e in out.values():
        e["best"] = e["labels"][0]
        e["conflict"] = len({lab["category"] for lab in e["labels"]}) > 1
    return list(out.values())


def sources(db: CaseDB) -> list[dict[str, Any]]:
    """One row per source and version in the library: labels, addresses, categories, when
    loaded, and the files it came from."""
    rows = db.rows(
        """
        WITH lib AS (SELECT source, source_version, count(*) AS labels, count(DISTINCT (chain, address)) AS addresses,
                            count(DISTINCT category) AS categories, min(loaded_at) AS first_loaded,
                            max(updated_at) AS last_updated
                     FROM label_library GROUP BY ALL),
             files AS (SELECT source, source_version, list(DISTINCT file ORDER BY file) AS files,
                              list(DISTINCT format ORDER BY format) AS formats
                       FROM label_sources GROUP BY ALL)
        SELECT lib.*, files.files, files.formats FROM lib
        LEFT JOIN files ON files.source = lib.source AND files.source_version IS NOT DISTINCT FROM lib.source_version
        ORDER BY lib.source, lib.source_version NULLS FIRST
        """
    )
    return [jdict(r) for r in rows]


def cite(label: dict[str, Any]) -> dict[str, Any]:
    """What a hit must say about the label behind it: which list or source, its version or
    date, and the validity window used."""
    keys = ("label_id", "label", "entity", "category", "source", "source_version", "program", "origin",
            "from_case", "valid_from", "valid_to", "confidence")  # fmt: skip
    return jdict(
        {k: label.get(k) for k in keys if label.get(k) is not None or k in ("valid_from", "valid_to")}
    )
