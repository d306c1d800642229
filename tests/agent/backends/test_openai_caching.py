"""OpenAI-compatible prompt caching: within a session the request bytes before the
history never change, and one ``prompt_cache_key`` per session goes where the
endpoint takes it. Through the real openai SDK against the loopback SSE server,
which keeps OpenAI's automatic prefix cache (``tests/wire/caching.py``)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from wire.caching import PrefixCachingChat, scripted
from wire.server import WireServer

from tahrix_lab.agent.backends.openai import OpenAIBackend, accepts_prompt_cache_key, as_wire_request
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import Tool, ToolRegistry
from tahrix_lab.agent.transcript import Message

SYSTEM = "You are a careful on-chain investigator. Cite every transaction hash you rely on.\n" * 60
SCHEMA = {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}


def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"address": args["address"], "transfers": [{"n": i, "to": f"0x{i:040x}"} for i in range(40)]}


def trace(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"start": args["address"], "hops": 3}


REGISTRY = ToolRegistry([
    Tool("lookup_address", "Look an address up in the case.", SCHEMA, lookup),
    Tool("trace_funds", "Follow the funds from an address.", SCHEMA, trace),
])  # fmt: skip
TURNS = [
    [{"kind": "tool_use", "id": "call_a", "name": "lookup_address", "input": {"address": "0xaaa"}},
     {"kind": "tool_use", "id": "call_b", "name": "trace_funds", "input": {"address": "0xaaa"}}],
    [{"kind": "tool_use", "id": "call_c", "name": "lookup_address", "input": {"address": "0xbbb"}}],
    [{"kind": "text", "text": "0xaaa paid 0xbbb."}],
]  # fmt: skip


@pytest.fixture
def chat() -> Iterator[tuple[WireServer, PrefixCachingChat]]:
    model = PrefixCachingChat(scripted(TURNS * 2))
    with WireServer(model) as server:
        yield server, model


def investigate(
    server: WireServer,
    store: TranscriptStore,
    backend: OpenAIBackend,
    inference: dict[str, Any] | None = None,
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    session = store.create_session(system_prompt=SYSTEM)
    store.append_message(session.id, Message.user("Where did the funds from 0xaaa go?"))
    events = list(run_agent(session, store=store, backend=backend, model="gpt-4o-mini", registry=REGISTRY,
                            inference=inference))  # fmt: skip
    assert events[-1][0] == "done"
    return session.id, events


def split(raw: bytes) -> tuple[bytes, bytes]:
    """A request body as (everything up to the end of its last message, everything after the messages)."""
    text = raw.decode()
    start = text.index('"messages":') + len('"messages":')
    _, end = json.JSONDecoder().raw_decode(text, start)
    return raw[: len(text[: end - 1].encode())], raw[len(text[:end].encode()) :]


def test_request_prefix_is_byte_identical_across_a_session(
    chat: tuple[WireServer, PrefixCachingChat], store: TranscriptStore
) -> None:
    server, model = chat
    backend = OpenAIBackend(base_url=server.url + "/v1", api_key="k", prompt_cache_key=True)
    session_id, events = investigate(server, store, backend)
    raws = [r.body for r in server.requests]
    assert len(raws) == 3
    for before, after in itertools.pairwise(raws):
        history, rest = split(before)
        assert after.startswith(history)  # everything before the new turn, byte for byte
        assert split(after)[1] == rest  # tools, settings and the cache key unchanged
    bodies = [json.loads(r) for r in raws]
    assert {b["prompt_cache_key"] for b in bodies} == {f"tahrix-{session_id}"}
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["lookup_address", "trace_funds"]
    assert bodies[0]["messages"][0] == {"role": "system", "content": SYSTEM}
    # the provider's prefix cache hit, and the cached tokens reach the usage events
    assert model.cached[0] == 0 and all(c >= 1024 for c in model.cached[1:])
    shown = [p["usage"]["cache_read_tokens"] for e, p in events if e == "usage"]
    assert shown == model.cached
    # a second session gets its own key
    other, _ = investigate(server, store, backend)
    assert (
        json.loads(server.requests[-1].body)["prompt_cache_key"]
        == f"tahrix-{other}"
        != bodies[0]["prompt_cache_key"]
    )


def test_no_cache_key_where_the_endpoint_is_not_known_to_take_it(
    chat: tuple[WireServer, PrefixCachingChat], store: TranscriptStore
) -> None:
    server, model = chat
    investigate(server, store, OpenAIBackend(base_url=server.url + "/v1", api_key="k"))
    assert all("prompt_cache_key" not in json.loads(r.body) for r in server.requests)
    assert all(c >= 1024 for c in model.cached[1:])  # the stable prefix still caches


def test_the_setting_turns_the_cache_key_off(
    chat: tuple[WireServer, PrefixCachingChat], store: TranscriptStore
) -> None:
    server, _ = chat
    backend = OpenAIBackend(base_url=server.url + "/v1", api_key="k", prompt_cache_key=True)
    investigate(server, store, backend, inference={"prompt_caching": False})
    assert all("prompt_cache_key" not in json.loads(r.body) for r in server.requests)


def test_which_endpoints_take_the_key_by_default() -> None:
    assert accepts_prompt_cache_key(None)
    assert accepts_prompt_cache_key("https://api.openai.com/v1")
    assert not accepts_prompt_cache_key("http://localhost:11434/v1")
    assert not accepts_prompt_cache_key("https://openrouter.ai/api/v1")
    client = openai.OpenAI(api_key="k", max_retries=0)
    assert OpenAIBackend(client=client).prompt_cache_key
    assert not OpenAIBackend(client=client, prompt_cache_key=False).prompt_cache_key
    client.close()


def test_a_history_outside_a_session_sends_no_key() -> None:
    request = as_wire_request(system="S", messages=[Message.user("Hi")], tools=[], model="gpt-4o",
                              inference=None, cache_key=None)  # fmt: skip
    assert "prompt_cache_key" not in request


def test_a_follow_up_question_keeps_the_prefix_after_the_store_round_trip(
    chat: tuple[WireServer, PrefixCachingChat], store: TranscriptStore
) -> None:
    """The second question's run loads the history from the store: the bytes sent
    for the earlier turns must not change (key order, raw tool arguments)."""
    server, model = chat
    backend = OpenAIBackend(base_url=server.url + "/v1", api_key="k", prompt_cache_key=True)
    session_id, _ = investigate(server, store, backend)
    store.append_message(session_id, Message.user("And before that?"))
    events = list(run_agent(session_id, store=store, backend=backend, model="gpt-4o-mini", registry=REGISTRY))
    assert events[-1][0] == "done"
    last_of_first, first_of_second = server.requests[2].body, server.requests[3].body
    assert first_of_second.startswith(split(last_of_first)[0])
    assert split(first_of_second)[1] == split(last_of_first)[1]
    assert model.cached[3] >= model.cached[2]
