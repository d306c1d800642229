"""Bedrock prompt caching: where the adapter puts cache points, through real boto3
against the loopback ConverseStream model that keeps a cache by Bedrock's rules
(``tests/wire/caching.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from harness import bedrock_client
from hypothesis import given, settings
from hypothesis import strategies as st
from wire import cassettes
from wire.caching import TTL_SECONDS, CachingConverse, scripted
from wire.server import WireServer

from tahrix_lab.agent.backends.bedrock import BedrockBackend, as_wire_request
from tahrix_lab.agent.backends.bedrock_caching import (
    CACHE_POINT,
    MAX_CACHE_POINTS,
    caching_for,
    estimated_tokens,
)
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.pricing import Pricer
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import Tool, ToolRegistry
from tahrix_lab.agent.transcript import Message, Part, Usage

SONNET = "us.anthropic.claude-sonnet-4-20250514-v1:0"
NOVA = "us.amazon.nova-pro-v1:0"
SYSTEM = "You are a careful on-chain investigator. Cite every transaction hash you rely on.\n" * 60
SCHEMA = {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}


def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    # big enough that each turn's history passes the 1,024-token minimum
    return {"address": args["address"], "transfers": [{"n": i, "to": f"0x{i:040x}"} for i in range(80)]}


# a tool spec long enough (~1,200 tokens) that its end is a cache point of its own
DESCRIPTION = "Look an address up in the case: its transfers, labels and flags. " * 75
REGISTRY = ToolRegistry([Tool("lookup_address", DESCRIPTION, SCHEMA, lookup)])
TURNS = [
    [{"kind": "tool_use", "id": "t1", "name": "lookup_address", "input": {"address": "0xaaa"}}],
    [{"kind": "tool_use", "id": "t2", "name": "lookup_address", "input": {"address": "0xbbb"}}],
    [{"kind": "text", "text": "0xaaa paid 0xbbb, which deposits at an exchange."}],
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def model_server(clock: Clock) -> Iterator[tuple[WireServer, CachingConverse]]:
    model = CachingConverse(scripted(TURNS * 3), clock=clock)
    with WireServer(model) as server:
        yield server, model


def investigate(
    server: WireServer, store: TranscriptStore, model: str, inference: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    client = bedrock_client(server.url)
    try:
        session = store.create_session(system_prompt=SYSTEM)
        store.append_message(session.id, Message.user("Where did the funds from 0xaaa go?"))
        return list(
            run_agent(
                session, store=store, backend=BedrockBackend(client=client), model=model,
                registry=REGISTRY, inference=inference,
            )
        )  # fmt: skip
    finally:
        client.close()


def points(body: dict[str, Any]) -> list[str]:
    """Where a request's cache points sit: "tools", "system", "messages[i]" (always last in its list)."""
    out = []
    sections = [("tools", body.get("toolConfig", {}).get("tools", [])), ("system", body.get("system", []))]
    sections += [(f"messages[{i}]", m["content"]) for i, m in enumerate(body["messages"])]
    for where, blocks in sections:
        for at, block in enumerate(blocks):
            if "cachePoint" in block:
                assert block == CACHE_POINT and at == len(blocks) - 1, f"{where}: {blocks}"
                out.append(where)
    return out


