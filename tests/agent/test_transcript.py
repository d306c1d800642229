from __future__ import annotations

from datetime import UTC, datetime

from tahrix_lab.agent import Message, Part, Session, Usage
from tahrix_lab.agent.transcript import PART_TYPES, ROLES, STOP_REASONS


def test_vocabularies_match_the_design() -> None:
    assert ROLES == ("user", "assistant", "tool")
    assert PART_TYPES == ("text", "reasoning", "tool_use", "tool_result", "image", "document")
    assert set(STOP_REASONS) >= {
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "content_filter",
        "other",
    }


def test_usage_unknown_is_not_zero() -> None:
    assert not Usage().known
    assert Usage().to_dict() == dict.fromkeys(
        ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    )
    assert Usage(0, 0).known
    assert Usage(10, 5, cache_read_tokens=8).total_tokens == 15
    assert Usage.from_dict(None) == Usage()
    assert Usage.from_dict({"input_tokens": 3, "junk": 1}) == Usage(input_tokens=3)


def test_message_dict_round_trip_keeps_every_field() -> None:
    m = Message(
        role="assistant",
        parts=[Part.of_reasoning(None, "cmVk"), Part.of_tool_use("t", "x", None, raw="{bad")],
        session_id="s",
        position=3,
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        backend="bedrock",
        model_id="m",
        stop_reason="tool_use",
        raw_stop_reason="tool_use",
        usage=Usage(1, 2, 3, 4, 5),
        tools_offered=["x"],
        latency_ms=1.5,
        ttft_ms=0.5,
    )
    again = Message.from_dict(m.to_dict())
    assert again == m
    assert again.parts[0].is_redacted_reasoning
    assert again.tool_uses()[0].text == "{bad"


def test_session_round_trip_and_ids() -> None:
    a, b = Session(), Session()
    assert a.id != b.id and len(a.id) == 36
    assert Session.from_dict(a.to_dict()) == a
    assert a.created_at.tzinfo is not None


def test_user_message_text_and_media() -> None:
    m = Message.user("see the chart", Part.of_media("image", "/tmp/c.png", "image/png"))
    assert m.text == "see the chart"
    assert [p.type for p in m.parts] == ["text", "image"]
    assert m.parts[1].to_dict() == {"type": "image", "media_ref": "/tmp/c.png", "media_type": "image/png"}
