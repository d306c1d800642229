"""Dollar prices of model calls, from the maintained ``genai-prices`` table.

Prices are data, never typed by hand here. ``None`` means unknown — never
zero. A model the table does not know is logged once; callers may supply an
assumption (``assume={"my-model": (3.0, 15.0)}`` in USD per million input and
output tokens) for models they host themselves.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from decimal import Decimal
from typing import Any

from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from tahrix_lab.agent.transcript import Message, Usage

log = logging.getLogger(__name__)

# backend family -> genai-prices provider id (None lets the table match by model)
PROVIDER_BY_BACKEND: dict[str, str | None] = {"bedrock": "aws", "openai": None}

_unknown_logged: set[str] = set()
_lock = threading.Lock()


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


def price_calculation(
    model_id: str, usage: Usage, *, backend: str | None = None, at: datetime | None = None
) -> Decimal | None:
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


def _env_aliases() -> dict[str, str]:
    from tahrix_lab.agent.backends.registry import model_aliases

    return model_aliases()


DEFAULT_PRICER = Pricer()


def price(
    model_id: str | None, usage: Usage | None, *, backend: str | None = None, at: datetime | None = None
) -> float | None:
    return DEFAULT_PRICER.price(model_id, usage, backend=backend, at=at)
