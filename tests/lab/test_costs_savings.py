"""What prompt caching saved: the ``costs`` view, ``costs()`` and ``tahrix costs``,
checked against genai-prices for the same tokens with and without caching."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part, Usage
from tahrix_lab.cli import main
from tahrix_lab.lab.costs import call_costs, costs

SONNET = "us.anthropic.claude-sonnet-4-20250514-v1:0"
AT = datetime(2026, 5, 3, 10, 0, tzinfo=UTC)
WRITE = Usage(3_666, 40, cache_read_tokens=0, cache_write_tokens=3_322)  # the first call writes
READ = Usage(13_645, 90, cache_read_tokens=4_704, cache_write_tokens=8_940)
PLAIN = Usage(2_000, 50)  # caching off: nothing cached, no saving


def price(usage: Usage) -> float:
    kw = {"input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0}
    if usage.cache_read_tokens:
        kw["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        kw["cache_write_tokens"] = usage.cache_write_tokens
    result = calc_price(PriceUsage(**kw), model_ref=SONNET, provider_id="aws", genai_request_timestamp=AT)
    return float(Decimal(result.total_price))


def uncached(usage: Usage) -> float:
    return price(Usage(usage.input_tokens, usage.output_tokens))


def add(store: TranscriptStore, session_id: str, usage: Usage, model: str = SONNET) -> None:
    store.append_message(session_id, Message.user("q"))
    store.append_message(session_id, Message(role="assistant", parts=[Part.of_text("a")], backend="bedrock",
                                             model_id=model, stop_reason="end_turn", usage=usage, created_at=AT))  # fmt: skip


@pytest.fixture
def store() -> Iterator[TranscriptStore]:
    s = TranscriptStore(":memory:")
    session = s.create_session(user="ana", purpose="investigation")
    for usage in (WRITE, READ, PLAIN):
        add(s, session.id, usage)
    add(s, session.id, Usage(1_000, 10, cache_read_tokens=500), model="my-own-model")  # no price known
    yield s
    s.close()


def test_the_costs_view_prices_each_call_uncached_and_the_saving(store: TranscriptStore) -> None:
    df = call_costs(store)
    assert df["uncached_cost_usd"].iloc[:3].tolist() == pytest.approx(
        [uncached(u) for u in (WRITE, READ, PLAIN)]
    )
    assert df["cost_usd"].iloc[:3].tolist() == pytest.approx([price(u) for u in (WRITE, READ, PLAIN)])
    saved = df["saved_usd"].tolist()
    assert saved[0] < 0  # a call that only wrote the cache paid more than uncached
    assert saved[1] == pytest.approx(uncached(READ) - price(READ)) and saved[1] > 0
    assert saved[2] == pytest.approx(0.0)
    assert pd.isna(saved[3]) and pd.isna(df["uncached_cost_usd"].iloc[3])  # unknown, never 0


def test_grouped_costs_sum_the_saving(store: TranscriptStore) -> None:
    df = costs(store, by=("model",)).set_index("model")
    sonnet = df.loc[SONNET]
    assert sonnet["uncached_cost_usd"] == pytest.approx(sum(uncached(u) for u in (WRITE, READ, PLAIN)))
    assert sonnet["saved_usd"] == pytest.approx(sonnet["uncached_cost_usd"] - sonnet["cost_usd"])
    assert sonnet["saved_usd"] == pytest.approx(call_costs(store)["saved_usd"].iloc[:3].sum())
    assert pd.isna(df.loc["my-own-model", "saved_usd"])


def test_tahrix_costs_shows_the_saving(
    store: TranscriptStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = str(tmp_path / "costs.duckdb")
    file_store = TranscriptStore(path)
    session = file_store.create_session(user="ana")
    for usage in (WRITE, READ):
        add(file_store, session.id, usage)
    file_store.close()
    monkeypatch.delenv("TAHRIX_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "240")
    assert main(["--db", path, "costs", "--by", "model"]) == 0
    out = capsys.readouterr().out
    saved = sum(uncached(u) - price(u) for u in (WRITE, READ))
    assert "saved_usd" in out and f"prompt caching saved ${saved:.4f}" in out
    assert main(["--db", path, "costs", "--by", "model", "--csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "saved_usd" in header and "uncached_cost_usd" in header
