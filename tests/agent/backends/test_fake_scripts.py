"""``FakeBackend.from_script``: the JSON scripts the job service plays for every question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.errors import BackendError, ConfigurationError
from tahrix_lab.agent.transcript import Message


def played(backend: FakeBackend, messages: list[Message]) -> list[dict[str, Any]]:
    stream = backend.stream(system=None, messages=messages, tools=[], model="m", inference=None)
    return [dict(e) for e in stream]


def test_echo_answers_every_question_word_by_word() -> None:
    backend = FakeBackend.from_script("echo", delay=0)
    for question in ("first one", "second"):
        events = played(backend, [Message.user(question)])
        said = "".join(e["text"] for e in events if e["kind"] == "text")
        assert said == f"You asked: {question}"
        assert events[0]["kind"] == "reasoning"
        assert events[-1]["stop_reason"] == "end_turn"


def test_a_file_script_calls_tools_then_fails_where_told(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [
        [{"kind": "tool_call", "name": "echo", "args": {"value": 1}}],
        [{"kind": "text", "text": "half"}, {"kind": "error", "message": "scripted stop"}],
    ]}))  # fmt: skip
    backend = FakeBackend.from_script(str(path))
    assert backend.delay == 0.0
    first = played(backend, [Message.user("q")])
    assert (first[0]["kind"], first[0]["name"], first[0]["input"]) == ("tool_use", "echo", {"value": 1})
    assert first[-1]["stop_reason"] == "tool_use"
    answered = [Message.user("q"), Message(role="assistant")]
    with pytest.raises(BackendError, match="scripted stop"):
        played(backend, answered)


@pytest.mark.parametrize(
    ("content", "match"),
    [(None, "Could not read the fake script .*a built-in name: echo, slow"),
     ("not json", "Could not read the fake script"),
     ('{"turns": []}', "needs a non-empty list under 'turns'")],
)  # fmt: skip
def test_bad_scripts_are_configuration_errors(tmp_path: Path, content: str | None, match: str) -> None:
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigurationError, match=match):
        FakeBackend.from_script(str(path))
