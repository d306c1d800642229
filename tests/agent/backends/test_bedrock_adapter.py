"""The Bedrock adapter through real boto3 against a loopback AWS event-stream server.

Recorded vectors (``tests/vectors/bedrock``) are replayed byte for byte
(CRCs and all); what the adapter must make of them is pinned here."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import bedrock_client
from wire import cassettes, eventstream
from wire.server import Reply, WireServer

from tahrix_lab.agent.backends.base import Event
from tahrix_lab.agent.backends.bedrock import BedrockBackend, as_wire_request, map_stop_reason, map_usage
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.retry import RetryPolicy
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part

HELLO = [Message.user("Hello")]
THINKING = "bedrock/pydantic-ai__test_bedrock_model_thinking_part_stream.yaml"
REDACTED = "bedrock/pydantic-ai__test_bedrock_model_thinking_part_redacted_stream.yaml"
SIGNATURE_START = (
    "Eu0CCkgIBxABGAIqQJDccbDQkr81n7QjZ0Fi43umSvw0YvnGkMPEpaGAa2btYHyWw06KhwckvsnKzpKcxiRJT35meoG4"
)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as s:
        yield s


@pytest.fixture
def backend(server: WireServer) -> Iterator[BedrockBackend]:
    client = bedrock_client(server.url)
    yield BedrockBackend(client=client)
    client.close()


# Every test reads the backend both ways: ``stream`` (boto3) and ``astream`` (the same read on a
# thread of its own, as the job service reads it on an event loop). Same events, same errors.
READ = "stream"


@pytest.fixture(params=["stream", "astream"], autouse=True)
def reader(request: pytest.FixtureRequest) -> str:
    global READ
    READ = request.param
    return READ


def stream(backend: BedrockBackend, messages: list[Message] | None = None, **kw: Any) -> list[Event]:
    args: dict[str, Any] = {
        "system": None,
        "messages": messages or HELLO,
        "tools": [],
        "model": "anthropic.claude-test",
        "inference": None,
    }
    args.update(kw)
    if READ == "stream":
        return list(backend.stream(**args))

    async def collect() -> list[Event]:
        return [event async for event in backend.astream(**args)]

    return asyncio.run(collect())


def text_of(events: list[Event], kind: str = "text") -> str:
    return "".join(e["text"] for e in events if e["kind"] == kind)  # type: ignore[typeddict-item]


def replay(server: WireServer, name: str, piece: int | None = 97) -> list[cassettes.Interaction]:
    interactions = cassettes.load(name, piece=piece)
    server.add(*[i.reply for i in interactions])
    return interactions


def wire_deltas(raw: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(p) for h, p in eventstream.decode_frames(raw) if h[":event-type"] == "contentBlockDelta"
    ]


# -- recorded vectors -------------------------------------------------------------
def test_thinking_vector_and_signature_round_trip(server: WireServer, backend: BedrockBackend) -> None:
    recorded = replay(server, THINKING)
    server.add(eventstream.turn_reply([{"kind": "text", "text": "Again."}]))
    store = TranscriptStore(":memory:")
    session = store.create_session()
    store.append_message(session.id, Message.user("Hello"))
    events = list(
        run_agent(
            session,
            store=store,
            backend=backend,
            model="us.anthropic.claude-sonnet-4-20250514-v1:0",
            tools=[],
            retry=RetryPolicy(sleep=lambda s: None),
        )
    )
    thought = "".join(p["text"] for k, p in events if k == "reasoning")
    assert thought == (
        'The user has greeted me with a simple "Hello". I should respond in a friendly and welcoming manner. '
        "This is a straightforward greeting, so I'll respond warmly and ask how I can help them today."
    )
    assert (
        "".join(p["text"] for k, p in events if k == "token")
        == "Hello! It's nice to meet you. How can I help you today?"
    )
    usage = next(p for k, p in events if k == "usage")
    assert usage["usage"] == {
        "input_tokens": 36,
        "output_tokens": 73,
        "cache_read_tokens": None,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
    }
    answer = store.load_messages(session.id)[-1]
    signature = answer.parts[0].signature
    assert signature is not None and signature.startswith(SIGNATURE_START)
    (recorded_sig,) = [
        d["delta"]["reasoningContent"]["signature"]
        for d in wire_deltas(recorded[0].raw_body)
        if "signature" in d["delta"].get("reasoningContent", {})
    ]
    assert signature == recorded_sig

    store.append_message(session.id, Message.user("And again?"))
    list(
        run_agent(
            session,
            store=store,
            backend=backend,
            model="us.anthropic.claude-sonnet-4-20250514-v1:0",
            tools=[],
        )
    )
    sent = server.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0] == {
        "reasoningContent": {"reasoningText": {"text": thought, "signature": recorded_sig}}
    }
    assert sent[1]["content"][1] == {"text": "Hello! It's nice to meet you. How can I help you today?"}
    store.close()


def test_redacted_reasoning_round_trips_exactly(server: WireServer, backend: BedrockBackend) -> None:
    recorded = replay(server, REDACTED)
    events = stream(backend)
    redacted = [e["redacted"] for e in events if "redacted" in e]  # type: ignore[typeddict-item]
    assert len(redacted) == 2
    on_wire = [
        d["delta"]["reasoningContent"]["redactedContent"]
        for d in wire_deltas(recorded[0].raw_body)
        if "redactedContent" in d["delta"].get("reasoningContent", {})
    ]
    assert [base64.b64decode(r) for r in redacted] == [base64.b64decode(w) for w in on_wire]
    assert text_of(events).startswith("I notice you've sent what appears to be some kind of command")
    assert events[-1]["usage"]["output_tokens"] == 253  # type: ignore[index,typeddict-item]

    history = [
        HELLO[0],
        Message(
            role="assistant",
            backend="bedrock",
            parts=[*(Part.of_reasoning(None, r) for r in redacted), Part.of_text("Hi.")],
        ),
        Message.user("More?"),
    ]
    server.add(eventstream.turn_reply([{"kind": "text", "text": "ok"}]))
    stream(backend, history)
    content = server.requests[1].json()["messages"][1]["content"]
    assert [c["reasoningContent"]["redactedContent"] for c in content[:2]] == on_wire


def test_fragmented_tool_input_vector(server: WireServer, backend: BedrockBackend) -> None:
    recorded = replay(
        server, "bedrock/openinference__TestConverseStream.test_invoke_tool_message.yaml", piece=31
    )
    spec = recorded[0].request["toolConfig"]["tools"][0]["toolSpec"]
    tools = [
        {"name": spec["name"], "description": spec["description"], "parameters": spec["inputSchema"]["json"]}
    ]
    events = stream(backend, [Message.user("What is the most popular song on WZPZ?")], tools=tools)
    assert events == [
        {"kind": "tool_use", "id": "tooluse_p0X002uYQ9y_0fFkBsyYRg", "name": "top_song", "input": {"sign": "WZPZ"}, "raw": '{"sign": "WZPZ"}'},
        {"kind": "done", "stop_reason": "tool_use", "raw_stop_reason": "tool_use", "latency_ms": events[-1]["latency_ms"],  # type: ignore[typeddict-item]
         "usage": {"input_tokens": 353, "output_tokens": 38, "cache_read_tokens": None, "cache_write_tokens": None, "reasoning_tokens": None}},
    ]  # fmt: skip
    sent = server.requests[0].json()
    assert sent["messages"] == recorded[0].request["messages"]
    assert sent["toolConfig"] == recorded[0].request["toolConfig"]


def test_nova_text_then_tool_and_the_follow_up_request(server: WireServer, backend: BedrockBackend) -> None:
    recorded = replay(server, "bedrock/pydantic-ai__test_bedrock_model_iter_stream.yaml")
    events = stream(
        backend,
        [Message.user("What is the temperature of the capital of France?")],
        model="us.amazon.nova-micro-v1:0",
    )
    assert text_of(events).startswith("<thinking> To find the temperature of the capital of France")
    use = next(e for e in events if e["kind"] == "tool_use")
    assert (use["id"], use["name"], use["input"]) == (
        "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
        "get_temperature",
        {"city": "Paris"},
    )  # type: ignore[typeddict-item]
    assert events[-1]["usage"]["input_tokens"] == 471  # type: ignore[index,typeddict-item]
    history = [
        Message.user("What is the temperature of the capital of France?"),
        Message(
            role="assistant",
            backend="bedrock",
            parts=[
                Part.of_text(text_of(events)),
                Part.of_tool_use(use["id"], use["name"], use["input"], use["raw"]),
            ],
        ),  # type: ignore[typeddict-item]
        Message(
            role="tool", parts=[Part.of_tool_result(use["id"], "get_temperature", {"temperature": "30°C"})]
        ),  # type: ignore[typeddict-item]
    ]
    stream(backend, history, model="us.amazon.nova-micro-v1:0")
    sent = server.requests[1].json()["messages"]
    assert sent[1] == recorded[1].request["messages"][1]  # the assistant turn, as the real client sent it
    assert sent[2] == {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
                    "content": [{"json": {"temperature": "30°C"}}],
                }
            },
        ],  # Nova caches, but this prompt is far below its 1,000-token minimum: no cache point
    }


def test_invalid_model_vector_is_not_retryable(server: WireServer, backend: BedrockBackend) -> None:
    replay(server, "bedrock/pydantic-ai__test_bedrock_streaming_error.yaml")
    with pytest.raises(BackendError) as info:
        stream(backend, model="us.does-not-exist-model-v1:0")
    assert (info.value.status, info.value.retryable) == (400, False)
    assert "model identifier is invalid" in info.value.message


def test_cache_usage_vector_is_normalised() -> None:
    data = cassettes.load("bedrock/pydantic-ai__test_bedrock_cache_write_and_read.yaml")
    write, read = (json.loads(i.raw_body)["usage"] for i in data)
    assert map_usage(write) == {
        "input_tokens": 1324,
        "output_tokens": write["outputTokens"],
        "cache_read_tokens": 0,
        "cache_write_tokens": 1322,
        "reasoning_tokens": None,
    }
    assert map_usage(read) == {
        "input_tokens": 1324,
        "output_tokens": read["outputTokens"],
        "cache_read_tokens": 1322,
        "cache_write_tokens": 0,
        "reasoning_tokens": None,
    }


def test_cache_usage_over_the_wire(server: WireServer, backend: BedrockBackend) -> None:
    usage = {
        "input_tokens": 1500,
        "output_tokens": 9,
        "cache_read_tokens": 1200,
        "cache_write_tokens": 280,
        "reasoning_tokens": None,
    }
    server.add(
        eventstream.turn_reply(
            [{"kind": "text", "text": "ok"}, {"kind": "done", "stop_reason": "end_turn", "usage": usage}]
        )
    )
    events = stream(backend)
    assert events[-1]["usage"] == usage  # type: ignore[typeddict-item]
    assert events[-1]["latency_ms"] == 42.0  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    ("raw", "stop"),
    [("end_turn", "end_turn"), ("tool_use", "tool_use"), ("max_tokens", "max_tokens"), ("stop_sequence", "stop_sequence"),
     ("guardrail_intervened", "content_filter"), ("content_filtered", "content_filter"), ("model_context_window_exceeded", "other")],
)  # fmt: skip
def test_stop_reasons_over_the_wire(server: WireServer, backend: BedrockBackend, raw: str, stop: str) -> None:
    frames = [
        eventstream.event("messageStart", {"role": "assistant"}),
        eventstream.event("messageStop", {"stopReason": raw}),
    ]
    server.add(Reply(chunks=frames, content_type=eventstream.CONTENT_TYPE))
    assert stream(backend)[-1] == {"kind": "done", "stop_reason": stop, "raw_stop_reason": raw, "usage": None}
    assert map_stop_reason(raw) == stop


# -- failures -----------------------------------------------------------------------
def test_throttling_before_the_stream_honours_retry_after(
    server: WireServer, backend: BedrockBackend
) -> None:
    server.add(
        Reply.json(
            429,
            {"message": "Too many requests"},
            {"x-amzn-errortype": "ThrottlingException", "retry-after": "4"},
        )
    )
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert (info.value.status, info.value.retryable, info.value.retry_after) == (429, True, 4.0)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("exception", "status", "retryable"),
    [("throttlingException", 429, True), ("modelStreamErrorException", 424, True), ("internalServerException", 500, True),
     ("validationException", 400, False)],
)  # fmt: skip
def test_exception_event_mid_stream(
    server: WireServer, backend: BedrockBackend, exception: str, status: int, retryable: bool
) -> None:
    frames = [
        *eventstream.turn_frames([{"kind": "text", "text": "par"}])[:2],
        eventstream.exception(exception, "boom"),
    ]
    server.add(Reply(chunks=frames, content_type=eventstream.CONTENT_TYPE))
    seen: list[Event] = []
    with pytest.raises(BackendError) as info:
        seen.extend(backend.stream(system=None, messages=HELLO, tools=[], model="m", inference=None))
    assert (info.value.status, info.value.retryable) == (status, retryable)
    assert "boom" in info.value.message


def test_corrupt_frame_mid_stream(server: WireServer, backend: BedrockBackend) -> None:
    good = eventstream.turn_frames([{"kind": "text", "text": "par"}])
    bad = bytearray(good[1])
    bad[-1] ^= 0xFF  # break the message CRC
    server.add(Reply(chunks=[good[0], bytes(bad)], content_type=eventstream.CONTENT_TYPE))
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert info.value.retryable is True
    assert "corrupt" in info.value.message


def test_dropped_connection_mid_stream(server: WireServer, backend: BedrockBackend) -> None:
    reply = eventstream.turn_reply([{"kind": "text", "text": "par"}, {"kind": "text", "text": "tial"}])
    reply.drop_after = 2
    server.add(reply)
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert info.value.retryable is True


def test_truncated_frame_mid_stream(server: WireServer, backend: BedrockBackend) -> None:
    frames = eventstream.turn_frames([{"kind": "text", "text": "partial"}])
    server.add(Reply(chunks=[frames[0], frames[1][:10]], content_type=eventstream.CONTENT_TYPE))
    with pytest.raises(BackendError) as info:
        stream(backend)
    assert info.value.retryable is True
    assert struct.calcsize(">I") == 4


def test_unreachable_endpoint_is_retryable() -> None:
    with WireServer() as gone:
        url = gone.url
    client = bedrock_client(url)
    try:
        with pytest.raises(BackendError) as info:
            stream(BedrockBackend(client=client))
        assert info.value.retryable is True
    finally:
        client.close()


# -- what is sent -------------------------------------------------------------------
def test_alternation_tool_results_and_error_status(server: WireServer, backend: BedrockBackend) -> None:
    history = [
        Message.user("Trace 0xabc."),
        Message(role="assistant", backend="bedrock", parts=[
            Part.of_text("Tracing."),
            Part.of_tool_use("t1", "trace", {"address": "0xabc"}),
            Part.of_tool_use("call.2/x", "label", {"address": "0xabc"}),
        ]),
        Message(role="tool", parts=[
            Part.of_tool_result("t1", "trace", {"hops": 2}),
            Part.of_tool_result("call.2/x", "label", {"error": {"kind": "timeout", "message": "too slow"}}, "error"),
        ]),
        Message.user("Also check the bridge."),
    ]  # fmt: skip
    server.add(eventstream.turn_reply([{"kind": "text", "text": "ok"}]))
    spec = {"name": "trace", "description": "Trace funds.", "parameters": {"type": "object"}}
    stream(backend, history, system="Be careful.", tools=[spec])
    body = server.requests[0].json()
    assert body["system"] == [{"text": "Be careful."}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][2]["toolUse"]["toolUseId"] == "call_2_x"
    assert body["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "t1", "content": [{"json": {"hops": 2}}]}},
        {
            "toolResult": {
                "toolUseId": "call_2_x",
                "status": "error",
                "content": [{"json": {"error": {"kind": "timeout", "message": "too slow"}}}],
            }
        },
        {"text": "Also check the bridge."},
    ]
    assert body["toolConfig"]["tools"] == [
        {
            "toolSpec": {
                "name": "trace",
                "description": "Trace funds.",
                "inputSchema": {"json": {"type": "object"}},
            }
        },
        {
            "toolSpec": {
                "name": "label",
                "description": "No longer available.",
                "inputSchema": {"json": {"type": "object"}},
            }
        },
    ]


def test_inference_config_and_additional_fields(server: WireServer, backend: BedrockBackend) -> None:
    server.add(eventstream.turn_reply([{"kind": "text", "text": "ok"}]))
    inference = {
        "max_tokens": 2048, "temperature": 1.0, "top_p": 0.9, "stop_sequences": ["END"],
        "additional_model_request_fields": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        "reasoning_effort": "ignored: openai only",
    }  # fmt: skip
    stream(backend, inference=inference)
    body = server.requests[0].json()
    assert body["inferenceConfig"] == {
        "maxTokens": 2048,
        "temperature": 1.0,
        "topP": 0.9,
        "stopSequences": ["END"],
    }
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert "reasoning_effort" not in json.dumps(body)


def test_reasoning_from_another_family_is_dropped(server: WireServer, backend: BedrockBackend) -> None:
    history = [
        Message.user("q"),
        Message(
            role="assistant",
            backend="openai",
            parts=[Part.of_reasoning("their thought", "OPAQUE"), Part.of_text("answer")],
        ),
        Message.user("next"),
    ]
    server.add(eventstream.turn_reply([{"kind": "text", "text": "ok"}]))
    stream(backend, history)
    body = server.requests[0].json()
    assert body["messages"][1] == {"role": "assistant", "content": [{"text": "answer"}]}


def test_text_result_models_get_text_and_no_status() -> None:
    history = [
        Message.user("q"),
        Message(role="assistant", backend="bedrock", parts=[Part.of_tool_use("t1", "f", {})]),
        Message(role="tool", parts=[Part.of_tool_result("t1", "f", {"error": {"kind": "x"}}, "error")]),
    ]
    request = as_wire_request(
        system=None, messages=history, tools=[], model="meta.llama3-70b-instruct-v1:0", inference=None
    )
    assert request["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "t1", "content": [{"text": '{"error": {"kind": "x"}}'}]}}
    ]


def test_media_blocks(server: WireServer, backend: BedrockBackend, tmp_path: Path) -> None:
    png = tmp_path / "flow chart.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    docx = tmp_path / "memo_v2.docx"
    docx.write_bytes(b"PK fake")
    message = Message.user(
        "Look.",
        Part.of_media("image", str(png), "image/png"),
        Part.of_media(
            "document", str(docx), "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        ),
    )
    server.add(eventstream.turn_reply([{"kind": "text", "text": "ok"}]))
    stream(backend, [message])
    content = server.requests[0].json()["messages"][0]["content"]
    assert content == [
        {"text": "Look."},
        {"image": {"format": "png", "source": {"bytes": base64.b64encode(png.read_bytes()).decode()}}},
        {
            "document": {
                "format": "docx",
                "name": "memo-v2",
                "source": {"bytes": base64.b64encode(b"PK fake").decode()},
            }
        },
    ]


def test_missing_media_fails_before_sending(
    server: WireServer, backend: BedrockBackend, tmp_path: Path
) -> None:
    message = Message.user("Look.", Part.of_media("image", str(tmp_path / "gone.png"), "image/png"))
    with pytest.raises(BackendError, match="does not exist"):
        stream(backend, [message])
    assert server.requests == []


# -- client set-up ------------------------------------------------------------------
def test_own_client_from_environment_with_retries_off(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    backend = BedrockBackend(region="eu-west-1", endpoint_url=server.url)
    server.add(
        Reply.json(503, {"message": "unavailable"}, {"x-amzn-errortype": "ServiceUnavailableException"})
    )
    try:
        with pytest.raises(BackendError) as info:
            stream(backend)
        assert (info.value.status, info.value.retryable) == (503, True)
        assert len(server.requests) == 1  # botocore did not retry: the loop owns retries
        assert server.requests[0].path == "/model/anthropic.claude-test/converse-stream"
    finally:
        backend.client.close()


def test_missing_region_and_credentials_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ConfigurationError, match="AWS_REGION"):
        BedrockBackend()
    with pytest.raises(ConfigurationError, match="AWS_ACCESS_KEY_ID"):
        BedrockBackend(region="us-east-1")
