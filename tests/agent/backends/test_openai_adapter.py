"""The OpenAI-compatible adapter through the real ``openai`` SDK against loopback SSE servers.

Recorded vectors (``tests/vectors/openai``) are replayed byte for byte;
what the adapter must make of them is pinned here."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from wire import cassettes, sse
from wire.server import Reply, WireServer

from tahrix_lab.agent.backends.base import Event
from tahrix_lab.agent.backends.media import MediaError
from tahrix_lab.agent.backends.openai import OpenAIBackend, as_wire_request, map_stop_reason
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.transcript import Message, Part

HELLO = [Message.user("Hello")]


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as s:
        yield s


@pytest.fixture
def backend(server: WireServer) -> Iterator[OpenAIBackend]:
    b = OpenAIBackend(base_url=server.url + "/v1", api_key="test-key")
    yield b
    b.client.close()


# Every test reads the backend both ways: ``stream`` (the SDK's OpenAI) and ``astream`` (its
# AsyncOpenAI twin, which the job service reads on an event loop). Same events, same errors.
READ = "stream"


@pytest.fixture(params=["stream", "astream"], autouse=True)
def reader(request: pytest.FixtureRequest) -> str:
    global READ
    READ = request.param
    return READ


def stream(
    backend: OpenAIBackend,
    messages: list[Message] | None = None,
    *,
    into: list[Event] | None = None,
    **kw: Any,
) -> list[Event]:
    """The events of one request, read as ``READ`` says (into ``into``: what came before a failure)."""
    args: dict[str, Any] = {
        "system": None,
        "messages": messages or HELLO,
        "tools": [],
        "model": "m",
        "inference": None,
    }
    args.update(kw)
    out: list[Event] = [] if into is None else into
    if READ == "stream":
        out.extend(backend.stream(**args))
        return out

    async def collect() -> None:
        try:
            async for event in backend.astream(**args):
                out.append(event)
        finally:
            await backend.aclose()  # this loop ends here: so does the client made on it

    asyncio.run(collect())
    return out


def text_of(events: list[Event], kind: str = "text") -> str:
    return "".join(e["text"] for e in events if e["kind"] == kind)  # type: ignore[typeddict-item]


def replay(server: WireServer, name: str) -> list[cassettes.Interaction]:
    interactions = cassettes.load(f"openai/{name}")
    server.add(*[i.reply for i in interactions])
    return interactions


# -- recorded vectors -------------------------------------------------------------
def test_openai_tool_call_vector_and_the_follow_up_request(
    server: WireServer, backend: OpenAIBackend
) -> None:
    recorded = replay(server, "pydantic-ai__test_openai__test_run_stream_sync_streams_real_model.yaml")
    tools = [
        {
            "name": "get_capital",
            "description": "",
            "parameters": recorded[0].request["tools"][0]["function"]["parameters"],
        }
    ]
    question = Message.user("What is the capital of the UK? Use the tool, then answer.")
    events = stream(backend, [question], tools=tools, model="gpt-4o-mini")
    assert events == [
        {"kind": "tool_use", "id": "call_ZR5UUuTt3pf61kjwAJIYdVMj", "name": "get_capital",
         "input": {"country": "UK"}, "raw": '{"country":"UK"}'},
        {"kind": "done", "stop_reason": "tool_use", "raw_stop_reason": "tool_calls",
         "usage": {"input_tokens": 53, "output_tokens": 15, "cache_read_tokens": 0,
                   "cache_write_tokens": None, "reasoning_tokens": 0}},
    ]  # fmt: skip
    first = server.requests[0].json()
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["messages"] == recorded[0].request["messages"]
    assert first["tools"][0]["type"] == "function"
    assert first["tools"][0]["function"]["name"] == "get_capital"

    use = events[0]
    history = [
        question,
        Message(
            role="assistant",
            backend="openai",
            parts=[Part.of_tool_use(use["id"], use["name"], use["input"], use["raw"])],
        ),  # type: ignore[typeddict-item]
        Message(role="tool", parts=[Part.of_tool_result(use["id"], "get_capital", {"capital": "London"})]),  # type: ignore[typeddict-item]
    ]
    answer = stream(backend, history, tools=tools, model="gpt-4o-mini")
    assert text_of(answer) == "The capital of the UK is London."
    second = server.requests[1].json()["messages"]
    # the assistant turn goes back exactly as the real client sent it
    assert second[1] == recorded[1].request["messages"][1]
    assert second[2] == {
        "role": "tool",
        "tool_call_id": "call_ZR5UUuTt3pf61kjwAJIYdVMj",
        "content": '{"capital": "London"}',
    }


def test_deepseek_reasoning_with_usage_on_the_finish_chunk(
    server: WireServer, backend: OpenAIBackend
) -> None:
    replay(server, "pydantic-ai__test_deepseek__test_deepseek_model_thinking_stream.yaml")
    events = stream(backend, model="deepseek-reasoner")
    thought = text_of(events, "reasoning")
    assert len(thought) == 882
    assert thought.startswith('Hmm, the user just said "Hello".')
    assert text_of(events) == "Hello there! 😊 How can I help you today?"
    kinds = [e["kind"] for e in events]
    assert kinds.index("text") > max(i for i, k in enumerate(kinds) if k == "reasoning")
    assert events[-1] == {
        "kind": "done", "stop_reason": "end_turn", "raw_stop_reason": "stop",
        "usage": {"input_tokens": 6, "output_tokens": 212, "cache_read_tokens": 0,
                  "cache_write_tokens": None, "reasoning_tokens": 198},
    }  # fmt: skip


def test_openrouter_reasoning_with_usage_after_the_finish_chunk(
    server: WireServer, backend: OpenAIBackend
) -> None:
    replay(server, "pydantic-ai__test_openrouter__test_openrouter_streaming_reasoning.yaml")
    events = stream(backend)
    assert text_of(events, "reasoning") == "This is a simple arithmetic question. 2+2 equals 4."
    assert text_of(events) == "2 + 2 = 4"
    assert events[-1]["usage"] == {  # type: ignore[typeddict-item]
        "input_tokens": 43, "output_tokens": 36, "cache_read_tokens": 0,
        "cache_write_tokens": None, "reasoning_tokens": 13,
    }  # fmt: skip


def test_openrouter_cached_tokens(server: WireServer, backend: OpenAIBackend) -> None:
    replay(server, "pydantic-ai__test_openrouter__test_openrouter_stream_with_native_options.yaml")
    events = stream(backend)
    assert text_of(events).startswith("I'm Grok, an AI built by xAI.")
    assert events[-1]["usage"] == {  # type: ignore[typeddict-item]
        "input_tokens": 687, "output_tokens": 187, "cache_read_tokens": 679,
        "cache_write_tokens": None, "reasoning_tokens": 118,
    }  # fmt: skip


def test_openrouter_in_band_error_mid_stream(server: WireServer, backend: OpenAIBackend) -> None:
    replay(server, "pydantic-ai__test_openrouter__test_openrouter_stream_error.yaml")
    seen: list[Event] = []
    with pytest.raises(BackendError) as info:
        stream(backend, into=seen)
    assert text_of(seen, "reasoning") == "We need to respond to a greeting. The user"
    assert info.value.status == 400
    assert info.value.retryable is False
    assert "Token limit reached" in info.value.message


def test_model_not_found_before_the_stream(server: WireServer, backend: OpenAIBackend) -> None:
    replay(server, "pydantic-ai__test_model_name_suggestion_openai-chat.yaml")
    with pytest.raises(BackendError) as info:
        stream(backend, model="gpt-5.2-proo")
    assert info.value.status == 404
    assert info.value.retryable is False
    assert "does not exist" in info.value.message


# -- scripted streams ---------------------------------------------------------------
@pytest.mark.parametrize("shape", ["openai", "deepseek", "openrouter"])
def test_three_usage_shapes(server: WireServer, backend: OpenAIBackend, shape: str) -> None:
    usage = {
        "input_tokens": 900,
        "output_tokens": 50,
        "cache_read_tokens": 800,
        "cache_write_tokens": None,
        "reasoning_tokens": 20,
    }
    done = {"kind": "done", "stop_reason": "end_turn", "raw_stop_reason": "stop", "usage": usage}
    server.add(sse.turn_reply([{"kind": "text", "text": "ok"}, done], shape=shape))
    events = stream(backend)
    assert text_of(events) == "ok"
    assert events[-1]["usage"] == usage  # type: ignore[typeddict-item]


def test_parallel_fragmented_tool_calls(server: WireServer, backend: OpenAIBackend) -> None:
    calls = [
        {"kind": "tool_use", "id": "call_a", "name": "lookup", "input": {"address": "0x" + "a" * 40}},
        {"kind": "tool_use", "id": "call_b", "name": "trace", "input": {"hops": 3, "chain": "eth"}},
    ]
    server.add(sse.turn_reply(calls, fragment=3))
    events = stream(backend)
    assert [(e["id"], e["name"], e["input"]) for e in events if e["kind"] == "tool_use"] == [  # type: ignore[typeddict-item]
        ("call_a", "lookup", {"address": "0x" + "a" * 40}),
        ("call_b", "trace", {"hops": 3, "chain": "eth"}),
    ]
    assert events[-1]["stop_reason"] == "tool_use"  # type: ignore[typeddict-item]


def test_invalid_json_arguments_keep_the_raw_text(server: WireServer, backend: OpenAIBackend) -> None:
    server.add(
        sse.turn_reply(
            [{"kind": "tool_use", "id": "c1", "name": "lookup", "input": None, "raw": '{"a": tru'}]
        )
    )
    events = stream(backend)
    assert events[0] == {"kind": "tool_use", "id": "c1", "name": "lookup", "input": None, "raw": '{"a": tru'}


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("tool_calls", "tool_use"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("weird", "other"),
    ],
)
def test_finish_reasons(finish: str, stop: str) -> None:
    assert map_stop_reason(finish) == stop


# -- failures -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "headers", "retryable", "retry_after"),
    [
        (429, {"retry-after": "3"}, True, 3.0),
        (429, {"retry-after-ms": "1500"}, True, 1.5),
        (503, {}, True, None),
        (500, {}, True, None),
        (401, {}, False, None),
        (400, {}, False, None),
    ],
)
def test_http_errors_before_the_stream(
    server: WireServer,
    backend: OpenAIBackend,
    status: int,
    headers: dict[str, str],
    retryable: bool,
    retry_after: float | None,
) -> None:
    server.add(Reply.json(status, {"error": {"message": "scripted", "type": "x"}}, headers))
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert (info.value.status, info.value.retryable, info.value.retry_after) == (
        status,
        retryable,
        retry_after,
    )
    assert len(server.requests) == 1  # the SDK did not retry on its own


def test_dropped_connection_mid_stream(server: WireServer, backend: OpenAIBackend) -> None:
    reply = sse.turn_reply([{"kind": "text", "text": "par"}, {"kind": "text", "text": "tial"}])
    reply.drop_after = 2
    server.add(reply)
    seen: list[Event] = []
    with pytest.raises(BackendError) as info:
        stream(backend, into=seen)
    assert info.value.retryable is True
    assert not isinstance(info.value.cause, BackendError) or info.value.cause is None


def test_malformed_sse_json_mid_stream(server: WireServer, backend: OpenAIBackend) -> None:
    server.add(
        Reply(
            chunks=[sse.sse(sse.chunk({"content": "ok"})), b"data: {not json\n\n"],
            content_type="text/event-stream",
        )
    )
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert "malformed" in info.value.message
    assert isinstance(info.value.cause, ValueError)


def test_stream_ending_without_finish_reason_is_an_error(server: WireServer, backend: OpenAIBackend) -> None:
    server.add(
        Reply(chunks=[sse.sse(sse.chunk({"content": "cut"})), sse.DONE], content_type="text/event-stream")
    )
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert info.value.retryable is True


def test_unreachable_endpoint_is_retryable() -> None:
    with WireServer() as gone:
        url = gone.url
    backend = OpenAIBackend(base_url=url + "/v1", api_key="k")
    try:
        with pytest.raises(BackendError) as info:
            stream(backend)
        assert info.value.retryable is True
    finally:
        backend.client.close()


# -- what is sent -------------------------------------------------------------------
def test_inference_settings_and_extras(server: WireServer, backend: OpenAIBackend) -> None:
    server.add(sse.turn_reply([{"kind": "text", "text": "ok"}]))
    inference = {
        "max_tokens": 256, "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"],
        "reasoning_effort": "low", "extra_body": {"top_k": 5},
        "additional_model_request_fields": {"ignored": "bedrock only"},
    }  # fmt: skip
    stream(backend, system="Be brief.", model="qwen3", inference=inference)
    body = server.requests[0].json()
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["stop"]) == (256, 0.2, 0.9, ["END"])
    assert body["reasoning_effort"] == "low"
    assert body["top_k"] == 5
    assert "additional_model_request_fields" not in body


def test_reasoning_model_quirks_are_data() -> None:
    request = as_wire_request(
        system=None,
        messages=HELLO,
        tools=[],
        model="gpt-5-mini",
        inference={"max_tokens": 9, "temperature": 1},
    )
    assert request["max_completion_tokens"] == 9
    assert "max_tokens" not in request
    assert "temperature" not in request


def test_unknown_inference_key_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="max_token"):
        as_wire_request(system=None, messages=HELLO, tools=[], model="m", inference={"max_token": 9})


def test_reasoning_and_signatures_are_not_sent(server: WireServer, backend: OpenAIBackend) -> None:
    server.add(sse.turn_reply([{"kind": "text", "text": "ok"}]))
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            backend="bedrock",
            parts=[
                Part.of_reasoning("secret thought", "SIG"),
                Part.of_reasoning(None, "cmVkYWN0ZWQ="),
                Part.of_text("answer"),
            ],
        ),
        Message.user("next"),
    ]
    stream(backend, history)
    raw = server.requests[0].body.decode()
    assert "secret thought" not in raw and "SIG" not in raw and "cmVkYWN0ZWQ=" not in raw
    assert server.requests[0].json()["messages"][1] == {"role": "assistant", "content": "answer"}


def test_media_parts(server: WireServer, backend: OpenAIBackend, tmp_path: Path) -> None:
    png = tmp_path / "chart.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4 fake")
    csv = tmp_path / "txs.csv"
    csv.write_text("hash,value\n0x1,5\n")
    server.add(sse.turn_reply([{"kind": "text", "text": "ok"}]))
    message = Message.user(
        "Look.",
        Part.of_media("image", str(png), "image/png"),
        Part.of_media("document", str(pdf), "application/pdf"),
        Part.of_media("document", str(csv), "text/csv"),
    )
    stream(backend, [message])
    content = server.requests[0].json()["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "Look."}
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()},
    }
    assert content[2]["type"] == "file"
    assert content[2]["file"]["filename"] == "report.pdf"
    assert (
        content[2]["file"]["file_data"]
        == "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 fake").decode()
    )
    assert content[3] == {
        "type": "text",
        "text": '<document name="txs.csv">\nhash,value\n0x1,5\n\n</document>',
    }


def test_unsupported_document_fails_before_sending(
    server: WireServer, backend: OpenAIBackend, tmp_path: Path
) -> None:
    docx = tmp_path / "memo.docx"
    docx.write_bytes(b"PK fake docx")
    message = Message.user(
        "Read.",
        Part.of_media(
            "document", str(docx), "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        ),
    )
    with pytest.raises(MediaError, match="docx"):
        stream(backend, [message])
    assert server.requests == []


def test_tool_specs(server: WireServer, backend: OpenAIBackend) -> None:
    server.add(sse.turn_reply([{"kind": "text", "text": "ok"}]))
    schema = {"type": "object", "properties": {"address": {"type": "string"}}}
    stream(backend, tools=[{"name": "lookup", "description": "Look up.", "parameters": schema}])
    assert server.requests[0].json()["tools"] == [
        {"type": "function", "function": {"name": "lookup", "description": "Look up.", "parameters": schema}}
    ]


def test_missing_api_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIBackend()


def test_tool_arguments_replay_the_same_bytes(server: WireServer, backend: OpenAIBackend) -> None:
    raw = '{ "address" :"0xabc" }'
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            backend="openai",
            parts=[Part.of_tool_use("c1", "lookup", {"address": "0xabc"}, raw)],
        ),
        Message(role="tool", parts=[Part.of_tool_result("c1", "lookup", {"ok": True})]),
    ]
    server.add(sse.turn_reply([{"kind": "text", "text": "ok"}]))
    stream(backend, history)
    call = server.requests[0].json()["messages"][1]["tool_calls"][0]
    assert call["function"]["arguments"] == raw
    assert json.loads(call["function"]["arguments"]) == {"address": "0xabc"}


def test_tool_calls_without_index(server: WireServer, backend: OpenAIBackend) -> None:
    """Some servers (older Ollama) send whole calls without ``index``."""
    calls = [
        {"id": "call_x", "type": "function", "function": {"name": "a", "arguments": '{"n": 1}'}},
        {"id": "call_y", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    server.add(
        Reply(
            chunks=[
                sse.sse(sse.chunk({"tool_calls": calls})),
                sse.sse(sse.chunk(finish="tool_calls")),
                sse.DONE,
            ],
            content_type="text/event-stream",
        )
    )
    events = stream(backend)
    assert [(e["id"], e["name"], e["input"]) for e in events if e["kind"] == "tool_use"] == [  # type: ignore[typeddict-item]
        ("call_x", "a", {"n": 1}),
        ("call_y", "b", {}),
    ]
