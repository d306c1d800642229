from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from tahrix_lab.agent import Budget, BudgetExceeded, Message, Pricer, TranscriptStore, Usage
from tahrix_lab.agent.pricing import price

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


def record(
    store: TranscriptStore,
    user: str,
    at: datetime,
    usage: Usage,
    model: str = "gpt-4o-mini",
    backend: str = "openai",
) -> None:
    s = store.create_session(user=user)
    store.append_message(
        s.id,
        Message(
            role="assistant",
            created_at=at,
            backend=backend,
            model_id=model,
            usage=usage,
            stop_reason="end_turn",
        ),
    )


@pytest.fixture
def store() -> TranscriptStore:
    return TranscriptStore(":memory:")


def test_minute_window_fills_and_frees(store: TranscriptStore) -> None:
    clock = Clock(T0)
    budget = Budget(per_minute_tokens=1000, clock=clock, store=store)
    record(store, "ana", T0, Usage(600, 300))
    assert budget.meter("ana")["per_minute_tokens"] == pytest.approx(0.9)
    budget.check("ana")
    record(store, "ana", T0 + timedelta(seconds=10), Usage(50, 50))
    with pytest.raises(BudgetExceeded) as info:
        budget.check("ana")
    assert info.value.bucket == "per_minute_tokens"
    assert "wait a minute" in info.value.message
    budget.check("bob")  # other users are not affected
    clock.advance(seconds=61)
    assert budget.meter("ana")["per_minute_tokens"] == pytest.approx(0.1)
    clock.advance(seconds=10)
    budget.check("ana")
    assert budget.meter("ana")["per_minute_tokens"] == 0


def test_hour_window(store: TranscriptStore) -> None:
    clock = Clock(T0)
    budget = Budget(per_minute_tokens=10_000, per_hour_tokens=20_000, clock=clock, store=store)
    for i in range(4):
        record(store, "ana", T0 + timedelta(minutes=10 * i), Usage(4000, 1000))
        clock.now = T0 + timedelta(minutes=10 * i, seconds=1)
        if i < 3:
            budget.check("ana")
    with pytest.raises(BudgetExceeded) as info:
        budget.check("ana")
    assert info.value.bucket == "per_hour_tokens"
    clock.now = T0 + timedelta(minutes=60, seconds=1)  # the first call has left the window
    budget.check("ana")
    assert budget.meter("ana")["per_hour_tokens"] == pytest.approx(0.75)


def test_thirty_day_dollars_per_user_priced_by_genai_prices(store: TranscriptStore) -> None:
    clock = Clock(T0)
    usage = Usage(1_000_000, 100_000)
    one_call = price("gpt-4o-mini", usage, backend="openai")
    assert one_call is not None and one_call > 0
    budget = Budget(monthly_usd=one_call * 2.5, clock=clock, store=store)
    record(store, "ana", T0 - timedelta(days=29), usage)
    record(store, "ana", T0 - timedelta(days=1), usage)
    assert budget.meter("ana")["monthly_usd"] == pytest.approx(0.8)
    record(store, "ana", T0, usage)
    with pytest.raises(BudgetExceeded) as info:
        budget.check("ana")
    assert info.value.bucket == "monthly_usd"
    assert "spending limit" in info.value.message
    clock.advance(days=1, seconds=1)  # the oldest call is now older than 30 days
    budget.check("ana")
    assert budget.spent("ana")["monthly_usd"] == pytest.approx(one_call * 2)


def test_global_dollars_across_users(store: TranscriptStore) -> None:
    clock = Clock(T0)
    usage = Usage(1_000_000, 0)
    one = price("gpt-4o-mini", usage, backend="openai")
    assert one is not None
    budget = Budget(monthly_usd=one * 10, global_monthly_usd=one * 3, clock=clock, store=store)
    for user in ("a", "b", "c"):
        record(store, user, T0, usage)
    with pytest.raises(BudgetExceeded) as info:
        budget.check("d")  # d spent nothing, but the team cap is reached
    assert info.value.bucket == "global_monthly_usd"
    assert budget.meter("d")["monthly_usd"] == 0