def test_cache_points_on_calls_one_two_and_three_of_a_tool_session(
    model_server: tuple[WireServer, CachingConverse], store: TranscriptStore
) -> None:
    server, model = model_server
    events = investigate(server, store, SONNET)
    assert events[-1][0] == "done"
    bodies = [r.json() for r in server.requests]
    # the question is too short to clear the minimum: no point there (Bedrock would ignore it)
    assert [points(b) for b in bodies] == [
        ["tools", "system"],
        ["tools", "system", "messages[2]"],
        ["tools", "system", "messages[2]", "messages[4]"],
    ]
    assert all(len(points(b)) <= MAX_CACHE_POINTS for b in bodies)
    assert all(p.counts for a in model.accounts for p in a.points)  # no point wasted
    first, second, third = model.accounts
    # call 1 writes tools+system; call 2 reads them and writes through its first
    # tool result; call 3 reads all of call 2's prompt and writes the new turn
    assert first.read == 0 and first.write == first.points[1].tokens
    assert second.read == first.write
    assert second.write == second.points[-1].tokens - second.read
    assert third.read == second.total
    assert third.write == third.total - third.read
    # the neutral Usage: input includes cache reads and writes; priced with them
    stored = [m for m in store.load_messages(events[-1][1]["session_id"]) if m.role == "assistant"]
    assert [m.usage.input_tokens for m in stored if m.usage] == [a.total for a in model.accounts]
    assert [(m.usage.cache_read_tokens, m.usage.cache_write_tokens) for m in stored if m.usage] == [
        (a.read, a.write) for a in model.accounts
    ]
    costs = [p["cost_usd"] for e, p in events if e == "usage"]
    pricer = Pricer(aliases={})
    assert costs == [pricer.price(SONNET, m.usage, backend="bedrock") for m in stored]
    uncached = [pricer.price(SONNET, Usage(m.usage.input_tokens, m.usage.output_tokens), backend="bedrock")
                for m in stored if m.usage]  # fmt: skip
    assert sum(c for c in costs if c) < sum(c for c in uncached if c)
    # the usage event carries the same tokens priced uncached: the widget shows the difference
    assert [p["uncached_cost_usd"] for e, p in events if e == "usage"] == uncached


def test_nova_takes_no_cache_point_in_the_tool_specs(
    model_server: tuple[WireServer, CachingConverse], store: TranscriptStore
) -> None:
    server, model = model_server
    events = investigate(server, store, NOVA)
    assert events[-1][0] == "done"  # the model would refuse a cachePoint in toolConfig.tools
    assert [points(r.json()) for r in server.requests] == [
        ["system"],  # the tool specs' tokens count towards the system point's minimum
        ["system", "messages[2]"],
        ["system", "messages[2]", "messages[4]"],
    ]
    assert model.accounts[2].read == model.accounts[1].total


@pytest.mark.parametrize(
    "model_id", ["meta.llama3-70b-instruct-v1:0", "us.anthropic.claude-3-haiku-20240307-v1:0", "mistral.mistral-large-2402-v1:0"]
)  # fmt: skip
def test_no_cache_points_for_a_family_without_caching(
    model_server: tuple[WireServer, CachingConverse], store: TranscriptStore, model_id: str
) -> None:
    server, model = model_server
    events = investigate(server, store, model_id)
    assert events[-1][0] == "done"  # any cachePoint would have been a ValidationException
    assert [points(r.json()) for r in server.requests] == [[], [], []]
    assert all(a.read == a.write == 0 for a in model.accounts)


def test_the_setting_turns_caching_off(
    model_server: tuple[WireServer, CachingConverse], store: TranscriptStore
) -> None:
    server, _ = model_server
    events = investigate(server, store, SONNET, inference={"prompt_caching": False})
    assert [points(r.json()) for r in server.requests] == [[], [], []]
    usages = [p["usage"] for e, p in events if e == "usage"]
    assert all(u["cache_read_tokens"] is None and u["cache_write_tokens"] is None for u in usages)


def test_a_cached_prefix_is_read_within_five_minutes_and_written_again_after(
    model_server: tuple[WireServer, CachingConverse], store: TranscriptStore, clock: Clock
) -> None:
    server, model = model_server
    investigate(server, store, SONNET)
    prefix = model.accounts[0].write  # tools + system
    clock.now += TTL_SECONDS - 1
    investigate(server, store, SONNET)  # a new session, same tools and system prompt
    assert (model.accounts[3].read, model.accounts[3].write) == (prefix, 0)
    clock.now += TTL_SECONDS + 1
    investigate(server, store, SONNET)
    assert (model.accounts[6].read, model.accounts[6].write) == (0, prefix)


