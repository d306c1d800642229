"""The assertions every backend must pass, written once, run through ``run_agent``.

Each takes a ``Harness`` (fake, OpenAI over SSE, Bedrock over event-stream)
and a store; what a backend must make of a scripted turn is pinned here."""

from __future__ import annotations

import json
from typing import Any

from harness import Drop, Fail, Harness

from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.retry import RetryPolicy
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import Tool, ToolRegistry
from tahrix_lab.agent.transcript import Message

USAGE = {
    "input_tokens": 120,
    "output_tokens": 7,
    "cache_read_tokens": 100,
    "cache_write_tokens": None,
    "reasoning_tokens": None,
}

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"address": {"type": "string"}},
    "required": ["address"],
    "additionalProperties": False,
}


def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"address": args["address"], "label": "exchange deposit"}


REGISTRY = ToolRegistry([Tool("lookup_address", "Look an address up.", LOOKUP_SCHEMA, lookup)])
SPECS = REGISTRY.catalog_for("chat")


def done(
    stop: str = "end_turn", usage: dict[str, Any] | None = None, raw: str | None = None
) -> dict[str, Any]:
    return {"kind": "done", "stop_reason": stop, "raw_stop_reason": raw or stop, "usage": usage}


def run(
    harness: Harness,
    store: TranscriptStore,
    turns: list[Any],
    question: str = "Who owns 0xabc?",
    sleeps: list[float] | None = None,
) -> tuple[list[tuple[str, dict[str, Any]]], list[Message]]:
    backend = harness.make(turns)
    session = store.create_session(system_prompt="You are a careful analyst.")
    store.append_message(session.id, Message.user(question))
    record = sleeps if sleeps is not None else []
    events = list(
        run_agent(
            session,
            store=store,
            backend=backend,
            model="anthropic.claude-test" if harness.family == "bedrock" else "test-model",
            tools=SPECS,
            registry=REGISTRY,
            retry=RetryPolicy(attempts=3, sleep=record.append),
        )
    )
    return events, store.load_messages(session.id)


def kinds(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [k for k, _ in events]


def joined(events: list[tuple[str, dict[str, Any]]], kind: str) -> str:
    return "".join(p.get("text", "") for k, p in events if k == kind)


def assert_text_stream(harness: Harness, store: TranscriptStore) -> None:
    events, messages = run(
        harness, store, [[text("The address "), text("is an exchange."), done(usage=USAGE)]]
    )
    assert joined(events, "token") == "The address is an exchange."
    assert kinds(events)[-2:] == ["usage", "done"]
    usage = next(p for k, p in events if k == "usage")
    assert usage["usage"] == USAGE
    assert usage["stop_reason"] == "end_turn"
    answer = messages[-1]
    assert answer.role == "assistant"
    assert answer.backend == harness.family
    assert [p.type for p in answer.parts] == ["text"]
    assert answer.text == "The address is an exchange."
    assert answer.usage is not None and answer.usage.to_dict() == USAGE


def assert_no_usage_is_unknown(harness: Harness, store: TranscriptStore) -> None:
    events, messages = run(harness, store, [[text("hi"), done(usage=None)]])
    assert messages[-1].usage is not None
    assert messages[-1].usage.to_dict() == dict.fromkeys(USAGE)
    assert next(p for k, p in events if k == "usage")["cost_usd"] is None


def assert_stop_reason(harness: Harness, store: TranscriptStore, stop: str) -> None:
    events, messages = run(harness, store, [[text("cut"), done(stop, usage=USAGE)]])
    assert messages[-1].stop_reason == stop
    assert next(p for k, p in events if k == "done")["stop_reason"] == stop


def assert_tool_round_trip(harness: Harness, store: TranscriptStore) -> list[Any]:
    """Returns what the backend was sent on its second call (wire or neutral)."""
    turns = [
        [
            text("Let me check."),
            tool_call("lookup_address", {"address": "0xabc"}, id="call_1"),
            done("tool_use", USAGE),
        ],
        [text("It is an exchange deposit address."), done(usage=USAGE)],
    ]
    events, messages = run(harness, store, turns)
    assert kinds(events) == [
        "token", "tool_use", "usage", "tool_start", "tool_result", "follow_up", "token", "usage", "done",
    ]  # fmt: skip
    tool_use = next(p for k, p in events if k == "tool_use")
    assert (tool_use["id"], tool_use["name"], tool_use["input"]) == (
        "call_1",
        "lookup_address",
        {"address": "0xabc"},
    )
    result = next(p for k, p in events if k == "tool_result")
    assert result["status"] == "ok"
    assert result["result"] == {"address": "0xabc", "label": "exchange deposit"}
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].stop_reason == "tool_use"
    assert messages[3].text == "It is an exchange deposit address."
    sent = harness.sent()
    assert len(sent) == 2
    return sent


