"""What every detector family shares: the registry, the resolved-label CTE, severity and score scales.

A detector takes ``(db, case_id, params)`` and returns flag dicts (severity,
score, subject, evidence). ``register`` adds it to ``DETECTORS`` with its
default thresholds in ``DEFAULTS``. Detectors read only movements that
happened: a failed transfer (``status = FALSE``) moves nothing; an unknown
status (NULL) counts but is reported. Unknown USD (NULL) is never summed as 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tahrix_lab.case.db import LABEL_RANK_KEY, CaseDB
from tahrix_lab.case.taxonomy import ALIASES, CATEGORIES, SERVICE_CATEGORIES

VERSION = "2.0"
EVIDENCE_CAP = 25

Detector = Callable[[CaseDB, str, dict[str, Any]], list[dict[str, Any]]]
DETECTORS: dict[str, Detector] = {}
DEFAULTS: dict[str, dict[str, Any]] = {}


def register(name: str, **defaults: Any) -> Callable[[Detector], Detector]:
    def deco(fn: Detector) -> Detector:
        DETECTORS[name] = fn
        DEFAULTS[name] = defaults
        return fn

    return deco


def _alias_values() -> str:
    pairs = {**{c: c for c in CATEGORIES}, **ALIASES}  # our constants, never case data
    return ", ".join(f"('{k}', '{v}')" for k, v in sorted(pairs.items()))


# Resolved label per address: the highest-confidence label wins (conflicts are ranked, not merged).
# Categories are normalised to the taxonomy here too (the loaders do it on load; labels stored
# before that, or written raw, still compare right); an unknown spelling stays as written.
CAT_KEY = "trim(regexp_replace(lower(trim(l.category)), '[\\s\\-/.]+', '_', 'g'), '_')"
# Labels are the case's own, analysts' from other cases and the label library's (``case_labels``),
# ranked as everywhere (``db.LABEL_RANK_KEY``: an overriding label, then confidence).
LAB = f"""cat_alias(k, canonical) AS (VALUES {_alias_values()}),
lab AS (
  SELECT l.chain, l.address,
         arg_max(coalesce(al.canonical, l.category), {LABEL_RANK_KEY}) AS category,
         arg_max(l.label, {LABEL_RANK_KEY}) AS label
  FROM case_labels l
  LEFT JOIN cat_alias al ON al.k = {CAT_KEY}
  WHERE l.case_id = $case AND l.category IS NOT NULL GROUP BY l.chain, l.address)"""

# Movements that happened (a failed one moves nothing) — as a CTE over transfers.
MOVED = "moved AS NOT MATERIALIZED (SELECT * FROM transfers WHERE case_id = $case AND status IS NOT FALSE)"

# Mint/burn sinks: never a funder, a dust sender or a person's flow.
ZERO_ADDRESSES = (
    "0x0000000000000000000000000000000000000000",
    "0x000000000000000000000000000000000000dead",
    "0xdead000000000000000042069420694206942069",
    "T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb",  # Tron's zero address (base58 of 0x41 00…00)
)
# Distributors: their many small sends are airdrops, not dust.
DISTRIBUTOR_CATEGORIES = ("token_contract", "airdrop_distributor")


def services(params: dict[str, Any]) -> list[str]:
    return sorted(params.get("service_categories") or SERVICE_CATEGORIES)


def usd_severity(usd: float | None, tiers: tuple[float, float, float] = (10_000, 100_000, 1_000_000)) -> str:
    if usd is None:
        return "medium"  # unknown value: neither dismissed as small nor inflated
    if usd >= tiers[2]:
        return "critical"
    if usd >= tiers[1]:
        return "high"
    return "medium" if usd >= tiers[0] else "low"


def score(usd: float | None) -> float:
    """Log-scaled 0..1 between $100 and $10M (unknown USD: 0.5)."""
    if usd is None:
        return 0.5
    return round(max(0.0, min(1.0, (math.log10(max(usd, 1)) - 2) / 5)), 3)


def rnd(usd: float | None) -> float | None:
    return None if usd is None else round(usd, 2)


def rows(db: CaseDB, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = db.cursor().execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