def test_points_below_the_minimum_cache_nothing(clock: Clock, store: TranscriptStore) -> None:
    model = CachingConverse(scripted([[{"kind": "text", "text": "hi"}]]), clock=clock)
    with WireServer(model) as server:
        client = bedrock_client(server.url)
        backend = BedrockBackend(client=client)
        events = list(backend.stream(system="Be brief.", messages=[Message.user("Hi")], tools=[], model=SONNET,
                                     inference=None))  # fmt: skip
        client.close()
    # Bedrock ignores a point before the minimum, so the adapter sends none
    assert points(server.requests[0].json()) == []
    assert events[-1]["usage"]["input_tokens"] == model.accounts[0].total  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    ("model_id", "tools"),
    [
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", True),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("eu.anthropic.claude-3-7-sonnet-20250219-v1:0", True),
        ("apac.anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("anthropic.claude-opus-4-1-20250805-v1:0", True),
        ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0", True),
        ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0", True),
        ("amazon.nova-micro-v1:0", False),
        ("apac.amazon.nova-lite-v1:0", False),
        ("us-gov.amazon.nova-pro-v1:0", False),
        ("us.amazon.nova-premier-v1:0", False),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", None),  # preview only: not offered to new accounts
        ("anthropic.claude-3-haiku-20240307-v1:0", None),
        ("us.meta.llama3-3-70b-instruct-v1:0", None),
        ("us.deepseek.r1-v1:0", None),
        ("amazon.titan-text-express-v1", None),
    ],
)  # fmt: skip
def test_families_that_cache_by_model_id(model_id: str, tools: bool | None) -> None:
    caching = caching_for(model_id)
    assert (None if caching is None else caching.tools) == tools


def test_application_profile_arns_cache_by_their_alias() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    messages = [Message.user("Hi")]
    plain = as_wire_request(system=SYSTEM, messages=messages, tools=[], model=arn, inference=None)
    aliased = as_wire_request(system=SYSTEM, messages=messages, tools=[], model=arn, inference=None,
                              profile_model="anthropic.claude-sonnet-4-20250514-v1:0")  # fmt: skip
    assert points(plain) == [] and points(aliased) == ["system"]


def test_cache_point_blocks_have_the_recorded_shape() -> None:
    """The recorded request (pydantic-ai, Claude Sonnet 4.5) closes system and
    tools with the same block the adapter sends."""
    recorded = cassettes.load("bedrock/pydantic-ai__test_bedrock_cache_write_and_read.yaml")[0].request
    assert recorded["system"][-1] == CACHE_POINT
    assert recorded["toolConfig"]["tools"][-1] == CACHE_POINT
    spec = {"name": "catalog_lookup", "description": DESCRIPTION, "parameters": {"type": "object"}}
    question = Message.user("What is 10 + 11? Show each step of the sum. " * 120)
    sent = as_wire_request(system=SYSTEM, messages=[question], tools=[spec],
                           model="us.anthropic.claude-sonnet-4-5-20250929-v1:0", inference=None)  # fmt: skip
    assert sent["system"][-1] == recorded["system"][-1]
    assert sent["toolConfig"]["tools"][-1] == recorded["toolConfig"]["tools"][-1]
    assert sent["messages"][-1]["content"][-1] == recorded["messages"][-1]["content"][-1]


def _history(shape: list[tuple[bool, int]], pad: int = 0) -> list[Message]:
    """A valid history from (tool call?, results) pairs: question, then per turn an
    assistant message and, after a tool call, its results (``pad`` characters each)."""
    out = [Message.user("Q")]
    for i, (calls, n) in enumerate(shape):
        if calls:
            uses = [Part.of_tool_use(f"c{i}_{k}", "lookup_address", {"address": str(k)}) for k in range(n)]
            out.append(Message(role="assistant", backend="bedrock", parts=uses))
            results = [Part.of_tool_result(f"c{i}_{k}", "lookup_address", {"k": k, "rows": "r" * pad})
                       for k in range(n)]  # fmt: skip
            out.append(Message(role="tool", parts=results))
        else:
            out.append(Message(role="assistant", backend="bedrock", parts=[Part.of_text("answer")]))
            out.append(Message.user("and then?"))
    return out


