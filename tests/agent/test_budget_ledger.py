"""The budget's first read on both engines: the month summed in the engine per user and
hour, the last hour call by call, gives what pricing every call gives; spend expires never
early; calls written after the first read count once each."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.agent import Budget, Message, Pricer, TranscriptStore, Usage
from tahrix_lab.agent.budget import HOUR, MINUTE, MONTH
from tahrix_lab.agent.storage import PostgresStore
from tahrix_lab.agent.storage.usage_sql import as_dicts
from tests.agent.storage.conftest import pg_server  # noqa: F401 (a fixture, by name below)
from tests.agent.storage.pg_server import PgServer

# claude-sonnet-4-6 changed price on 2026-03-13 and has a 200k-token tier; gemini-1.5-pro a
# 128k tier; the last two have no known price (a scripted model's is unknown by design).
MODELS = [
    ("gpt-4o-mini", "openai"),
    ("claude-sonnet-4-6", "openai"),
    ("gemini-1.5-pro", "openai"),
    ("a-model-of-our-own", "openai"),
    ("scripted", "fake"),
]
USERS = ["ana", "bo", "cy"]
NOW = datetime(2026, 3, 30, 12, 34, 56, 789_000, tzinfo=UTC)  # 40 days back crosses 2026-03-13
PRICER = Pricer(aliases={})
Stores = tuple[TranscriptStore, TranscriptStore]


@dataclass(frozen=True)
class Call:
    user: str
    model: str
    backend: str
    at: datetime
    usage: Usage


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    if draw(st.integers(0, 9)) == 0:
        return Usage()  # no usage reported: neither priced nor unknown
    # around each tier threshold (128k, 200k) as often as anywhere else
    inp = draw(
        st.one_of(st.integers(0, 300_000), st.sampled_from([128_000, 128_001, 200_000, 200_001, 250_000]))
    )
    read = draw(st.integers(0, inp))
    write = draw(st.integers(0, inp - read))
    return Usage(inp, draw(st.integers(0, 20_000)), read, write)


@st.composite
def calls(draw: st.DrawFn, now: datetime = NOW) -> Call:
    # ages: the last minute, the last hour, around the 30-day edge, anywhere in 40 days
    age = draw(
        st.one_of(
            st.integers(0, 60_000_000),
            st.integers(0, 3_600_000_000),
            st.integers(-5_000_000, 5_000_000).map(lambda us: int(MONTH.total_seconds() * 1e6) + us),
            st.integers(0, 40 * 86_400_000_000),
            st.integers(1, 40).map(lambda days: days * 86_400_000_000 + 1),
        )
    )
    model, backend = draw(st.sampled_from(MODELS))
    return Call(
        draw(st.sampled_from(USERS)), model, backend, now - timedelta(microseconds=age), draw(usages())
    )


def expected(ledger: list[Call], now: datetime) -> dict[str, dict[str, float]]:
    """Each user's ``Budget.spent`` by pricing every call alone, in its window."""
    out = {u: dict.fromkeys(("per_minute_tokens", "per_hour_tokens", "monthly_usd", "unknown_cost_calls"), 0.0)
           for u in USERS}  # fmt: skip
    team = 0.0
    for c in ledger:
        mine = out[c.user]
        for bucket, span in (("per_minute_tokens", MINUTE), ("per_hour_tokens", HOUR)):
            if now - span < c.at:
                mine[bucket] += c.usage.total_tokens
        if now - MONTH < c.at:
            usd = PRICER.price_from_rates(c.model, c.usage, backend=c.backend, at=c.at)
            if usd is None:
                mine["unknown_cost_calls"] += c.usage.known
            else:
                mine["monthly_usd"] += usd
                team += usd
    for mine in out.values():
        mine["global_monthly_usd"] = team
    return out


def assert_spent(budget: Budget, ledger: list[Call], now: datetime) -> None:
    for user, want in expected(ledger, now).items():
        got = budget.spent(user)
        assert got == {k: pytest.approx(v, rel=1e-9, abs=1e-9) for k, v in want.items()}, user


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def write(store: TranscriptStore, ledger: list[Call]) -> None:
    """Each call in its own session (sessions are per user)."""
    for c in ledger:
        s = store.create_session(user=c.user)
        store.append_message(
            s.id,
            Message(role="assistant", created_at=c.at, backend=c.backend, model_id=c.model, usage=c.usage),
        )