def assert_reasoning(harness: Harness, store: TranscriptStore) -> None:
    turns = [
        [
            reasoning("Look it up", None),
            reasoning(" first.", None),
            reasoning("", "sig-123"),
            text("Done."),
            done(usage=USAGE),
        ]
    ]
    events, messages = run(harness, store, turns)
    assert joined(events, "reasoning") == "Look it up first."
    parts = messages[-1].parts
    assert [p.type for p in parts] == ["reasoning", "text"]
    assert parts[0].text == "Look it up first."
    assert parts[0].signature == ("sig-123" if harness.signatures else None)


def assert_invalid_tool_arguments(harness: Harness, store: TranscriptStore) -> None:
    bad = {
        "kind": "tool_use",
        "id": "call_9",
        "name": "lookup_address",
        "input": None,
        "raw": '{"address": 0xabc',
    }
    turns = [[bad, done("tool_use", USAGE)], [text("Sorry, retrying is needed."), done(usage=USAGE)]]
    events, messages = run(harness, store, turns)
    use = messages[1].tool_uses()[0]
    assert use.tool_input is None
    assert use.text == '{"address": 0xabc'
    result = next(p for k, p in events if k == "tool_result")
    assert result["status"] == "error"
    assert "error" in result["result"]
    assert messages[-1].text == "Sorry, retrying is needed."


def assert_retries_before_first_event(harness: Harness, store: TranscriptStore) -> None:
    sleeps: list[float] = []
    turns = [Fail(429, retry_after=7), Fail(503), [text("Recovered."), done(usage=USAGE)]]
    events, _messages = run(harness, store, turns, sleeps=sleeps)
    assert joined(events, "token") == "Recovered."
    assert "error" not in kinds(events)
    assert len(sleeps) == 2
    assert sleeps[0] == 7.0  # the provider's Retry-After, honoured
    assert len(harness.sent()) == 3


def assert_no_retry_after_first_event(harness: Harness, store: TranscriptStore) -> None:
    sleeps: list[float] = []
    turns = [[text("Partial "), text("answer"), Drop()], [text("never sent"), done(usage=USAGE)]]
    events, messages = run(harness, store, turns, sleeps=sleeps)
    assert joined(events, "token") == "Partial answer"
    error = next(p for k, p in events if k == "error")
    assert error["kind"] == "backend"
    assert error["retryable"] is True
    assert sleeps == []
    assert len(harness.sent()) == 1
    assert messages[-1].stop_reason == "error"
    assert messages[-1].text == "Partial answer"


def assert_not_retryable(harness: Harness, store: TranscriptStore) -> None:
    sleeps: list[float] = []
    events, messages = run(harness, store, [Fail(400), [text("never")]], sleeps=sleeps)
    error = next(p for k, p in events if k == "error")
    assert error["retryable"] is False
    assert error["status"] == 400
    assert sleeps == []
    assert len(harness.sent()) == 1
    assert [m.role for m in messages] == ["user"]


def tool_result_sent(harness: Harness, request: Any) -> tuple[str, dict[str, Any]]:
    """(tool_use_id, result) of the tool result in a request, in the family's own form."""
    if harness.family == "openai":
        (msg,) = [m for m in request["messages"] if m["role"] == "tool"]
        return msg["tool_call_id"], json.loads(msg["content"])
    if harness.family == "bedrock":
        user = request["messages"][-1]
        assert user["role"] == "user"
        block = user["content"][0]["toolResult"]
        return block["toolUseId"], block["content"][0]["json"]
    tool = request.messages[-1]
    assert tool.role == "tool"
    part = tool.parts[0]
    return part.tool_use_id, part.tool_result


def assert_redacted_reasoning(harness: Harness, store: TranscriptStore) -> None:
    """Redacted reasoning is kept (base64) by families that have it, and a
    follow-up call on the same family goes through."""
    secret = "c2VhbGVkIHRob3VnaHQ="  # base64 of b"sealed thought"
    turns = [
        [{"kind": "reasoning", "text": "", "redacted": secret}, text("Hi."), done(usage=USAGE)],
        [text("Again."), done(usage=USAGE)],
    ]
    backend = harness.make(turns)
    session = store.create_session()
    for question in ("First?", "Second?"):
        store.append_message(session.id, Message.user(question))
        events = list(
            run_agent(session, store=store, backend=backend, model="anthropic.claude-test", tools=[])
        )
        assert "error" not in kinds(events)
    first = store.load_messages(session.id)[1]
    if harness.signatures:
        assert first.parts[0].is_redacted_reasoning
        assert first.parts[0].signature == secret
    assert first.parts[-1].text == "Hi."
    if harness.family == "bedrock":
        assistant = harness.sent()[1]["messages"][1]
        assert assistant["content"][0] == {"reasoningContent": {"redactedContent": secret}}
