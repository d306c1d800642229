"""A transcript recorded on one provider continues on the other, and replays byte for byte on its own."""

from __future__ import annotations

import re
from typing import Any

from backend_conformance import REGISTRY, SPECS, USAGE, done
from harness import bedrock_harness, openai_harness

from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.agent.backends.openai import OpenAIBackend
from tahrix_lab.agent.history import build_messages
from tahrix_lab.agent.loop import run_agent
from tahrix_lab.agent.retry import RetryPolicy
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.transcript import Message

BAD_ARGS = {
    "kind": "tool_use",
    "id": "call_bad",
    "name": "lookup_address",
    "input": None,
    "raw": '{"address": 0x',
}


def assert_valid_converse(body: dict[str, Any]) -> None:
    """The Converse rules a real Bedrock enforces with a ValidationException."""
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        assert msg["content"], "no empty content"
        if i:
            assert msg["role"] != messages[i - 1]["role"], "roles alternate"
        results = {b["toolResult"]["toolUseId"] for b in msg["content"] if "toolResult" in b}
        assert results == pending, "every toolUse is answered in the next user message"
        pending = set()
        for block in msg["content"]:
            if "text" in block:
                assert block["text"].strip()
            if "toolUse" in block:
                assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", block["toolUse"]["toolUseId"])
                assert isinstance(block["toolUse"]["input"], dict)
                pending.add(block["toolUse"]["toolUseId"])
            if "reasoningContent" in block:
                rc = block["reasoningContent"]
                assert "redactedContent" in rc or rc["reasoningText"].get("signature")
            if "toolResult" in block:
                assert block["toolResult"]["content"]
    if any("toolUse" in b for m in messages for b in m["content"]):
        assert body["toolConfig"]["tools"]


def assert_valid_chat(body: dict[str, Any]) -> None:
    """The Chat Completions rules OpenAI enforces with a 400."""
    messages = body["messages"]
    expected: list[str] = []
    for msg in messages:
        assert set(msg) <= {"role", "content", "tool_calls", "tool_call_id"}
        if msg["role"] == "tool":
            assert msg["tool_call_id"] == expected.pop(0)
            continue
        assert expected == [], "tool messages follow their assistant message"
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            expected = [c["id"] for c in msg["tool_calls"]]
            for call in msg["tool_calls"]:
                assert isinstance(call["function"]["arguments"], str)


def run(
    store: TranscriptStore, session_id: str, backend: Any, model: str
) -> list[tuple[str, dict[str, Any]]]:
    events = list(
        run_agent(
            session_id, store=store, backend=backend, model=model, tools=SPECS, registry=REGISTRY,
            retry=RetryPolicy(sleep=lambda s: None),
        )
    )  # fmt: skip
    assert not [p for k, p in events if k == "error"], events
    return events


def test_bedrock_transcript_continues_on_openai() -> None:
    store = TranscriptStore(":memory:")
    session = store.create_session(system_prompt="Investigate.")
    store.append_message(session.id, Message.user("Who owns 0xabc?"))
    with bedrock_harness() as bedrock:
        backend = bedrock.make(
            [
                [reasoning("Use the tool."), reasoning("", "SIG-bedrock"), tool_call("lookup_address", {"address": "0xabc"}, id="tooluse_1"), done("tool_use", USAGE)],
                [text("An exchange."), done(usage=USAGE)],
            ]
        )  # fmt: skip
        run(store, session.id, backend, "anthropic.claude-test")
        assert_valid_converse(bedrock.sent()[1])
        assert (
            bedrock.sent()[1]["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]["signature"]
            == "SIG-bedrock"
        )
    store.append_message(session.id, Message.user("And 0xdef?"))
    with openai_harness() as openai:
        run(store, session.id, openai.make([[text("Also an exchange."), done(usage=USAGE)]]), "gpt-test")
        body = openai.sent()[0]
        assert_valid_chat(body)
        assert "SIG-bedrock" not in str(body) and "Use the tool." not in str(body)
        assert [m["role"] for m in body["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
        assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"address": "0xabc"}'
    assert store.load_messages(session.id)[-1].text == "Also an exchange."
    store.close()


def test_openai_transcript_continues_on_bedrock() -> None:
    store = TranscriptStore(":memory:")
    session = store.create_session()
    store.append_message(session.id, Message.user("Who owns 0xabc?"))
    with openai_harness() as openai:
        backend = openai.make(
            [
                [reasoning("Hmm."), BAD_ARGS, done("tool_use", USAGE)],
                [tool_call("lookup_address", {"address": "0xabc"}, id="call.two"), done("tool_use", USAGE)],
                [text("An exchange."), done(usage=USAGE)],
            ]
        )
        run(store, session.id, backend, "gpt-test")
        for body in openai.sent():
            assert_valid_chat(body)
    store.append_message(session.id, Message.user("Sure?"))
    with bedrock_harness() as bedrock:
        run(store, session.id, bedrock.make([[text("Yes."), done(usage=USAGE)]]), "anthropic.claude-test")
        body = bedrock.sent()[0]
        assert_valid_converse(body)
        assert "Hmm." not in str(body)
        uses = [b["toolUse"] for m in body["messages"] for b in m["content"] if "toolUse" in b]
        assert [(u["toolUseId"], u["input"]) for u in uses] == [
            ("call_bad", {}),
            ("call_two", {"address": "0xabc"}),
        ]
    store.close()


def _replay_matches(harness_factory: Any, model: str, turns: list[Any]) -> None:
    store = TranscriptStore(":memory:")
    session = store.create_session(system_prompt="Investigate.")
    store.append_message(session.id, Message.user("Who owns 0xabc?"))
    with harness_factory() as h:
        run(store, session.id, h.make(turns), model)
        sent = h.sent()
        stored = store.load_messages(session.id)
        # replay the second call from the stored transcript: same request, same bytes
        replay = h.make([[text("again"), done(usage=USAGE)]])
        list(
            replay.stream(
                system="Investigate.",
                messages=build_messages(stored[:3]),
                tools=SPECS,
                model=model,
                inference=None,
            )
        )
        assert h.sent()[-1] == sent[1]
        raw = h.raw()
        assert raw[-1] == raw[1]
        if isinstance(replay, OpenAIBackend):
            replay.client.close()
    store.close()


def test_replay_to_bedrock_sends_the_same_bytes() -> None:
    _replay_matches(
        bedrock_harness, "anthropic.claude-test",
        [
            [reasoning("Think."), reasoning("", "SIG"), tool_call("lookup_address", {"address": "0xabc"}, id="tooluse_9"), done("tool_use", USAGE)],
            [text("Done."), done(usage=USAGE)],
        ],
    )  # fmt: skip


def test_replay_to_openai_sends_the_same_bytes() -> None:
    spaced = {
        "kind": "tool_use",
        "id": "call_9",
        "name": "lookup_address",
        "input": {"address": "0xabc"},
        "raw": '{ "address":"0xabc" }',
    }
    _replay_matches(
        openai_harness, "gpt-test", [[spaced, done("tool_use", USAGE)], [text("Done."), done(usage=USAGE)]]
    )
