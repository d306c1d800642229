"""One pricer: the rate rows of ``agent.pricing`` behind the budget, the diff and the cost views.

``Rate.cost`` and its SQL twin ``cost_sql`` (and ``applies`` / ``applies_sql``)
must agree on every input; the rows must agree with genai-prices' own figure;
and the surfaces that price a call (the loop's usage line, the budget, the
diff, the ``costs`` view) must all print the same dollars for it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tahrix_lab.agent import Budget, Pricer, TranscriptStore
from tahrix_lab.agent.pricing import Rate, applies_sql, cost_sql
from tahrix_lab.agent.transcript import Message, Part, Usage
from tahrix_lab.lab.costs import call_costs
from tahrix_lab.lab.diff import diff

SONNET_BEDROCK = "us.anthropic.claude-3-5-sonnet-20240620-v1:0"
T = datetime(2026, 5, 3, 10, 0, tzinfo=UTC)

tokens = st.one_of(st.none(), st.integers(min_value=0, max_value=5_000_000))
per_mtok = st.floats(min_value=0, max_value=200, allow_nan=False, allow_infinity=False)
# hypothesis takes naive bounds and attaches the zone itself
_FIRST, _LAST = datetime(2024, 1, 1), datetime(2027, 1, 1)  # noqa: DTZ001
moments = st.datetimes(min_value=_FIRST, max_value=_LAST, timezones=st.just(UTC))


@st.composite
def rates(draw: st.DrawFn) -> Rate:
    start = draw(st.one_of(st.none(), moments))
    end = draw(st.one_of(st.none(), moments))
    lo = draw(st.integers(min_value=-1, max_value=400_000))
    hi = draw(st.one_of(st.none(), st.integers(min_value=lo, max_value=1_000_000)))
    return Rate("m", None, start, end, lo, hi, *(draw(per_mtok) for _ in range(4)))


@pytest.fixture(scope="module")
def db() -> duckdb.DuckDBPyConnection:
    return duckdb.connect(":memory:")


@settings(max_examples=100, deadline=None)
@given(rate=rates(), usage=st.builds(Usage, tokens, tokens, tokens, tokens), cached=st.booleans())
def test_cost_sql_is_rate_cost(db: duckdb.DuckDBPyConnection, rate: Rate, usage: Usage, cached: bool) -> None:
    sql = (
        "SELECT {cost} FROM (SELECT ?::BIGINT AS input_tokens, ?::BIGINT AS output_tokens, "
        "?::BIGINT AS cache_read_tokens, ?::BIGINT AS cache_write_tokens) u, "
        "(SELECT ?::DOUBLE AS input_per_mtok, ?::DOUBLE AS output_per_mtok, "
        "?::DOUBLE AS cache_read_per_mtok, ?::DOUBLE AS cache_write_per_mtok) p"
    ).format(cost=cost_sql("u", "p", cached=cached))
    row = db.execute(
        sql,
        [usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
         rate.input_per_mtok, rate.output_per_mtok, rate.cache_read_per_mtok, rate.cache_write_per_mtok],
    ).fetchone()  # fmt: skip
    assert row is not None
    assert row[0] == pytest.approx(rate.cost(usage, cached=cached), rel=1e-12, abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(rate=rates(), at=moments, input_tokens=st.integers(min_value=0, max_value=1_200_000))
def test_applies_sql_is_rate_applies(
    db: duckdb.DuckDBPyConnection, rate: Rate, at: datetime, input_tokens: int
) -> None:
    sql = (
        "SELECT {cond} FROM (SELECT ?::TIMESTAMPTZ AS at, ?::BIGINT AS n, ?::TIMESTAMPTZ AS valid_from, "
        "?::TIMESTAMPTZ AS valid_to, ?::BIGINT AS min_input_tokens, ?::BIGINT AS max_input_tokens) p"
    ).format(cond=applies_sql("p", "p.at", "p.n"))
    row = db.execute(
        sql, [at, input_tokens, rate.valid_from, rate.valid_to, rate.min_input_tokens, rate.max_input_tokens]
    ).fetchone()
    assert row is not None and bool(row[0]) is rate.applies(at, input_tokens)


@pytest.mark.parametrize(
    ("model", "backend", "usage", "at"),
    [
        ("gpt-4o", "openai", Usage(12_000, 800, cache_read_tokens=8_000), T),
        (SONNET_BEDROCK, "bedrock", Usage(30_000, 1_500, 10_000, 5_000), T),
        ("claude-sonnet-4-5", "openai", Usage(150_000, 1_000), T),  # below the 200k tier
        ("claude-sonnet-4-5", "openai", Usage(250_000, 1_000), T),  # above it: the whole call
        ("o3", "openai", Usage(1_000_000, 100_000), datetime(2025, 6, 1, tzinfo=UTC)),  # before a price cut
        ("o3", "openai", Usage(1_000_000, 100_000), datetime(2025, 6, 20, tzinfo=UTC)),
    ],
)
def test_rate_rows_agree_with_genai_prices(model: str, backend: str, usage: Usage, at: datetime) -> None:
    pricer = Pricer(aliases={})
    exact = pricer.price(model, usage, backend=backend, at=at)
    assert exact is not None and exact > 0
    assert pricer.price_from_rates(model, usage, backend=backend, at=at) == pytest.approx(exact, rel=1e-9)


def test_unknown_models_and_usage_are_unknown_and_assumptions_are_flat() -> None:
    pricer = Pricer(assume={"my-model": (1.0, 2.0)}, aliases={"profile-arn": "my-model"})
    assert pricer.rates("my-own-test-model", "openai") == []
    assert pricer.price_from_rates("my-own-test-model", Usage(10, 10), backend="openai", at=T) is None
    assert pricer.price_from_rates("gpt-4o", Usage(), backend="openai", at=T) is None  # usage not reported
    assert pricer.rates("profile-arn") == [Rate.flat("profile-arn", None, 1.0, 2.0)]
    usage = Usage(1_000_000, 1_000_000, cache_read_tokens=500_000)
    assert pricer.price_from_rates("profile-arn", usage, at=T) == pricer.price("profile-arn", usage) == 3.0


def test_every_surface_prints_the_same_dollars_for_a_call() -> None:
    """The loop's usage line, the budget, the diff and the costs view price one call alike,
    including a tiered model whose call crosses the tier (the budget once priced every
    call at the top tier)."""
    store = TranscriptStore(":memory:")
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    session = store.create_session(user="ana", purpose="investigation")
    calls = [
        ("claude-sonnet-4-5", "openai", Usage(150_000, 1_000)),
        (SONNET_BEDROCK, "bedrock", Usage(30_000, 1_500, 10_000, 5_000)),
    ]
    for model, backend, usage in calls:
        store.append_message(session.id, Message.user("q"))
        store.append_message(session.id, Message(role="assistant", parts=[Part.of_text("a")], backend=backend,
                                                 model_id=model, stop_reason="end_turn", usage=usage, created_at=now))  # fmt: skip
    pricer = Pricer(aliases={})
    usage_line = [
        pricer.price_message(m)[0] for m in store.load_messages(session.id) if m.role == "assistant"
    ]
    assert all(c is not None for c in usage_line)
    view = call_costs(store, session_id=session.id, pricer=pricer)["cost_usd"].tolist()
    assert view == pytest.approx(usage_line, rel=1e-9)
    d = diff(session.id, session.id, store=store, pricer=pricer)
    assert [t.a.cost_usd for t in d.turns if t.a] == pytest.approx(usage_line, rel=1e-9)
    budget = Budget(monthly_usd=100, store=store, pricer=pricer)
    assert budget.spent("ana")["monthly_usd"] == pytest.approx(sum(c for c in usage_line if c), rel=1e-9)
    store.close()
