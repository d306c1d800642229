"""Dollar prices of model calls, from the maintained ``genai-prices`` table: the one pricer.

Prices are data, never typed by hand here. ``None`` means unknown — never
zero. A model the table does not know is logged once; callers may supply an
assumption (``assume={"my-model": (3.0, 15.0)}`` in USD per million input and
output tokens) for models they host themselves.

Two ways to ask, one table behind both:

* ``Pricer.price`` / ``price_message``: one call, computed by genai-prices
  itself (exact; about a millisecond). The loop's usage line, ``tahrix show``,
  replay estimates.
* ``Pricer.rates`` / ``rate``: the same table cut into linear pieces, ``Rate``
  rows (USD per million tokens of each kind, per price period and input-token
  tier), looked up once per model. For pricing many calls: the budget's
  ledger, the diff, and the cost views, which copy the rows into their
  ``model_prices`` table and apply ``cost_sql`` (``Rate.cost`` in SQL) there.
  The two agree for per-token prices; time-of-day prices (off-peak
  discounts) are taken at the rate in force at midnight UTC.

Usage convention (see ``Usage``): ``input_tokens`` includes cache reads and
writes, so the plain input is ``input - cache_read - cache_write``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from genai_prices import Usage as PriceUsage
from genai_prices import calc_price, data_snapshot
from genai_prices import types as gp_types

from tahrix_lab.agent.transcript import Message, Usage

log = logging.getLogger(__name__)

# backend family -> genai-prices provider id (None lets the table match by model)
PROVIDER_BY_BACKEND: dict[str, str | None] = {"bedrock": "aws", "openai": None}

_unknown_logged: set[str] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Rate:
    """USD per million tokens of each kind, in force in [valid_from, valid_to) for calls
    whose input tokens lie in (min_input_tokens, max_input_tokens]: one linear piece of
    a model's price. The fields are the columns of the cost views' ``model_prices``."""

    model_id: str
    backend: str | None
    valid_from: datetime | None
    valid_to: datetime | None
    min_input_tokens: int
    max_input_tokens: int | None
    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float
    cache_write_per_mtok: float

    @classmethod
    def flat(cls, model_id: str, backend: str | None, per_in: float, per_out: float) -> Rate:
        """An assumed price: cached input at the plain input rate, always in force."""
        return cls(model_id, backend, None, None, -1, None, per_in, per_out, per_in, per_in)

    def applies(self, at: datetime, input_tokens: int) -> bool:
        return (
            (self.valid_from is None or at >= self.valid_from)
            and (self.valid_to is None or at < self.valid_to)
            and input_tokens > self.min_input_tokens
            and (self.max_input_tokens is None or input_tokens <= self.max_input_tokens)
        )

    def cost(self, usage: Usage, *, cached: bool = True) -> float:
        """USD for ``usage``; ``cached=False`` prices every input token as plain input
        (what the call would have cost with nothing cached). ``cost_sql`` is the same in SQL."""
        read = (usage.cache_read_tokens or 0) if cached else 0
        write = (usage.cache_write_tokens or 0) if cached else 0
        plain = max((usage.input_tokens or 0) - read - write, 0)
        return (
            plain * self.input_per_mtok
            + read * self.cache_read_per_mtok
            + write * self.cache_write_per_mtok
            + (usage.output_tokens or 0) * self.output_per_mtok
        ) / 1e6


def cost_sql(tokens: str, rate: str, *, cached: bool = True) -> str:
    """``Rate.cost`` as a SQL expression over a row ``tokens`` (columns named as ``Usage``'s
    fields) and a ``model_prices`` row ``rate``; the same terms in the same order."""
    i, o = f"coalesce({tokens}.input_tokens, 0)", f"coalesce({tokens}.output_tokens, 0)"
    if not cached:
        return f"({i} * {rate}.input_per_mtok + {o} * {rate}.output_per_mtok) / 1e6"
    r, w = f"coalesce({tokens}.cache_read_tokens, 0)", f"coalesce({tokens}.cache_write_tokens, 0)"
    return (
        f"(greatest({i} - {r} - {w}, 0) * {rate}.input_per_mtok + {r} * {rate}.cache_read_per_mtok"
        f" + {w} * {rate}.cache_write_per_mtok + {o} * {rate}.output_per_mtok) / 1e6"
    )


def applies_sql(rate: str, at: str, input_tokens: str) -> str:
    """``Rate.applies`` as a SQL condition on a ``model_prices`` row ``rate``."""
    return (
        f"({rate}.valid_from IS NULL OR {at} >= {rate}.valid_from)"
        f" AND ({rate}.valid_to IS NULL OR {at} < {rate}.valid_to)"
        f" AND {input_tokens} > {rate}.min_input_tokens"
        f" AND ({rate}.max_input_tokens IS NULL OR {input_tokens} <= {rate}.max_input_tokens)"
    )


class Pricer:
    """Prices usage for model ids; ``aliases`` maps ids the table cannot know
    (e.g. Bedrock application-inference-profile ARNs) to ones it does."""

    def __init__(
        self,
        assume: dict[str, tuple[float, float]] | None = None,
        aliases: dict[str, str] | None = None,
    ) -> None:
        self.assume = dict(assume or {})
        # Default: the operator's TAHRIX_MODEL_ALIASES (inference-profile ARN -> model id).
        self.aliases = dict(aliases) if aliases is not None else _env_aliases()
        self._rates: dict[tuple[str, str | None], list[Rate]] = {}

    def price(
        self,
        model_id: str | None,
        usage: Usage | None,
        *,
        backend: str | None = None,
        at: datetime | None = None,
    ) -> float | None:
        """USD for one call, or ``None`` when the model or the usage is unknown."""
        if not model_id or usage is None or not usage.known:
            return None
        model = self.aliases.get(model_id, model_id)
        if model in self.assume:
            per_in, per_out = self.assume[model]
            return ((usage.input_tokens or 0) * per_in + (usage.output_tokens or 0) * per_out) / 1e6
        calc = price_calculation(model, usage, backend=backend, at=at)
        return None if calc is None else float(calc)

    def price_message(self, message: Message) -> tuple[float | None, float | None]:
        """``(cost, uncached)`` of one assistant message: its USD as sent, and the
        same tokens with nothing read from or written to a cache (what caching saved)."""
        usage = message.usage or Usage()
        at = message.created_at
        cost = self.price(message.model_id, usage, backend=message.backend, at=at)
        if not (usage.cache_read_tokens or usage.cache_write_tokens):
            return cost, cost
        plain = Usage(usage.input_tokens, usage.output_tokens, reasoning_tokens=usage.reasoning_tokens)
        return cost, self.price(message.model_id, plain, backend=message.backend, at=at)

    def rates(self, model_id: str | None, backend: str | None = None) -> list[Rate]:
        """Every rate row of one model on one backend (empty when its price is unknown),
        derived once per pricer."""
        if not model_id:
            return []
        key = (model_id, backend)
        found = self._rates.get(key)
        if found is None:
            found = self._rates[key] = self._derive_rates(model_id, backend)
        return found

    def rate(
        self, model_id: str | None, backend: str | None, *, at: datetime, input_tokens: int
    ) -> Rate | None:
        """The rate row in force for a call at ``at`` with ``input_tokens`` input tokens."""
        return next((r for r in self.rates(model_id, backend) if r.applies(at, input_tokens)), None)

    def price_from_rates(
        self, model_id: str | None, usage: Usage | None, *, backend: str | None = None, at: datetime
    ) -> float | None:
        """USD for one call from the rate rows: no genai-prices call once the model's rows are known,
        for pricing many calls (the budget's ledger, the diff). ``None`` as for ``price``."""
        if usage is None or not usage.known:
            return None
        rate = self.rate(model_id, backend, at=at, input_tokens=usage.input_tokens or 0)
        return None if rate is None else rate.cost(usage)

    def tier_rate(
        self, model_id: str | None, backend: str | None, *, at: datetime, tier: int, tiers: Sequence[int]
    ) -> Rate | None:
        """The rate of a group of calls summed within one input-token tier (``usage_sums``'
        ``_tier``: 0 below the first of ``tiers``, else the index of the threshold it is past),
        priced at an input size inside that tier."""
        return self.rate(model_id, backend, at=at, input_tokens=tiers[tier - 1] + 1 if tier else 0)

    def breaks(self, pairs: Iterable[tuple[str, str | None]]) -> tuple[list[datetime], list[int]]:
        """Every price-change instant and input-token tier threshold of these (model, backend)
        pairs: where sums of calls must be cut so that each piece is priced by one rate row."""
        changes: set[datetime] = set()
        tiers: set[int] = set()
        for model, backend in pairs:
            for r in self.rates(model, backend):
                if r.valid_from is not None:
                    changes.add(r.valid_from)
                if r.min_input_tokens >= 0:
                    tiers.add(r.min_input_tokens)
        return sorted(changes), sorted(tiers)

    def _derive_rates(self, model_id: str, backend: str | None) -> list[Rate]:
        """One row per (price period, input-token tier), each probed from genai-prices
        with a few usages (prices are linear within a tier)."""
        model = self.aliases.get(model_id, model_id)
        if model in self.assume:
            return [Rate.flat(model_id, backend, *self.assume[model])]
        info = _model_info(model, backend)
        dates, tiers = _breakpoints(info) if info is not None else ([], [])
        starts: list[datetime | None] = [None, *(datetime(d.year, d.month, d.day, tzinfo=UTC) for d in dates)]
        bounds = [-1, *tiers]
        rows: list[Rate] = []
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else None
            # before the first change date genai-prices uses the first price: probe just before it
            probe = start if start is not None else (end - timedelta(days=1) if end else datetime.now(UTC))
            for j, lo in enumerate(bounds):
                hi = bounds[j + 1] if j + 1 < len(bounds) else None
                unit = _unit_rates(model, backend, probe, max(lo + 1, 1))
                if unit is None:
                    return []
                rows.append(Rate(model_id, backend, start, end, lo, hi, *unit))
        return rows


def price_calculation(
    model_id: str, usage: Usage, *, backend: str | None = None, at: datetime | None = None
) -> Decimal | None:
    """genai-prices' total for one call (no aliases, no assumptions), or ``None`` (logged once)."""
    provider = PROVIDER_BY_BACKEND.get(backend or "")
    kwargs: dict[str, Any] = {
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
    }
    if usage.cache_read_tokens:
        kwargs["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        kwargs["cache_write_tokens"] = usage.cache_write_tokens
    try:
        result = calc_price(
            PriceUsage(**kwargs), model_ref=model_id, provider_id=provider, genai_request_timestamp=at
        )
    except LookupError:
        if backend == "fake":  # a scripted model has no price by design
            return None
        with _lock:
            if model_id not in _unknown_logged:
                _unknown_logged.add(model_id)
                log.warning(
                    "No price is known for model %r (backend %s); its cost is unknown.", model_id, backend
                )
        return None
    return Decimal(result.total_price)


def _model_info(model_id: str, backend: str | None) -> gp_types.ModelInfo | None:
    provider = PROVIDER_BY_BACKEND.get(backend or "")
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model_id, None, provider, None)
    except LookupError:
        return None
    return info


def _breakpoints(info: gp_types.ModelInfo) -> tuple[list[date], list[int]]:
    """The dates the model's price changed and the input-token tier thresholds."""
    dates: set[date] = set()
    prices: list[gp_types.ModelPrice] = []
    if isinstance(info.prices, gp_types.ModelPrice):
        prices.append(info.prices)
    else:
        for cond in info.prices:
            prices.append(cond.prices)
            if isinstance(cond.constraint, gp_types.StartDateConstraint):
                dates.add(cond.constraint.start_date)
    tiers: set[int] = set()
    for mp in prices:
        for value in vars(mp).values():
            if isinstance(value, gp_types.TieredPrices):
                tiers.update(t.start for t in value.tiers)
    return sorted(dates), sorted(tiers)


def _unit_rates(
    model_id: str, backend: str | None, at: datetime, input_tokens: int
) -> tuple[float, float, float, float] | None:
    """USD per million input, output, cache-read and cache-write tokens at ``at`` for a
    call of ``input_tokens`` input tokens."""

    def calc(**kw: int) -> Decimal | None:
        return price_calculation(model_id, Usage(**kw), backend=backend, at=at)

    n = input_tokens
    base = calc(input_tokens=n, output_tokens=0)
    if base is None:
        return None
    out = calc(input_tokens=n, output_tokens=1_000_000)
    read = calc(input_tokens=n, output_tokens=0, cache_read_tokens=n)
    write = calc(input_tokens=n, output_tokens=0, cache_write_tokens=n)
    m = Decimal(1_000_000)
    per_in = base * m / n
    per_out = (out - base) if out is not None else Decimal(0)
    # cached tokens are part of input_tokens: price(n with n cached) = n * cached_rate
    per_read = read * m / n if read is not None else per_in
    per_write = write * m / n if write is not None else per_in
    return float(per_in), float(per_out), float(per_read), float(per_write)


def _env_aliases() -> dict[str, str]:
    from tahrix_lab.agent.backends.registry import model_aliases

    return model_aliases()


DEFAULT_PRICER = Pricer()


def price(
    model_id: str | None, usage: Usage | None, *, backend: str | None = None, at: datetime | None = None
) -> float | None:
    return DEFAULT_PRICER.price(model_id, usage, backend=backend, at=at)
