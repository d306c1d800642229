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
        ("{not json}\n", "line 1: column 2: not valid JSON"),
        ('\n{"format": "other"}\n', "line 2: format: not a Tahrix session record"),
        (json.dumps({"format": FORMAT, "messages": []}) + "\n", "line 1: session: missing"),
        (
            json.dumps({"format": FORMAT, "session": {"id": 7}}) + "\n",
            "line 1: session.id: missing, or not a string",
        ),
        (
            json.dumps(
                {"format": FORMAT, "session": {"id": "s"}, "messages": [{"role": "user", "parts": "hi"}]}
            ),
            r"line 1: messages\[0\]\.parts: must be a list, not str",
        ),
        (
            json.dumps({"format": FORMAT, "session": {"id": "s"}, "messages": [{"role": "robot"}]}),
            r"line 1: messages\[0\]\.role: 'robot' is not",
        ),
        (
            json.dumps({"format": FORMAT, "session": {"id": "s"}, "messages": {}}),
            "line 1: messages: must be a list",
        ),
    ],
)
def test_bad_input_names_the_line_and_the_field(store: TranscriptStore, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        import_sessions(store, io.StringIO(text))
    assert str(info.value).startswith("Nothing was imported")
    assert store.list_sessions() == []


def _export_text(store: TranscriptStore, n: int) -> list[str]:
    for i in range(n):
        s = store.create_session(user=f"u{i}")
        store.append_message(s.id, Message.user(f"question {i}"))
    out = io.StringIO()
    export_sessions(store, out)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("broken", [0, 2, 4])
def test_import_is_all_or_nothing(tmp_path: Path, broken: int) -> None:
    source = TranscriptStore(tmp_path / "a.duckdb")
    lines = _export_text(source, 5)
    lines[broken] = lines[broken].replace('"parts": [', '"parts": "oops", "x": [', 1)
    target = TranscriptStore(tmp_path / "b.duckdb")
    with pytest.raises(ConfigurationError) as info:
        import_sessions(target, io.StringIO("\n".join(lines) + "\n"))
    message = str(info.value)
    assert f"line {broken + 1}: messages[0].parts: must be a list, not str" in message
    assert "1 bad record(s) of 5" in message
    assert target.list_sessions() == []  # not even the good ones before it
    assert target.cursor().execute("SELECT count(*) FROM messages").fetchone() == (0,)
    # fixed, the same file imports whole
    lines[broken] = _export_text(TranscriptStore(":memory:"), 1)[0]
    assert len(import_sessions(target, io.StringIO("\n".join(lines))).imported) == 5
    source.close()
    target.close()


def test_every_bad_record_gets_its_own_line(store: TranscriptStore) -> None:
    good = _export_text(TranscriptStore(":memory:"), 1)[0]
    text = "\n".join([good, "{", '{"format": "x"}', good]) + "\n"  # the good line twice: a duplicate too
    with pytest.raises(ConfigurationError) as info:
        import_sessions(store, io.StringIO(text))
    message = str(info.value)
    assert "line 2: column 2: not valid JSON" in message
    assert "line 3: format:" in message
    assert store.list_sessions() == []


def test_a_session_twice_in_the_input_is_refused(store: TranscriptStore) -> None:
    good = _export_text(TranscriptStore(":memory:"), 1)[0]
    with pytest.raises(ConfigurationError, match=r"line 2: session\.id: .* is already in"):
        import_sessions(store, io.StringIO(good + "\n" + good + "\n"))
    assert store.list_sessions() == []


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_input_says_so(store: TranscriptStore, text: str) -> None:
    with pytest.raises(ConfigurationError, match="is empty: there are no sessions or case rows in it"):
        import_sessions(store, io.StringIO(text))


def test_a_case_session_moves_between_workspaces_with_its_case_grant_and_history(tmp_path: Path) -> None:
    from tahrix_lab.case.investigator import QUESTION, scripted_backend
    from tahrix_lab.case.workspace import Workspace
    from tahrix_lab.lab.costs import costs

    a = Workspace(tmp_path / "a.duckdb")
    case_id = a.load_sample_case()
    session = a.start_investigation(case_id, user="ana", grant={"may_write": True})
    for _ in a.ask(
        session, QUESTION.format(case_id=case_id), backend=scripted_backend(a, case_id), model="gpt-4o-mini"
    ):
        pass
    a.annotate(
        case_id, "address", "0xabc", "note", {"text": "mixer"}, analyst="ana"
    )  # audited, in the record
    plain = a.store.create_session(user="bob")  # a session with no case travels too
    out = io.StringIO()
    assert export_sessions(a.store, out) == 2
    record = next(json.loads(x) for x in out.getvalue().splitlines() if session.id in x)
    assert record["case"]["case_sessions"][0]["case_id"] == case_id
    assert record["case"]["case_sessions"][0]["grant"]["may_write"] is True

    b = Workspace(tmp_path / "b.duckdb")
    report = import_sessions(b.store, io.StringIO(out.getvalue()))
    assert sorted(report.imported) == sorted([session.id, plain.id])
    assert report.case_rows >= 2 and report.missing_cases == [case_id]
    b.load_sample_case()  # repeats the manifest's steps: the same evidence, nothing recorded
    assert b.store.case_manifest(case_id) == a.store.case_manifest(case_id)
    again = import_sessions(b.store, io.StringIO(out.getvalue()), on_conflict="skip")  # laid over it now
    assert again.imported == [] and again.missing_cases == []

    assert b.case_of(session.id) == case_id
    assert b.grant(session.id) == a.grant(session.id)
    assert b.audit_log(case_id) == a.audit_log(case_id)
    assert {e["actor"] for e in b.audit_log(case_id)} >= {"ana"}
    by_case_a = costs(a.store, by=("case",)).to_dict("records")
    by_case_b = costs(b.store, by=("case",)).to_dict("records")
    assert by_case_a == by_case_b
    assert any(r["case"] == case_id and r["calls"] > 0 and r["cost_usd"] > 0 for r in by_case_b)
    a.close()
    b.close()


def test_a_linked_case_not_loaded_in_the_target_is_reported(tmp_path: Path) -> None:
    from tahrix_lab.case.workspace import Workspace

    a = Workspace(tmp_path / "a.duckdb")
    session = a.start_investigation(a.load_sample_case(), user="ana")
    out = io.StringIO()
    export_sessions(a.store, out, [session.id])
    b = Workspace(tmp_path / "b.duckdb")  # no case loaded
    report = import_sessions(b.store, io.StringIO(out.getvalue()))
    assert report.missing_cases == ["CASE-001"] and b.case_of(session.id) == "CASE-001"
    a.close()
    b.close()