def test_cached_input_is_cheaper_than_fresh_input(store: TranscriptStore) -> None:
    budget = Budget(monthly_usd=100, clock=Clock(T0), store=store)
    record(store, "fresh", T0, Usage(1_000_000, 0))
    record(store, "cached", T0, Usage(1_000_000, 0, cache_read_tokens=1_000_000))
    fresh, cached = budget.spent("fresh")["monthly_usd"], budget.spent("cached")["monthly_usd"]
    assert cached == pytest.approx(fresh / 2)  # gpt-4o-mini: cached input is half price


def test_geo_prefixed_bedrock_ids_are_priced(store: TranscriptStore) -> None:
    budget = Budget(monthly_usd=100, clock=Clock(T0), store=store)
    record(
        store,
        "ana",
        T0,
        Usage(1_000_000, 0),
        model="us.anthropic.claude-3-5-sonnet-20240620-v1:0",
        backend="bedrock",
    )
    assert budget.spent("ana")["monthly_usd"] == pytest.approx(3.0)  # $3 per million input tokens


def test_unknown_price_is_unknown_not_zero_and_can_be_assumed(
    store: TranscriptStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        record(store, "ana", T0, Usage(1_000_000, 1_000_000), model="my-local-llama", backend="openai")
        budget = Budget(monthly_usd=1, clock=Clock(T0), store=store)
        spent = budget.spent("ana")
    assert spent["monthly_usd"] == 0 and spent["unknown_cost_calls"] == 1
    assert caplog.text.count("my-local-llama") == 1  # logged once
    assumed = Budget(monthly_usd=1, clock=Clock(T0), store=store, assume_unknown=(0.5, 1.5))
    assert assumed.spent("ana")["monthly_usd"] == pytest.approx(2.0)
    with pytest.raises(BudgetExceeded):
        assumed.check("ana")


def test_meter_reports_only_configured_buckets(store: TranscriptStore) -> None:
    meter = Budget(per_hour_tokens=100, clock=Clock(T0), store=store).meter("ana")
    assert meter == {
        "per_minute_tokens": None,
        "per_hour_tokens": 0.0,
        "monthly_usd": None,
        "global_monthly_usd": None,
    }


def test_new_calls_are_picked_up_incrementally(store: TranscriptStore) -> None:
    clock = Clock(T0)
    budget = Budget(per_hour_tokens=1000, clock=clock, store=store)
    assert budget.meter("ana")["per_hour_tokens"] == 0
    for i in range(5):
        record(store, "ana", T0 + timedelta(seconds=i), Usage(100, 0))
        clock.now = T0 + timedelta(seconds=i)
        assert budget.meter("ana")["per_hour_tokens"] == pytest.approx((i + 1) / 10)


def test_record_counts_calls_outside_a_store() -> None:
    clock = Clock(T0)
    budget = Budget(per_minute_tokens=100, clock=clock)
    budget.record("ana", Usage(80, 30), model="gpt-4o-mini", backend="openai")
    with pytest.raises(BudgetExceeded):
        budget.check("ana")


def test_pricer_aliases_map_inference_profile_arns() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    pricer = Pricer(aliases={arn: "anthropic.claude-3-5-sonnet-20240620-v1:0"})
    assert pricer.price(arn, Usage(1_000_000, 0), backend="bedrock") == pytest.approx(3.0)
    assert Pricer().price(arn, Usage(1_000_000, 0), backend="bedrock") is None


def test_calls_written_by_another_store_object_are_found_on_sync(store: TranscriptStore) -> None:
    clock = Clock(T0)
    budget = Budget(per_hour_tokens=1000, clock=clock, store=store, sync_every=0)
    assert budget.meter("ana")["per_hour_tokens"] == 0
    other = TranscriptStore(connection=store.connection)  # shares the database, not the listener
    record(other, "ana", T0, Usage(300, 200))
    record(store, "ana", T0, Usage(100, 0))  # seen by the listener, and must not be counted twice
    assert budget.meter("ana")["per_hour_tokens"] == pytest.approx(0.6)
    assert budget.meter("ana")["per_hour_tokens"] == pytest.approx(0.6)


def test_default_pricer_reads_model_aliases_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    monkeypatch.setenv("TAHRIX_MODEL_ALIASES", f"{arn}=anthropic.claude-3-5-sonnet-20240620-v1:0")
    assert Pricer().price(arn, Usage(1_000_000, 0), backend="bedrock") == pytest.approx(3.0)
