"""Export / import as JSON Lines: lossless, so a re-imported session diffs as identical."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.transcript import Message, Part, Session, Usage
from tahrix_lab.lab.diff import diff_messages
from tahrix_lab.lab.transfer import FORMAT, export_sessions, import_sessions


def rich_session(store: TranscriptStore) -> Session:
    """Every kind of part and field the transcript knows, including awkward values."""
    s = store.create_session(
        user="ana", purpose="investigation", system_prompt="Be präzise ✓", title="t\nitle"
    )
    store.append_message(
        s.id, Message.user("Look at this 🧾", Part.of_media("image", "s3://bucket/k.png", "image/png"))
    )
    store.append_message(
        s.id,
        Message(
            role="assistant",
            parts=[
                Part.of_reasoning("thinking…", signature="c2lnbmF0dXJl"),
                Part.of_reasoning(None, "cmVkYWN0ZWQ="),  # redacted reasoning
                Part.of_text("Checking."),
                Part.of_tool_use(
                    "call_1",
                    "lookup",
                    {"address": "0xabc", "n": 1.5, "deep": {"x": [1, None]}},
                    raw='{"address":"0xabc"}',
                ),
                Part.of_tool_use("call_2", "lookup", None, raw="{not json"),
            ],
            backend="bedrock",
            model_id="us.anthropic.claude-3-5-sonnet-20240620-v1:0",
            stop_reason="tool_use",
            raw_stop_reason="tool_use",
            usage=Usage(1234, 56, cache_read_tokens=1000, cache_write_tokens=0, reasoning_tokens=12),
            tools_offered=["lookup", "trace"],
            latency_ms=812.3456789,
            ttft_ms=123.000001,
        ),
    )
    store.append_message(
        s.id,
        Message(
            role="tool",
            parts=[
                Part.of_tool_result("call_1", "lookup", {"items": [{"label": "exchange"}]}),
                Part.of_tool_result(
                    "call_2", "lookup", {"error": {"type": "invalid_json", "message": "bad"}}, "error"
                ),
            ],
        ),
    )
    store.append_message(
        s.id,
        Message(
            role="assistant",
            parts=[Part.of_text("Done.")],
            backend="bedrock",
            model_id="m",
            stop_reason="end_turn",
            usage=Usage(),
        ),
    )
    return s


def test_round_trip_is_lossless_and_diffs_as_identical(store: TranscriptStore, tmp_path: Path) -> None:
    s = rich_session(store)
    out = io.StringIO()
    assert export_sessions(store, out, [s.id]) == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["format"] == FORMAT

    other = TranscriptStore(tmp_path / "other.duckdb")
    report = import_sessions(other, io.StringIO(out.getvalue()))
    assert report.imported == [s.id]

    assert other.get_session(s.id) == store.get_session(s.id)
    before, after = store.load_messages(s.id), other.load_messages(s.id)
    assert [m.to_dict() for m in after] == [m.to_dict() for m in before]
    assert after == before  # dataclass equality: every field, timestamps included
    assert diff_messages(before, after).identical
    # and exporting again gives the same bytes
    again = io.StringIO()
    export_sessions(other, again, [s.id])
    assert again.getvalue() == out.getvalue()
    other.close()


def test_export_all_and_conflicts(store: TranscriptStore) -> None:
    first = rich_session(store)
    second = store.create_session(user="bob")
    out = io.StringIO()
    assert export_sessions(store, out) == 2
    ids = [json.loads(line)["session"]["id"] for line in out.getvalue().splitlines()]
    assert set(ids) == {first.id, second.id}
    with pytest.raises(ConfigurationError, match="already in"):
        import_sessions(store, io.StringIO(out.getvalue()))
    report = import_sessions(store, io.StringIO(out.getvalue()), on_conflict="skip")
    assert report.imported == [] and sorted(report.skipped) == sorted(ids)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json}\n", "Line 1 is not valid JSON"),
        ('\n{"format": "other"}\n', "Line 2 is not a Tahrix session record"),
        (json.dumps({"format": FORMAT, "messages": []}) + "\n", "Line 1 has a malformed session record"),
    ],
)
def test_bad_input_names_the_line(store: TranscriptStore, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        import_sessions(store, io.StringIO(text))
