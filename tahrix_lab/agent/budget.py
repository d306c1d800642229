"""Denial-of-wallet guard, checked before every model call.

Buckets: tokens per user per minute and per hour (input + output), dollars
per user over a rolling 30 days, and dollars for everyone over a rolling 30
days. Dollars come from ``genai-prices`` through a ``Pricer``'s rate rows
(the rate in force at each call's time, for its input-token tier).

``check`` must stay cheap however long the transcript grows, so the budget
keeps a ledger in memory: it reads the store once (last 30 days: the last
hour call by call, the rest summed in the engine per user and hour, each
hour's spend placed at its latest call, so it expires late by up to an hour,
never early), then the store tells it of every message this process appends,
and it keeps running sums in time-ordered deques that drop expired entries
from the front. A check
is memory work only; every ``sync_every`` seconds (1 s) it also asks the
database for the calls written since the last one it saw — by another store
object or another process (notebook kernels, the service, the CLI share the
file). "Since" is the ``seq`` the messages were written in, not their
``created_at``: a call another process started earlier but wrote later is
still seen. A call counted by the listener is never counted again.

A model with no known price is priced as unknown, not as zero: it is logged
once and counted in ``unknown_cost_calls`` (over the same 30 days); pass
``assume_unknown=(in, out)`` (USD per million tokens) to charge such calls at
an assumed rate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tahrix_lab.agent.errors import BudgetExceeded
from tahrix_lab.agent.pricing import Pricer, Rate
from tahrix_lab.agent.transcript import Message, Usage, utcnow

if TYPE_CHECKING:
    from tahrix_lab.agent.storage import TranscriptStore
    from tahrix_lab.agent.storage.interface import LedgerRow

log = logging.getLogger(__name__)

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
MONTH = timedelta(days=30)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")  # Usage's order

BUCKETS = ("per_minute_tokens", "per_hour_tokens", "monthly_usd", "global_monthly_usd")


@dataclass
class _Window:
    """A rolling window: a deque of (time, amount) with a running total."""

    span: timedelta
    entries: deque[tuple[datetime, float]] = field(default_factory=deque)
    total: float = 0.0

    def add(self, at: datetime, amount: float) -> None:
        if self.entries and at < self.entries[-1][0]:
            # Rare (another process's clock): keep the deque ordered.
            items = sorted([*self.entries, (at, amount)], key=lambda e: e[0])
            self.entries = deque(items)
        else:
            self.entries.append((at, amount))
        self.total += amount

    def value(self, now: datetime) -> float:
        cutoff = now - self.span
        entries = self.entries
        while entries and entries[0][0] <= cutoff:
            self.total -= entries.popleft()[1]
        if not entries:
            self.total = 0.0  # no float drift once empty
        return self.total


@dataclass
class _UserLedger:
    minute: _Window = field(default_factory=lambda: _Window(MINUTE))
    hour: _Window = field(default_factory=lambda: _Window(HOUR))
    month: _Window = field(default_factory=lambda: _Window(MONTH))
    unknown: _Window = field(default_factory=lambda: _Window(MONTH))  # calls of unknown cost


class Budget:
    """See the module docstring. ``None`` for a cap means no cap."""

    def __init__(
        self,
        per_minute_tokens: int | None = None,
        per_hour_tokens: int | None = None,
        monthly_usd: float | None = None,
        global_monthly_usd: float | None = None,
        *,
        clock: Callable[[], datetime] = utcnow,
        pricer: Pricer | None = None,
        assume_unknown: tuple[float, float] | None = None,
        store: TranscriptStore | None = None,
        sync_every: float = 1.0,
    ) -> None:
        self.per_minute_tokens = per_minute_tokens
        self.per_hour_tokens = per_hour_tokens
        self.monthly_usd = monthly_usd
        self.global_monthly_usd = global_monthly_usd
        self.clock = clock
        self.pricer = pricer or Pricer()
        self.assume_unknown = assume_unknown
        self.store = store
        self._lock = threading.Lock()
        self._users: dict[str, _UserLedger] = {}
        self._global = _Window(MONTH)
        self._session_users: dict[str, str] = {}
        self._watermark: int | None = None  # the highest message seq read from the store
        self._loaded_from: TranscriptStore | None = None
        self.sync_every = sync_every
        self._synced_at = 0.0
        self._counted: set[tuple[str, int]] = set()  # calls the listener counted, not yet read back
        self._read: deque[tuple[str, int]] = deque(maxlen=100_000)  # calls read back lately
        self._read_set: set[tuple[str, int]] = set()
        self._grouped_before: datetime | None = None  # the first read summed the calls before this

    # -- public -------------------------------------------------------------
    def check(self, user: str, *, store: TranscriptStore | None = None) -> None:
        """Raise ``BudgetExceeded`` (with a calm message) if any bucket is full."""
        fill = self.meter(user, store=store)
        for bucket in BUCKETS:
            value = fill.get(bucket)
            if value is not None and value >= 1.0:
                raise BudgetExceeded(bucket, self._message(bucket))

    def meter(self, user: str, *, store: TranscriptStore | None = None) -> dict[str, float | None]:
        """Each configured bucket's fill fraction (0.0 empty … 1.0 full) for this user."""
        now = self.clock()
        with self._lock:
            self._refresh(store or self.store, now)
            ledger = self._users.get(user) or _UserLedger()
            used = {
                "per_minute_tokens": ledger.minute.value(now),
                "per_hour_tokens": ledger.hour.value(now),
                "monthly_usd": ledger.month.value(now),
                "global_monthly_usd": self._global.value(now),
            }
        caps = self.caps()
        fill: dict[str, float | None] = {}
        for bucket in BUCKETS:
            cap = caps[bucket]
            fill[bucket] = None if cap is None else (used[bucket] / cap if cap > 0 else 1.0)
        return fill

    def spent(self, user: str, *, store: TranscriptStore | None = None) -> dict[str, float]:
        """The raw amounts behind ``meter``: tokens in the last minute and hour, USD in 30 days."""
        now = self.clock()
        with self._lock:
            self._refresh(store or self.store, now)
            ledger = self._users.get(user) or _UserLedger()
            return {
                "per_minute_tokens": ledger.minute.value(now),
                "per_hour_tokens": ledger.hour.value(now),
                "monthly_usd": ledger.month.value(now),
                "global_monthly_usd": self._global.value(now),
                "unknown_cost_calls": ledger.unknown.value(now),
            }

    def caps(self) -> dict[str, float | None]:
        return {
            "per_minute_tokens": self.per_minute_tokens,
            "per_hour_tokens": self.per_hour_tokens,
            "monthly_usd": self.monthly_usd,
            "global_monthly_usd": self.global_monthly_usd,
        }

    def record(
        self, user: str, usage: Usage, *, model: str | None, backend: str | None, at: datetime | None = None
    ) -> None:
        """Count a call that is not in a store the budget reads (embedding in other engines)."""
        with self._lock:
            self._add(user, at or self.clock(), usage, model, backend)

    # -- ledger ---------------------------------------------------------------
    def _refresh(self, store: TranscriptStore | None, now: datetime) -> None:
        if store is None:
            return
        if store is not self._loaded_from:
            self._loaded_from = store
            self._watermark = None
            self._synced_at = 0.0
            store.add_listener(self._on_append)
        if time.monotonic() - self._synced_at < self.sync_every:
            return
        self._synced_at = time.monotonic()
        if self._watermark is None:
            self._first_read(store, now)
            return
        rows, top = store.ledger_calls(after_seq=self._watermark, since=now - MONTH)
        self._count_rows(store, rows)
        self._watermark = max(self._watermark, top)

    def _first_read(self, store: TranscriptStore, now: datetime) -> None:
        """The last hour call by call (the token windows need each call's time), the rest of
        the month summed in the engine per user, hour, model, backend and input-token tier
        (one grouped query, never a million rows into Python), both cut at the same seq so
        the syncs that follow count each call once. ``ledger_calls`` keeps ``created_at >
        since``, ``usage_sums`` ``created_at < until``: a microsecond apart, the two meet
        without a gap at the timestamps' resolution."""
        boundary = self._grouped_before = now - HOUR
        rows, top = store.ledger_calls(after_seq=None, since=boundary - timedelta(microseconds=1))
        _, tiers = self.pricer.breaks(store.models_used())
        names, groups = store.usage_sums(
            ["user", "hour"], tiers=tiers, since=now - MONTH, until=boundary, through_seq=top
        )
        hours = self._price_groups(tiers, names, groups)
        for (user, _), (last, usd, unknown) in sorted(hours.items(), key=lambda h: h[1][0]):
            ledger = self._ledger(user)  # oldest first: each deque fills in order
            if unknown:
                ledger.unknown.add(last, unknown)
            if usd:
                ledger.month.add(last, usd)
                self._global.add(last, usd)
        self._count_rows(store, sorted(rows, key=lambda r: r[2]))
        self._watermark = top

    def _price_groups(
        self, tiers: list[int], names: list[str], groups: list[tuple[Any, ...]]
    ) -> dict[tuple[str, int], tuple[datetime, float, int]]:
        """Each user's hour of the first read: its latest call, its USD, and its calls of
        unknown cost. Prices are linear within a (model, backend, hour, tier), so a group's
        sums cost what its calls cost one by one. The spend sits at the hour's latest call:
        it never leaves the month window before that call does."""
        col = {n: i for i, n in enumerate(names)}
        user, hour, model, backend, tier, reported, last = (
            col[n] for n in ("user", "hour", "model", "backend", "_tier", "_reported", "_last")
        )
        tokens = [col[n] for n in _TOKENS]
        rates: dict[tuple[Any, ...], Rate | None] = {}
        out: dict[tuple[str, int], tuple[datetime, float, int]] = {}
        for g in groups:
            if not g[reported]:
                continue  # no call of the group reported usage: nothing to price, nothing unknown
            key = (g[model], g[backend], g[hour] // 24, g[tier])  # price changes fall on midnights
            if key not in rates:
                rates[key] = self.pricer.tier_rate(
                    g[model], g[backend], at=_EPOCH + g[hour] * HOUR, tier=g[tier], tiers=tiers
                )
            rate = rates[key]
            usage = Usage(*(round(g[i] or 0) for i in tokens))
            usd = rate.cost(usage) if rate is not None else self._assumed(g[model], g[backend], usage)
            at, total, unknown = out.get((g[user], g[hour]), (g[last], 0.0, 0))
            out[g[user], g[hour]] = (
                max(at, g[last]),
                total + (usd or 0.0),
                unknown + (g[reported] if usd is None else 0),
            )
        return out

    def _count_rows(self, store: TranscriptStore, rows: list[LedgerRow]) -> None:
        if not rows:
            return
        self._learn_users(store, {r[0] for r in rows})
        for sid, position, at, model, backend, inp, out, cr, cw, seq in rows:
            key = (sid, position)
            if key in self._counted:
                self._counted.discard(key)
            else:
                self._add(self._session_users.get(sid, "?"), at, Usage(inp, out, cr, cw), model, backend)
            self._remember_read(key)
            self._watermark = max(self._watermark or 0, int(seq))

    def _remember_read(self, key: tuple[str, int]) -> None:
        if len(self._read) == self._read.maxlen:
            self._read_set.discard(self._read[0])
        self._read.append(key)
        self._read_set.add(key)

    def _learn_users(self, store: TranscriptStore, session_ids: set[str]) -> None:
        missing = list(session_ids - self._session_users.keys())
        if missing:
            self._session_users.update(store.session_users(missing))

    def _on_append(self, session_id: str, message: Message) -> None:
        if message.role != "assistant" or message.position is None:
            return
        with self._lock:
            key = (session_id, message.position)
            if key in self._read_set:
                return  # a sync already read it back from the store
            if self._grouped_before is not None and message.created_at < self._grouped_before:
                return  # maybe in the first read's sums, which keep no keys: left to the next sync (seq)
            if session_id not in self._session_users and self._loaded_from is not None:
                self._learn_users(self._loaded_from, {session_id})
            self._counted.add(key)
            usage = message.usage or Usage()
            self._add(
                self._session_users.get(session_id, "?"),
                message.created_at,
                usage,
                message.model_id,
                message.backend,
            )

    def _ledger(self, user: str) -> _UserLedger:
        ledger = self._users.get(user)
        if ledger is None:
            ledger = self._users[user] = _UserLedger()
        return ledger

    def _add(self, user: str, at: datetime, usage: Usage, model: str | None, backend: str | None) -> None:
        ledger = self._ledger(user)
        tokens = usage.total_tokens
        if tokens:
            ledger.minute.add(at, tokens)
            ledger.hour.add(at, tokens)
        usd = self._usd(usage, model, backend, at)
        if usd is None:
            if usage.known:
                ledger.unknown.add(at, 1)
            return
        if usd:
            ledger.month.add(at, usd)
            self._global.add(at, usd)

    def _usd(self, usage: Usage, model: str | None, backend: str | None, at: datetime) -> float | None:
        usd = self.pricer.price_from_rates(model, usage, backend=backend, at=at)
        return self._assumed(model, backend, usage) if usd is None and usage.known else usd

    def _assumed(self, model: str | None, backend: str | None, usage: Usage) -> float | None:
        """An unknown price at the assumed rate, if one was given (else unknown)."""
        if self.assume_unknown is None:
            return None
        return Rate.flat(model or "?", backend, *self.assume_unknown).cost(usage)

    def _message(self, bucket: str) -> str:
        if bucket == "per_minute_tokens":
            return "You're sending requests faster than your per-minute allowance. Please wait a minute and try again."
        if bucket == "per_hour_tokens":
            return "You've used this hour's token allowance. It frees up gradually over the next hour."
        if bucket == "monthly_usd":
            return (
                f"You've reached your spending limit of ${self.monthly_usd or 0:,.2f} for the last 30 days. "
                "An administrator can raise it."
            )
        return (
            "The team's spending limit for the last 30 days has been reached, so the assistant is paused. "
            "An administrator can raise it."
        )