def _sections(body: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """A Converse request in the order Bedrock reads it, without its cache points."""
    out = [("tools", body.get("toolConfig", {}).get("tools", [])), ("system", body.get("system", []))]
    out += [(f"messages[{i}]", m["content"]) for i, m in enumerate(body["messages"])]
    return [(where, [b for b in blocks if "cachePoint" not in b]) for where, blocks in out]


@settings(max_examples=80, deadline=None)
@given(
    shape=st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=10),
    pad=st.sampled_from([0, 600, 2500, 9000]),
    system=st.sampled_from([None, "S", SYSTEM]),
    with_tools=st.booleans(),
    model_id=st.sampled_from([SONNET, NOVA, "anthropic.claude-haiku-4-5-20251001-v1:0",
                              "meta.llama3-70b-instruct-v1:0"]),
)  # fmt: skip
def test_cache_points_are_few_all_count_and_the_last_call_s_is_read_back(
    shape: list[tuple[bool, int]], pad: int, system: str | None, with_tools: bool, model_id: str
) -> None:
    """For any session: at most 4 points, none where Bedrock would not count it, the
    prompt otherwise byte for byte the same, and the last point of the previous
    call (the same history one turn shorter) is among this call's."""
    tools = (
        [{"name": "lookup_address", "description": DESCRIPTION, "parameters": SCHEMA}] if with_tools else []
    )

    def request(history: list[Message], caching: bool = True) -> dict[str, Any]:
        inference = None if caching else {"prompt_caching": False}
        return as_wire_request(
            system=system, messages=history, tools=tools, model=model_id, inference=inference
        )

    messages = _history(shape, pad)
    cached = request(messages)
    where = points(cached)
    assert len(where) <= MAX_CACHE_POINTS
    plain = request(messages, caching=False)
    assert _sections(cached) == _sections(plain)
    caching = caching_for(model_id)
    if caching is None:
        assert where == []
        return
    since = 0
    roles = {f"messages[{i}]": m["role"] for i, m in enumerate(cached["messages"])}
    for name, blocks in _sections(cached):
        since += estimated_tokens(blocks)
        if name in where:
            assert since >= caching.min_tokens, (
                f"{name} would not count ({since} tokens since the last point)"
            )
            assert roles.get(name, "user") == "user" and (name != "tools" or caching.tools)
            since = 0
    previous = _history(shape[:-1], pad)
    before = points(request(previous))
    if before:
        assert before[-1] in where, f"the previous call wrote {before[-1]}; this call has {where}"


def test_a_follow_up_question_reads_the_whole_earlier_investigation(
    model_server: tuple[WireServer, CachingConverse], store: TranscriptStore
) -> None:
    """The second question's run loads the history from the store; its first call
    reads everything the last call of the first question sent."""
    server, model = model_server
    events = investigate(server, store, SONNET)
    session_id = events[-1][1]["session_id"]
    store.append_message(session_id, Message.user("And before 0xaaa?"))
    client = bedrock_client(server.url)
    more = list(run_agent(session_id, store=store, backend=BedrockBackend(client=client), model=SONNET,
                          registry=REGISTRY))  # fmt: skip
    client.close()
    assert more[-1][0] == "done"
    # the new question is too short for a point of its own; the last tool result's is read
    assert points(server.requests[3].json()) == ["tools", "system", "messages[2]", "messages[4]"]
    assert model.accounts[3].read == model.accounts[2].total


@settings(max_examples=40, deadline=None)
@given(
    shapes=st.lists(
        st.lists(st.tuples(st.booleans(), st.integers(1, 3)), max_size=5), min_size=1, max_size=4
    ),
    gaps=st.lists(st.floats(0, 2 * TTL_SECONDS), min_size=4, max_size=4),
)
def test_the_cache_model_never_counts_a_token_twice(
    shapes: list[list[tuple[bool, int]]], gaps: list[float]
) -> None:
    clock = Clock()
    model = CachingConverse(scripted([]), clock=clock)
    tools = [{"name": "lookup_address", "description": "Look up. " * 300, "parameters": SCHEMA}]
    for shape, gap in zip(shapes, gaps, strict=False):
        clock.now += gap
        body = as_wire_request(
            system=SYSTEM, messages=_history(shape), tools=tools, model=SONNET, inference=None
        )
        for _ in range(2):  # the same request twice: the second reads what the first wrote
            account = model.account(SONNET, json.loads(json.dumps(body)))
            assert account.read >= 0 and account.write >= 0 and account.fresh >= 0
            assert account.read + account.write <= account.total
        counting = [p for p in account.points if p.counts]
        assert (account.read, account.write) == ((counting[-1].tokens, 0) if counting else (0, 0))
