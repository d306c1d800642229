from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from tahrix_lab.agent import (
    BackendError,
    Budget,
    FakeBackend,
    Message,
    Part,
    RetryPolicy,
    ToolRegistry,
    TranscriptStore,
    ask,
    build_messages,
)
from tahrix_lab.agent.backends.base import ToolSpec
from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
from tahrix_lab.agent.history import INTERRUPTED

NO_SLEEP = RetryPolicy(attempts=3, sleep=lambda s: None)


@pytest.fixture
def reg() -> ToolRegistry:
    r = ToolRegistry()

    @r.register(
        parameters={"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]},
        purposes=("chat",),
    )
    def lookup_address(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Look an address up."""
        return {"address": args["address"], "label": "ExchangeA", "_effects": [{"type": "address_seen"}]}

    @r.register(purposes=("chat",))
    def explode(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    return r


@pytest.fixture
def store() -> TranscriptStore:
    return TranscriptStore(":memory:")


def run(
    store: TranscriptStore,
    backend: FakeBackend,
    reg: ToolRegistry,
    question: str = "Who is 0xabc?",
    **kw: Any,
) -> list[tuple[str, dict[str, Any]]]:
    session = kw.pop("session", None) or store.create_session(user="ana", system_prompt="Be precise.")
    return list(
        ask(store, session, question, backend=backend, model="fake-model", registry=reg, retry=NO_SLEEP, **kw)
    )


def kinds(events: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    return [e for e, _ in events]


def test_event_order_text_tool_result_follow_up_text(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend(
        [
            [
                reasoning("Check the label."),
                text("Let me look."),
                tool_call("lookup_address", {"address": "0xabc"}, id="t1"),
            ],
            [text("It is "), text("ExchangeA.")],
        ]
    )
    events = run(store, backend, reg)
    assert kinds(events) == [
        "reasoning", "token", "tool_use", "usage", "tool_start", "tool_result", "effects",
        "follow_up", "token", "token", "usage", "done",
    ]  # fmt: skip
    assert events[4][1] == {"id": events[2][1]["id"], "name": events[2][1]["name"]}
    assert events[5][1]["result"] == {"address": "0xabc", "label": "ExchangeA"}
    assert events[6][1] == {"effects": [{"type": "address_seen"}]}
    assert events[7][1]["text"] == "Synthesizing results..."
    assert events[-1][1]["stop_reason"] == "end_turn"

    session_id = events[-1][1]["session_id"]
    messages = store.load_messages(session_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    first = messages[1]
    assert [p.type for p in first.parts] == ["reasoning", "text", "tool_use"]
    assert (first.backend, first.model_id, first.stop_reason) == ("fake", "fake-model", "tool_use")
    assert first.tools_offered == ["lookup_address", "explode"]
    assert first.usage is not None and first.usage.input_tokens
    assert first.latency_ms is not None and first.ttft_ms is not None and first.ttft_ms <= first.latency_ms
    assert messages[2].parts[0].tool_use_id == "t1" and messages[2].parts[0].tool_status == "ok"
    assert messages[3].text == "It is ExchangeA."


def test_backend_is_sent_the_neutral_history_with_results_paired(
    store: TranscriptStore, reg: ToolRegistry
) -> None:
    backend = FakeBackend([[tool_call("lookup_address", {"address": "0xabc"}, id="t1")], [text("Done.")]])
    run(store, backend, reg, follow_up_instruction="Answer in one line.")
    first, second = backend.requests
    assert first.system == "Be precise."
    assert [m.role for m in first.messages] == ["user"]
    assert [t["name"] for t in first.tools] == ["lookup_address", "explode"]
    assert second.system == "Be precise.\n\nAnswer in one line."
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[2].parts[0].tool_use_id == "t1"


def test_tool_failure_is_a_result_not_a_crash(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend([[tool_call("explode", {}), tool_call("no_such_tool", {})], [text("Sorry.")]])
    events = run(store, backend, reg)
    results = [p for e, p in events if e == "tool_result"]
    assert [r["status"] for r in results] == ["error", "error"]
    assert results[0]["result"]["error"]["message"] == "disk on fire"
    assert results[1]["result"]["error"]["type"] == "unknown_tool"
    assert kinds(events)[-1] == "done"


def test_cycle_ceiling_ends_calmly_and_keeps_history_valid(store: TranscriptStore, reg: ToolRegistry) -> None:
    loop_forever = [[tool_call("lookup_address", {"address": f"0x{i}"})] for i in range(10)]
    backend = FakeBackend(loop_forever)
    events = run(store, backend, reg, max_tool_cycles=2)
    assert kinds(events).count("tool_result") == 2
    assert events[-1][0] == "error"
    assert events[-1][1]["kind"] == "cycle_limit"
    assert "2 rounds" in events[-1][1]["message"]
    assert len(backend.requests) == 3
    messages = store.load_messages(store.list_sessions()[0].id)
    assert messages[-1].role == "tool"
    assert messages[-1].parts[0].tool_result["error"]["type"] == "not_run"  # type: ignore[index]


def test_error_before_first_event_is_calm_and_persists_nothing(
    store: TranscriptStore, reg: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    boom = BackendError("botocore ValidationException: model identifier is invalid", status=400)
    backend = FakeBackend([[boom]])
    with caplog.at_level(logging.ERROR):
        events = run(store, backend, reg)
    assert kinds(events) == ["error"]
    payload = events[0][1]
    assert payload["kind"] == "backend" and payload["status"] == 400
    assert "botocore" not in payload["message"] and "could not accept" in payload["message"]
    assert "model identifier is invalid" in caplog.text  # the raw detail is for the operator
    messages = store.load_messages(store.list_sessions()[0].id)
    assert [m.role for m in messages] == ["user"]


def test_failure_after_text_persists_the_partial_answer(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend([[text("The funds went to "), BackendError("connection reset", retryable=True)]])
    events = run(store, backend, reg)
    assert kinds(events) == ["token", "error"]
    assert len(backend.requests) == 1  # never retried after the first event
    messages = store.load_messages(store.list_sessions()[0].id)
    partial = messages[-1]
    assert (partial.role, partial.stop_reason, partial.text) == ("assistant", "error", "The funds went to ")
    assert partial.raw_stop_reason is not None and "connection reset" in partial.raw_stop_reason


def test_retries_before_first_event_with_backoff_then_succeeds(
    store: TranscriptStore, reg: ToolRegistry
) -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(attempts=3, sleep=sleeps.append)
    backend = FakeBackend(
        [
            [BackendError("throttled", status=429, retryable=True, retry_after=1.5)],
            [BackendError("503", status=503, retryable=True)],
            [text("Recovered.")],
        ]
    )
    session = store.create_session()
    events = list(ask(store, session, "hi", backend=backend, model="m", registry=reg, retry=policy))
    assert kinds(events) == ["token", "usage", "done"]
    assert len(backend.requests) == 3
    assert sleeps[0] == 1.5  # Retry-After honoured
    assert 0 <= sleeps[1] <= 1.0  # jittered exponential backoff


def test_retries_are_bounded(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend([[BackendError("down", status=503, retryable=True)]] * 5)
    events = run(store, backend, reg)
    assert kinds(events) == ["error"] and events[0][1]["retryable"] is True
    assert len(backend.requests) == NO_SLEEP.attempts


def test_non_retryable_errors_are_not_retried(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend([[BackendError("bad key", status=401)], [text("never")]])
    events = run(store, backend, reg)
    assert len(backend.requests) == 1
    assert "credentials" in events[0][1]["message"]


def test_an_adapter_bug_does_not_escape_the_generator(store: TranscriptStore, reg: ToolRegistry) -> None:
    def broken(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        yield text("half")
        raise KeyError("choices")

    events = run(store, FakeBackend([broken]), reg)
    assert kinds(events) == ["token", "error"]


def test_dangling_tool_use_is_repaired_when_messages_are_built(
    store: TranscriptStore, reg: ToolRegistry
) -> None:
    session = store.create_session()
    store.append_message(session.id, Message.user("trace it"))
    store.append_message(
        session.id,
        Message(
            role="assistant",
            parts=[Part.of_tool_use("t9", "lookup_address", {"address": "0x9"})],
            stop_reason="tool_use",
        ),
    )
    # the process died here: no tool message was ever written
    backend = FakeBackend([[text("Picking up again.")]])
    events = list(ask(store, session, "are you there?", backend=backend, model="m", registry=reg))
    assert kinds(events)[-1] == "done"
    sent = backend.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].parts[0].tool_use_id == "t9"
    assert sent[2].parts[0].tool_result == INTERRUPTED and sent[2].parts[0].tool_status == "error"


def test_build_messages_fills_only_the_missing_results() -> None:
    history = [
        Message.user("q"),
        Message(role="assistant", parts=[Part.of_tool_use("a", "x", {}), Part.of_tool_use("b", "y", {})]),
        Message(role="tool", parts=[Part.of_tool_result("a", "x", {"ok": 1})]),
    ]
    built = build_messages(history)
    assert [m.role for m in built] == ["user", "assistant", "tool"]
    assert [p.tool_use_id for p in built[2].parts] == ["a", "b"]
    assert built[2].parts[1].tool_result == INTERRUPTED
    assert history[2].parts == [Part.of_tool_result("a", "x", {"ok": 1})]  # the stored copy is untouched


def test_build_messages_caps_large_results_for_the_model() -> None:
    big = {"rows": ["x" * 1000] * 100}
    history = [
        Message.user("q"),
        Message(role="assistant", parts=[Part.of_tool_use("a", "x", {})]),
        Message(role="tool", parts=[Part.of_tool_result("a", "x", big)]),
    ]
    sent = build_messages(history, max_result_bytes=2000)[2].parts[0].tool_result
    assert sent is not None and sent["truncated"] is True
    assert history[2].parts[0].tool_result == big


def test_closing_the_generator_persists_the_partial_answer(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend([[text("one "), text("two "), text("three")]])
    session = store.create_session()
    gen = ask(store, session, "count", backend=backend, model="m", registry=reg)
    assert next(gen)[1]["text"] == "one "
    assert next(gen)[1]["text"] == "two "
    gen.close()
    last = store.load_messages(session.id)[-1]
    assert (last.role, last.stop_reason, last.text) == ("assistant", "cancelled", "one two ")


def test_cancel_event_stops_between_events(store: TranscriptStore, reg: ToolRegistry) -> None:
    cancel = threading.Event()

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        yield text("partial ")
        cancel.set()
        yield text("never shown")

    session = store.create_session()
    events = list(
        ask(store, session, "q", backend=FakeBackend([script]), model="m", registry=reg, cancel=cancel)
    )
    assert kinds(events) == ["token", "token", "done"] or kinds(events) == ["token", "done"]
    assert events[-1][1]["stop_reason"] == "cancelled"
    last = store.load_messages(session.id)[-1]
    assert last.stop_reason == "cancelled" and last.text.startswith("partial ")


def test_a_stream_stopped_for_a_cancel_ends_cancelled_not_in_error(
    store: TranscriptStore, reg: ToolRegistry
) -> None:
    """A caller may stop a stream that has not said anything yet (the job service does when
    Stop is pressed while the model thinks): the failure that follows is the cancel."""
    cancel = threading.Event()

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        cancel.set()
        raise BackendError("the read was stopped", retryable=True)
        yield  # pragma: no cover - a generator

    backend = FakeBackend([script, [text("never")]])
    session = store.create_session()
    events = list(ask(store, session, "q", backend=backend, model="m", registry=reg, cancel=cancel,
                      retry=NO_SLEEP))  # fmt: skip
    assert events == [("done", {"session_id": session.id, "stop_reason": "cancelled"})]
    assert len(backend.requests) == 1  # not retried
    assert [m.role for m in store.load_messages(session.id)] == ["user"]  # nothing was said


def test_a_cancel_during_a_retry_backoff_makes_no_new_call(store: TranscriptStore, reg: ToolRegistry) -> None:
    cancel = threading.Event()
    policy = RetryPolicy(attempts=3, sleep=lambda s: cancel.set())  # Stop pressed while it waits
    backend = FakeBackend([[BackendError("throttled", status=429, retryable=True)], [text("never")]])
    session = store.create_session()
    events = list(
        ask(store, session, "q", backend=backend, model="m", registry=reg, cancel=cancel, retry=policy)
    )
    assert events[-1] == ("done", {"session_id": session.id, "stop_reason": "cancelled"})
    assert len(backend.requests) == 1


def test_cancel_during_tools_answers_every_call(store: TranscriptStore, reg: ToolRegistry) -> None:
    cancel = threading.Event()
    r = ToolRegistry()

    @r.register()
    def first(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        cancel.set()  # the user presses stop while this tool runs
        return {"ran": True}

    @r.register()
    def second(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise AssertionError("must not run after stop")

    backend = FakeBackend(
        [[tool_call("first", {}, id="a"), tool_call("second", {}, id="b")], [text("never")]]
    )
    session = store.create_session()
    events = list(ask(store, session, "q", backend=backend, model="m", registry=r, cancel=cancel))
    assert events[-1] == ("done", {"session_id": session.id, "stop_reason": "cancelled"})
    tool_msg = store.load_messages(session.id)[-1]
    assert [(p.tool_use_id, p.tool_status) for p in tool_msg.parts] == [("a", "ok"), ("b", "error")]
    assert len(backend.requests) == 1


def test_budget_is_checked_before_every_model_call(store: TranscriptStore, reg: ToolRegistry) -> None:
    budget = Budget(per_minute_tokens=60)
    backend = FakeBackend([[tool_call("lookup_address", {"address": "0xabc"})], [text("never reached")]])
    events = run(store, backend, reg, budget=budget)
    # The first call fits; its usage fills the minute bucket, so the follow-up call is refused.
    assert events[-1][0] == "error"
    assert events[-1][1]["kind"] == "budget" and events[-1][1]["bucket"] == "per_minute_tokens"
    assert "per-minute" in events[-1][1]["message"]
    assert len(backend.requests) == 1


def test_usage_event_carries_cost_for_a_priced_model(store: TranscriptStore, reg: ToolRegistry) -> None:
    usage = {
        "input_tokens": 1000,
        "output_tokens": 100,
        "cache_read_tokens": 200,
        "cache_write_tokens": 0,
        "reasoning_tokens": None,
    }
    backend = FakeBackend(
        [
            [
                text("hi"),
                {"kind": "done", "stop_reason": "end_turn", "raw_stop_reason": "stop", "usage": usage},
            ]
        ],
        name="openai",
    )
    session = store.create_session()
    events = list(ask(store, session, "q", backend=backend, model="gpt-4o", registry=reg))
    cost = next(p for e, p in events if e == "usage")["cost_usd"]
    # gpt-4o: $2.50/M input, $1.25/M cached input, $10/M output (from genai-prices)
    assert cost == pytest.approx((800 * 2.5 + 200 * 1.25 + 100 * 10) / 1e6)


def test_redacted_reasoning_and_signatures_are_stored(store: TranscriptStore, reg: ToolRegistry) -> None:
    backend = FakeBackend(
        [[
            {"kind": "reasoning", "text": "", "redacted": "b3BhcXVl"},
            reasoning("step one "), reasoning("step two"), reasoning("", signature="sig=="),
            text("Answer."),
        ]]
    )  # fmt: skip
    session = store.create_session()
    list(ask(store, session, "q", backend=backend, model="m", registry=reg))
    parts = store.load_messages(session.id)[-1].parts
    assert parts[0].is_redacted_reasoning and parts[0].signature == "b3BhcXVl"
    assert (parts[1].text, parts[1].signature) == ("step one step two", "sig==")
    assert parts[2].text == "Answer."


def test_script_exhaustion_is_a_calm_error(store: TranscriptStore, reg: ToolRegistry) -> None:
    events = run(store, FakeBackend([]), reg)
    assert kinds(events) == ["error"]


def test_an_attachment_error_is_shown_to_the_user_as_it_is(store: TranscriptStore, reg: ToolRegistry) -> None:
    from tahrix_lab.agent.backends.media import MediaError

    backend = FakeBackend([[MediaError("The file report.docx cannot be sent to this provider (docx).")]])
    events = run(store, backend, reg)
    assert events == [
        (
            "error",
            {
                "kind": "backend",
                "message": "The file report.docx cannot be sent to this provider (docx).",
                "retryable": False,
                "status": None,
            },
        )
    ]


def test_a_stop_before_the_call_sends_nothing(store: TranscriptStore, reg: ToolRegistry) -> None:
    cancel = threading.Event()
    cancel.set()
    backend = FakeBackend([[text("never")]])
    session = store.create_session()
    events = list(ask(store, session, "q", backend=backend, model="m", registry=reg, cancel=cancel))
    assert events == [("done", {"session_id": session.id, "stop_reason": "cancelled"})]
    assert backend.requests == []


def test_a_history_handed_in_is_sent_as_read_back_and_not_read(
    store: TranscriptStore, reg: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller that just stored a new session's messages hands them in (the job service
    does: one statement less per start); the backend is sent the same as from the store."""
    from tahrix_lab.agent import run_agent

    script = [[tool_call("lookup_address", {"address": "0xabc"}, id="t1")], [text("Done.")]]
    read_back, handed = FakeBackend(script), FakeBackend(script)
    for backend, hand in ((read_back, False), (handed, True)):
        session = store.create_session(user="ana", system_prompt="Be precise.")
        history = [store.append_message(session.id, Message.user(q)) for q in ("Hi.", "Who is 0xabc?")]
        reads: list[str] = []

        def counted(sid: str, reads: list[str] = reads, load: Any = store.load_messages) -> Any:
            reads.append(sid)
            return load(sid)

        monkeypatch.setattr(store, "load_messages", counted)
        events = list(run_agent(session, store=store, backend=backend, model="fake-model", registry=reg,
                                retry=NO_SLEEP, history=history if hand else None))  # fmt: skip
        monkeypatch.undo()
        assert kinds(events)[-1] == "done"
        assert reads == ([] if hand else [session.id])

    def sent(request: Any) -> list[Any]:  # what the backend saw, but how long the tool took
        return [(m.role, [{k: v for k, v in p.to_dict().items() if k != "duration_ms"} for p in m.parts])
                for m in request.messages]  # fmt: skip

    for a, b in zip(read_back.requests, handed.requests, strict=True):
        assert sent(a) == sent(b)
    assert [m.role for m in handed.requests[1].messages] == ["user", "user", "assistant", "tool"]
