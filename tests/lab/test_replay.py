"""Replay: a new session with replay_of, live and recorded tools, partial failure, estimates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from lab_helpers import QUESTIONS, run

from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore
from tahrix_lab.agent.backends.fake import text, tool_call
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.pricing import price
from tahrix_lab.agent.transcript import Session, Usage
from tahrix_lab.lab.replay import estimate_replay_cost, replay, replay_many

CLAUDE = "us.anthropic.claude-3-5-sonnet-20240620-v1:0"


def tool_results(
    store: TranscriptStore, session_id: str
) -> list[tuple[str | None, str | None, dict[str, Any] | None]]:
    return [
        (p.tool_name, p.tool_status, p.tool_result)
        for m in store.load_messages(session_id)
        for p in m.parts
        if p.type == "tool_result"
    ]


def test_live_replay_on_another_family_with_other_behaviour(
    store: TranscriptStore, registry: ToolRegistry, original: Session
) -> None:
    other = FakeBackend(
        [
            [tool_call("trace_funds", {"address": "0xabc"})],  # a different first tool
            [text("Funds left 0xabc for 0xdef.")],  # other wording
            [text("They went to 0xdef.")],  # no tool at all this time
        ],
        name="bedrock",
    )
    result = replay(original.id, backend=other, model=CLAUDE, store=store, registry=registry)

    assert result.ok and result.completed == result.turns == 2
    new = store.get_session(result.session_id)
    assert new.replay_of == original.id
    assert (new.user, new.purpose, new.system_prompt) == ("ana", "investigation", "Be precise.")
    messages = store.load_messages(new.id)
    assert [m.text for m in messages if m.role == "user"] == QUESTIONS
    calls = [m for m in messages if m.role == "assistant"]
    assert {(m.backend, m.model_id) for m in calls} == {("bedrock", CLAUDE)}
    # live: the tool really ran again
    assert registry.runs == [("trace_funds", {"address": "0xabc"})]  # type: ignore[attr-defined]
    # the model was sent the original's system prompt and its tools
    assert other.requests[0].system == "Be precise."
    assert {t["name"] for t in other.requests[0].tools} == {"lookup_address", "trace_funds"}
    # the original is untouched
    assert len(store.load_messages(original.id)) == 10


def test_recorded_tools_hit_and_miss_without_running_anything(
    store: TranscriptStore, registry: ToolRegistry, original: Session
) -> None:
    other = FakeBackend(
        [
            [
                tool_call("lookup_address", {"address": "0xabc"}),  # recorded: a hit
                tool_call("lookup_address", {"address": "0x999"}),  # never called: a miss
            ],
            [text("0xabc is an exchange; 0x999 is unknown.")],
            [tool_call("trace_funds", {"address": "0xabc"})],  # a hit
            [text("To 0xdef.")],
        ],
        name="bedrock",
    )
    result = replay(
        original.id, backend=other, model=CLAUDE, tools="recorded", store=store, registry=registry
    )

    assert result.ok
    assert registry.runs == []  # type: ignore[attr-defined]
    results = tool_results(store, result.session_id)
    assert results[0] == (
        "lookup_address",
        "ok",
        {"address": "0xabc", "label": "exchange hot wallet", "risk": 0.2},
    )
    name, status, miss = results[1]
    assert (name, status) == ("lookup_address", "error")
    assert miss is not None and miss["error"]["type"] == "not_recorded"
    assert "never called lookup_address with these arguments" in miss["error"]["message"]
    assert {"address": "0xabc"} in miss["error"]["recorded_inputs"]
    assert results[2] == ("trace_funds", "ok", {"hops": [{"to": "0xdef", "value": 12.5}]})
    assert result.recorded_misses == [{"tool": "lookup_address", "input": {"address": "0x999"}}]
    # the model saw the recorded answer exactly as the original model did
    sent = other.requests[1].messages[-1].parts[0].tool_result
    assert sent == {"address": "0xabc", "label": "exchange hot wallet", "risk": 0.2}


def test_recorded_argument_order_does_not_matter(store: TranscriptStore, registry: ToolRegistry) -> None:
    session = store.create_session(purpose="investigation")
    first = FakeBackend([[tool_call("lookup_address", {"address": "0xabc"})], [text("ok")]])
    run(store, session, "q", first, "gpt-4o", registry)
    again = FakeBackend([[tool_call("lookup_address", json.loads('{"address": "0xabc"}'))], [text("ok")]])
    result = replay(
        session.id, backend=again, model="gpt-4o", tools="recorded", store=store, registry=registry
    )
    assert tool_results(store, result.session_id)[0][1] == "ok"


def test_replay_that_fails_half_way_keeps_what_it_produced(
    store: TranscriptStore, registry: ToolRegistry, original: Session
) -> None:
    flaky = FakeBackend(
        [
            [text("First answer.")],
            [text("Partial sec"), BackendError("connection reset", retryable=False)],
        ],
        name="openai",
    )
    result = replay(original.id, backend=flaky, model="gpt-4o-mini", tools="recorded", store=store)

    assert not result.ok
    assert (result.completed, result.stopped_at, result.turns) == (1, 2, 2)
    assert result.error is not None and result.error["kind"] == "backend"
    assert "stopped at user turn 2 of 2" in result.summary()
    kept = store.load_messages(result.session_id)
    assert [m.text for m in kept if m.role == "user"] == QUESTIONS
    assert [m.text for m in kept if m.role == "assistant"] == ["First answer.", "Partial sec"]
    assert kept[-1].stop_reason == "error"


def test_replay_copies_the_case_link(store: TranscriptStore, original: Session) -> None:
    store.link_case(original.id, "case-7", {"may_write": False}, "ana")
    result = replay(
        original.id, backend=FakeBackend([[text("a")], [text("b")]]), model="m", tools="recorded", store=store
    )
    link = store.case_link(result.session_id)
    assert link is not None
    assert (link["case_id"], link["grant"], link["created_by"]) == ("case-7", {"may_write": False}, "ana")


def test_replay_many_with_a_progress_bar(store: TranscriptStore, original: Session) -> None:
    backend = FakeBackend([[text("a")], [text("b")], [text("c")], [text("d")]])
    results = replay_many(
        [original.id, original.id], progress="tqdm", backend=backend, model="m", tools="recorded", store=store
    )
    assert [r.ok for r in results] == [True, True]
    assert len({r.session_id for r in results}) == 2


def test_bad_tool_mode_and_unknown_session(store: TranscriptStore, original: Session) -> None:
    with pytest.raises(ConfigurationError, match="tools must be"):
        replay(original.id, backend=FakeBackend(), model="m", tools="cached", store=store)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="No session"):
        replay("nope", backend=FakeBackend(), model="m", store=store)


def test_estimate_replay_cost_uses_stored_tokens_and_target_price(
    store: TranscriptStore, original: Session
) -> None:
    calls = [m for m in store.load_messages(original.id) if m.role == "assistant"]
    est = estimate_replay_cost(original.id, CLAUDE, store=store, backend="bedrock")
    tokens_in = sum(m.usage.input_tokens or 0 for m in calls if m.usage)
    tokens_out = sum(m.usage.output_tokens or 0 for m in calls if m.usage)
    assert (est.calls, est.input_tokens, est.output_tokens) == (5, tokens_in, tokens_out)
    expected = sum(
        price(CLAUDE, Usage(m.usage.input_tokens, m.usage.output_tokens), backend="bedrock") or 0
        for m in calls
        if m.usage
    )
    assert est.cost_usd == pytest.approx(expected)
    assert est.cost_usd == pytest.approx((tokens_in * 3.0 + tokens_out * 15.0) / 1e6)
    assert est.original_cost_usd == pytest.approx((tokens_in * 2.5 + tokens_out * 10.0) / 1e6)
    assert estimate_replay_cost(original.id, "my-own-model", store=store).cost_usd is None


def test_replay_through_the_openai_wire_adapter(
    store: TranscriptStore, registry: ToolRegistry, original: Session
) -> None:
    """The replay drives a real OpenAI SDK client against a loopback Chat Completions server."""
    from wire import sse
    from wire.server import WireServer

    from tahrix_lab.agent.backends.openai import OpenAIBackend

    with WireServer() as server:
        server.add(
            sse.turn_reply(
                [{"kind": "tool_use", "id": "c1", "name": "lookup_address", "input": {"address": "0xabc"}}]
            ),
            sse.turn_reply([{"kind": "text", "text": "An exchange wallet."}]),
            sse.turn_reply([{"kind": "text", "text": "To 0xdef."}]),
        )
        backend = OpenAIBackend(base_url=server.url + "/v1", api_key="test-key")
        try:
            result = replay(original.id, backend=backend, model="gpt-4o-mini", tools="recorded", store=store)
        finally:
            backend.client.close()
        bodies = [r.json() for r in server.requests]

    assert result.ok, result.summary()
    assert [m["content"] for m in bodies[0]["messages"] if m["role"] == "user"] == [QUESTIONS[0]]
    tool_msgs = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_msgs[0]["content"])["label"] == "exchange hot wallet"
    texts = [m.text for m in store.load_messages(result.session_id) if m.role == "assistant" and m.text]
    assert texts == ["An exchange wallet.", "To 0xdef."]


def test_replay_of_a_case_investigation_recorded_and_live(tmp_path: Path) -> None:
    """The case package's scripted investigator, replayed: with recorded tools every call is a
    hit and the transcript diffs as identical in content; live, the tools run again on the case
    (the replay carries the case link, so the case context resolves)."""
    from tahrix_lab.case.investigator import QUESTION, scripted_backend
    from tahrix_lab.case.workspace import Workspace
    from tahrix_lab.lab.diff import diff

    ws = Workspace(tmp_path / "case.duckdb")
    case_id = ws.load_sample_case()
    session = ws.start_investigation(case_id, user="ana", grant={"may_write": False})
    question = QUESTION.format(case_id=case_id)
    events = list(ws.ask(session, question, backend=scripted_backend(ws, case_id), model="scripted"))
    assert not [p for e, p in events if e == "error"]

    recorded = replay(session.id, backend=scripted_backend(ws, case_id), model="scripted", tools="recorded",
                      store=ws.store, registry=ws.registry())  # fmt: skip
    assert recorded.ok and recorded.recorded_misses == []
    assert ws.case_of(recorded.session_id) == case_id
    d = diff(session.id, recorded.session_id, store=ws.store)
    assert [c.op for t in d.turns for c in t.tools] == ["same"] * d.totals["tools_same"]
    assert d.totals["tools_same"] >= 3 and d.turns[0].similarity == 1.0

    live = replay(session.id, backend=scripted_backend(ws, case_id), model="scripted", tools="live",
                  store=ws.store, registry=ws.registry(), context=ws.context_provider())  # fmt: skip
    assert live.ok

    def outcomes(sid: str) -> list[tuple[str | None, str | None]]:
        return [
            (p.tool_name, p.tool_status)
            for m in ws.store.load_messages(sid)
            for p in m.parts
            if p.type == "tool_result"
        ]

    # the same calls with the same outcomes, including the write the read-only grant refused:
    # the copied case link carries the grant
    assert outcomes(live.session_id) == outcomes(session.id)
    assert ("annotate", "error") in outcomes(live.session_id)
    assert diff(session.id, live.session_id, store=ws.store).turns[0].similarity == 1.0
    ws.close()


def test_replay_through_the_bedrock_wire_adapter_and_its_cost(
    store: TranscriptStore, original: Session
) -> None:
    """Real boto3 against a loopback event-stream server, a geo-prefixed model id and cached
    input tokens: the replayed calls are priced as genai-prices prices them."""
    import boto3
    import botocore.config
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price
    from wire import eventstream
    from wire.server import WireServer

    from tahrix_lab.agent.backends.bedrock import BedrockBackend
    from tahrix_lab.lab.costs import call_costs

    usage = {
        "input_tokens": 5_000,
        "output_tokens": 120,
        "cache_read_tokens": 3_000,
        "cache_write_tokens": 500,
    }
    done = {"kind": "done", "stop_reason": "tool_use", "usage": usage}
    with WireServer() as server:
        server.add(
            eventstream.turn_reply(
                [
                    {"kind": "tool_use", "id": "t1", "name": "lookup_address", "input": {"address": "0xabc"}},
                    done,
                ]
            ),
            eventstream.turn_reply(
                [{"kind": "text", "text": "An exchange."}, {**done, "stop_reason": "end_turn"}]
            ),
            eventstream.turn_reply(
                [{"kind": "text", "text": "To 0xdef."}, {**done, "stop_reason": "end_turn"}]
            ),
        )
        client = boto3.client(
            "bedrock-runtime", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="test",
            aws_secret_access_key="test", config=botocore.config.Config(retries={"total_max_attempts": 1}),
        )  # fmt: skip
        result = replay(
            original.id, backend=BedrockBackend(client=client), model=CLAUDE, tools="recorded", store=store
        )
        paths = [r.path for r in server.requests]
        second = server.requests[1].json()

    assert result.ok, result.summary()
    assert all(CLAUDE in unquote(p) for p in paths)
    tool_results = [c for m in second["messages"] for c in m["content"] if "toolResult" in c]
    assert tool_results[0]["toolResult"]["content"][0]["json"]["label"] == "exchange hot wallet"
    df = call_costs(store, session_id=result.session_id)
    assert list(df["backend"].unique()) == ["bedrock"]
    assert df["cache_read_tokens"].tolist() == [3_000] * 3
    expected = float(
        calc_price(
            PriceUsage(
                input_tokens=5_000, output_tokens=120, cache_read_tokens=3_000, cache_write_tokens=500
            ),
            model_ref=CLAUDE,
            provider_id="aws",
        ).total_price
    )
    assert df["cost_usd"].tolist() == pytest.approx([expected] * 3)
