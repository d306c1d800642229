"""Costs: the DataFrame helpers on both engines (and DuckDB's SQL views), checked against
genai-prices."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from tahrix_lab.agent import Budget, Pricer, TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.transcript import Message, Part, Usage
from tahrix_lab.lab import charts
from tahrix_lab.lab.costs import (
    budget_status,
    call_costs,
    costs,
    costs_by_case,
    costs_by_user,
    create_views,
    month_to_date,
)

BEDROCK_GEO = "us.anthropic.claude-3-5-sonnet-20240620-v1:0"
T1 = datetime(2026, 5, 3, 10, 0, tzinfo=UTC)
T2 = datetime(2026, 5, 4, 23, 59, tzinfo=UTC)
T3 = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)


def call(
    store: TranscriptStore, session_id: str, model: str, backend: str, at: datetime, usage: Usage
) -> None:
    store.append_message(session_id, Message.user("q"))
    store.append_message(
        session_id,
        Message(role="assistant", parts=[Part.of_text("a")], backend=backend, model_id=model,
                stop_reason="end_turn", usage=usage, created_at=at),
    )  # fmt: skip


def genai(model: str, usage: Usage, at: datetime, provider: str | None = None) -> float:
    kw = {"input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0}
    if usage.cache_read_tokens:
        kw["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        kw["cache_write_tokens"] = usage.cache_write_tokens
    result = calc_price(PriceUsage(**kw), model_ref=model, provider_id=provider, genai_request_timestamp=at)
    return float(Decimal(result.total_price))


@pytest.fixture
def store(store_target: str) -> Iterator[TranscriptStore]:
    """Every test here runs on a DuckDB file and on a real PostgreSQL server."""
    s = TranscriptStore(store_target)
    yield s
    s.close()


@pytest.fixture
def filled(store: TranscriptStore) -> dict[str, str]:
    ana = store.create_session(user="ana", purpose="investigation")
    bob = store.create_session(user="bob", purpose="chat")
    call(
        store,
        ana.id,
        "gpt-4o",
        "openai",
        T1,
        Usage(12_000, 800, cache_read_tokens=8_000, cache_write_tokens=0),
    )
    call(
        store,
        ana.id,
        BEDROCK_GEO,
        "bedrock",
        T2,
        Usage(30_000, 1_500, cache_read_tokens=10_000, cache_write_tokens=5_000),
    )
    call(store, bob.id, "gpt-4o", "openai", T3, Usage(1_000, 100, 0, 0))
    call(store, bob.id, "my-own-model", "openai", T3, Usage(500, 50))
    call(store, bob.id, "gpt-4o", "openai", T3, Usage())  # a call cut off before it reported usage
    return {"ana": ana.id, "bob": bob.id}


def test_call_costs_match_genai_prices_for_openai_and_geo_prefixed_bedrock(
    store: TranscriptStore, filled: dict[str, str]
) -> None:
    df = call_costs(store, session_id=filled["ana"])
    assert list(df["model"]) == ["gpt-4o", BEDROCK_GEO]
    assert df.loc[0, "cost_usd"] == pytest.approx(genai("gpt-4o", Usage(12_000, 800, 8_000), T1), rel=1e-9)
    assert df.loc[1, "cost_usd"] == pytest.approx(
        genai(BEDROCK_GEO, Usage(30_000, 1_500, 10_000, 5_000), T2, provider="aws"), rel=1e-9
    )
    # by hand from the published rates: cached input is cheaper, cache writes dearer
    assert df.loc[0, "cost_usd"] == pytest.approx((4_000 * 2.5 + 8_000 * 1.25 + 800 * 10) / 1e6)
    assert df.loc[1, "cost_usd"] == pytest.approx(
        (15_000 * 3 + 10_000 * 0.3 + 5_000 * 3.75 + 1_500 * 15) / 1e6
    )
    assert df["unknown_price"].isna().all()


def test_unknown_price_and_unreported_usage_are_null_with_a_note(
    store: TranscriptStore, filled: dict[str, str]
) -> None:
    df = call_costs(store, session_id=filled["bob"])
    assert df.loc[0, "cost_usd"] == pytest.approx(genai("gpt-4o", Usage(1_000, 100), T3))
    assert (
        pd.isna(df.loc[1, "cost_usd"])
        and df.loc[1, "unknown_price"] == "no price known for my-own-model on openai"
    )
    assert pd.isna(df.loc[2, "cost_usd"]) and df.loc[2, "unknown_price"] == "usage not reported"


def test_costs_by_model_and_day_equal_the_per_call_view(
    store: TranscriptStore, filled: dict[str, str]
) -> None:
    df = costs(store, by=("model", "day"))
    assert list(zip(df["model"], df["day"].dt.strftime("%Y-%m-%d"), strict=True)) == [
        ("gpt-4o", "2026-05-03"),
        ("gpt-4o", "2026-06-01"),
        ("my-own-model", "2026-06-01"),
        (BEDROCK_GEO, "2026-05-04"),
    ]
    per_call = call_costs(store)
    assert df["cost_usd"].sum() == pytest.approx(per_call["cost_usd"].sum())
    june_gpt = df[(df["model"] == "gpt-4o") & (df["day"].dt.month == 6)].iloc[0]
    assert (june_gpt["calls"], june_gpt["unknown_cost_calls"]) == (2, 1)
    assert june_gpt["cost_usd"] == pytest.approx(genai("gpt-4o", Usage(1_000, 100), T3))
    own = df[df["model"] == "my-own-model"].iloc[0]
    assert pd.isna(own["cost_usd"]) and own["unknown_cost_calls"] == 1  # unknown, not zero


def test_groupings_and_filters(store: TranscriptStore, filled: dict[str, str]) -> None:
    by_user = costs_by_user(store)
    assert list(by_user["user"]) == ["ana", "bob"]
    assert by_user.loc[0, "calls"] == 2 and by_user.loc[1, "calls"] == 3
    by_month = costs(store, by="user,month")
    assert [(u, m.month) for u, m in zip(by_month["user"], by_month["month"], strict=True)] == [
        ("ana", 5),
        ("bob", 6),
    ]
    assert costs(store, by="purpose", since=T3)["purpose"].tolist() == ["chat"]
    assert costs(store, by="model", until=T2)["model"].tolist() == ["gpt-4o"]
    assert costs(store, by=(), user="ana")["calls"].tolist() == [2]
    mtd = month_to_date(store, "bob", now=datetime(2026, 6, 15, tzinfo=UTC))
    assert mtd["model"].tolist() == ["gpt-4o", "my-own-model"]
    with pytest.raises(ConfigurationError, match="Cannot group costs by 'colour'"):
        costs(store, by="model,colour")


def test_historic_prices_follow_the_calls_time(store: TranscriptStore) -> None:
    s = store.create_session(user="ana")
    before, after = datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 6, 20, tzinfo=UTC)
    usage = Usage(1_000_000, 100_000)
    call(store, s.id, "o3", "openai", before, usage)
    call(store, s.id, "o3", "openai", after, usage)
    df = call_costs(store)
    assert df.loc[0, "cost_usd"] == pytest.approx(genai("o3", usage, before))
    assert df.loc[1, "cost_usd"] == pytest.approx(genai("o3", usage, after))
    assert df.loc[0, "cost_usd"] > df.loc[1, "cost_usd"]  # o3's price was cut on 2025-06-10
    by_day = costs(store, by="day")
    assert by_day["cost_usd"].tolist() == pytest.approx(df["cost_usd"].tolist())


def test_tiered_prices_apply_to_the_whole_call(store: TranscriptStore) -> None:
    s = store.create_session(user="ana")
    small, large = Usage(150_000, 1_000), Usage(250_000, 1_000)
    call(store, s.id, "claude-sonnet-4-5", "openai", T1, small)
    call(store, s.id, "claude-sonnet-4-5", "openai", T1, large)
    df = call_costs(store)
    assert df["cost_usd"].tolist() == pytest.approx(
        [genai("claude-sonnet-4-5", small, T1), genai("claude-sonnet-4-5", large, T1)]
    )
    assert costs(store, by="model")["cost_usd"].iloc[0] == pytest.approx(df["cost_usd"].sum())
    assert len(Pricer().rates("claude-sonnet-4-5", "openai")) == 2


def test_costs_by_case_user_team_follow_the_records_links(
    store: TranscriptStore, filled: dict[str, str]
) -> None:
    assert costs_by_case(store)["case"].tolist() == [None]
    store.link_case(filled["ana"], "case-1", {"may_write": True}, "ana")
    by_case = costs_by_case(store)
    assert by_case.loc[0, "case"] == "case-1" and by_case.loc[0, "calls"] == 2
    assert costs(store, by="model", case="case-1")["calls"].sum() == 2
    assert call_costs(store, session_id=filled["ana"])["case_id"].tolist() == ["case-1", "case-1"]
    team = store.create_session(user="cy", team="red")
    call(store, team.id, "gpt-4o", "openai", T1, Usage(1_000, 100))
    by_team = costs(store, by="team,user")
    pairs = [
        (t if isinstance(t, str) else None, u) for t, u in zip(by_team["team"], by_team["user"], strict=True)
    ]
    assert pairs == [("red", "cy"), (None, "ana"), (None, "bob")]
    assert costs(store, by=(), team="red")["calls"].tolist() == [1]


def test_sql_views_in_a_duckdb_workspace(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path / "v.duckdb")
    s = store.create_session(user="ana")
    store.link_case(s.id, "case-1", {}, "ana")
    call(store, s.id, "gpt-4o", "openai", T1, Usage(1_000, 100))
    create_views(store)
    cur = store.cursor()
    assert cur.execute('SELECT DISTINCT "user", case_id FROM usage').fetchall() == [("ana", "case-1")]
    total = cur.execute("SELECT sum(cost_usd) FROM costs").fetchone()
    assert total is not None and total[0] == pytest.approx(costs(store, by=())["cost_usd"].iloc[0])
    store.close()


def test_sql_views_on_postgresql_are_a_calm_error(pg_url: str) -> None:
    with pytest.raises(ConfigurationError, match="DuckDB workspace"):
        create_views(TranscriptStore(pg_url))


def test_budget_status_orders_users_nearest_their_cap(store: TranscriptStore) -> None:
    now = datetime.now(UTC)
    ana = store.create_session(user="ana")
    bob = store.create_session(user="bob")
    call(store, ana.id, "gpt-4o", "openai", now, Usage(100_000, 20_000))  # $0.45
    call(store, bob.id, "gpt-4o", "openai", now, Usage(10_000, 1_000))  # $0.035
    status = budget_status(store, Budget(monthly_usd=0.5))
    assert status["user"].tolist() == ["ana", "bob"]
    assert status.loc[0, "usd_30d"] == pytest.approx(0.45)
    assert status.loc[0, "monthly_fill"] == pytest.approx(0.9)
    chart = charts.budget_fill(status).to_dict()
    assert chart["layer"][0]["mark"]["type"] == "bar"


def test_charts_are_vega_lite_specs(store: TranscriptStore, filled: dict[str, str]) -> None:
    spend = charts.spend_over_time(costs(store, by=("model", "day"))).to_dict()
    assert spend["mark"]["type"] == "bar" and spend["encoding"]["x"]["field"] == "day"
    tokens = charts.tokens_by_model(costs(store, by=("model",))).to_dict()
    assert tokens["encoding"]["y"]["field"] == "model"
    with pytest.raises(ValueError, match="lacks day"):
        charts.spend_over_time(costs(store, by=("model",)))


def test_costs_in_a_case_workspace_beside_the_case_tables(tmp_path: Path) -> None:
    """The case package keeps asset prices in its own ``prices`` table; the model rates must not collide."""
    from tahrix_lab.case.workspace import Workspace

    ws = Workspace(tmp_path / "case.duckdb")
    case_id = ws.load_sample_case()
    session = ws.start_investigation(case_id, user="ana")
    call(ws.store, session.id, "gpt-4o", "openai", T1, Usage(1_000, 100))
    df = call_costs(ws.store, session_id=session.id)
    assert df.loc[0, "case_id"] == case_id
    assert df.loc[0, "cost_usd"] == pytest.approx(genai("gpt-4o", Usage(1_000, 100), T1))
    assert costs(ws.store, by="case")["case"].tolist() == [case_id]
    assert ws.cases.scalar("SELECT count(*) FROM prices") > 0  # the case's asset prices are untouched
    ws.close()