@pytest.fixture(params=["duckdb", "postgresql"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Stores]]:
    """A factory of fresh, empty records on one engine (one per hypothesis example), each
    opened by two store objects: the budget's, and another one (as another process's)."""
    opened: list[TranscriptStore] = []
    server: PgServer | None = request.getfixturevalue("pg_server") if request.param == "postgresql" else None
    numbers = itertools.count()

    def make() -> Stores:
        if server is not None:
            url = server.url(server.create_database())
            opened.extend([TranscriptStore(url), TranscriptStore(url)])
        else:
            first = TranscriptStore(str(tmp_path / f"{next(numbers)}.duckdb"))
            opened.extend([first, TranscriptStore(connection=first.connection)])
        return opened[-2], opened[-1]

    yield make
    for s in opened:
        s.close()
    PostgresStore.close_pools()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.lists(calls(), min_size=5, max_size=40),
    after=st.lists(calls(NOW + timedelta(seconds=30)), max_size=8),
    mine=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_grouped_first_read_equals_pricing_every_call(
    new_store: Callable[[], Stores], before: list[Call], after: list[Call], mine: list[bool]
) -> None:
    store, other = new_store()
    write(store, before)
    clock = Clock(NOW)
    budget = Budget(store=store, clock=clock, sync_every=0, pricer=PRICER)
    assert_spent(budget, before, NOW)
    # after the first read: some calls through this store (its listener), some through
    # another store object on the same record (found by the next sync): each counted once
    for c, through_mine in zip(after, mine, strict=False):
        write(store if through_mine else other, [c])
    clock.now = NOW + timedelta(seconds=30)
    assert_spent(budget, [*before, *after], clock.now)
    assert_spent(budget, [*before, *after], clock.now)  # a second sync adds nothing


def test_month_spend_expires_never_early(new_store: Callable[[], Stores]) -> None:
    store, _ = new_store()
    usage = Usage(1_000_000, 0)
    one = PRICER.price_from_rates("gpt-4o-mini", usage, backend="openai", at=NOW)
    assert one is not None
    second = timedelta(seconds=1)
    # same user, same hour: one group whose spend sits at its latest call
    ledger = [
        Call("ana", "gpt-4o-mini", "openai", NOW - MONTH - second, usage),  # gone
        Call("ana", "gpt-4o-mini", "openai", NOW - MONTH + second, usage),  # stays
        Call("ana", "gpt-4o-mini", "openai", NOW - MONTH + 10 * second, usage),  # stays
    ]
    write(store, ledger)
    clock = Clock(NOW)
    budget = Budget(store=store, clock=clock, sync_every=0, pricer=PRICER)
    assert budget.spent("ana")["monthly_usd"] == pytest.approx(2 * one)
    clock.now = NOW + 5 * second  # the second call has expired: its group keeps its spend, never less
    assert budget.spent("ana")["monthly_usd"] == pytest.approx(2 * one)
    clock.now = NOW + 10 * second  # the group's latest call has expired: all of it goes
    assert budget.spent("ana")["monthly_usd"] == 0


def test_groups_priced_in_their_price_period_and_tier(new_store: Callable[[], Stores]) -> None:
    store, _ = new_store()
    # claude-sonnet-4-6 over 200k input tokens: $6 per million before 2026-03-13, $3 after
    long, short = Usage(250_000, 0), Usage(1000, 0)
    ledger = [
        Call("ana", "claude-sonnet-4-6", "openai", datetime(2026, 3, 10, 9, tzinfo=UTC), long),
        Call("ana", "claude-sonnet-4-6", "openai", datetime(2026, 3, 10, 9, 30, tzinfo=UTC), short),
        Call("ana", "claude-sonnet-4-6", "openai", datetime(2026, 3, 20, 9, tzinfo=UTC), long),
    ]
    write(store, ledger)
    budget = Budget(store=store, clock=Clock(NOW), pricer=PRICER)
    assert budget.spent("ana")["monthly_usd"] == pytest.approx(1.5 + 0.003 + 0.75)
    assert_spent(budget, ledger, NOW)


def test_usage_sums_through_seq_stops_at_a_seq_and_gives_each_group_its_last_call(
    new_store: Callable[[], Stores],
) -> None:
    store, _ = new_store()
    first, second = NOW - timedelta(days=2, minutes=30), NOW - timedelta(days=2, minutes=10)
    usage = Usage(1000, 10)
    write(store, [Call("ana", "gpt-4o-mini", "openai", first, usage)])
    _, top = store.ledger_calls(after_seq=None, since=NOW)  # the seq written so far
    write(store, [Call("ana", "gpt-4o-mini", "openai", at, usage) for at in (second, first)])
    by = ["user", "hour"]
    for through, want in ((top, [(1, first)]), (top + 1000, [(3, second)])):
        groups = as_dicts(*store.usage_sums(by, since=NOW - MONTH, until=NOW, through_seq=through))
        assert [(g["calls"], g["_last"]) for g in groups] == want
    assert "_last" not in store.usage_sums(by)[0]  # only asked for with through_seq
