"""The SSE encoder speaks the same chunks as every other surface."""

from __future__ import annotations

import json

from tahrix_lab.agent import FakeBackend, TranscriptStore, ask
from tahrix_lab.agent.backends.fake import reasoning, text
from tahrix_lab.flow import chunks
from tahrix_lab.jobs.http.api import sse_events


def test_sse_frames_carry_the_shared_chunks() -> None:
    store = TranscriptStore(":memory:")
    session = store.create_session(user="u")
    backend = FakeBackend([[reasoning("Hmm."), text("Line one\nline two")]])
    events = list(ask(store, session, "hi", backend=backend, model="m"))
    frames = list(sse_events(events))
    assert all(f.endswith("\n\n") for f in frames)
    parsed = []
    for i, frame in enumerate(frames):
        lines = frame.strip("\n").split("\n")
        assert lines[0] == f"id: {i}"
        assert len(lines) == 2  # a newline in the text never breaks the frame
        parsed.append(json.loads(lines[1].removeprefix("data: ")))
    assert parsed == list(chunks(events))
    assert [c["type"] for c in parsed] == ["reasoning", "content", "usage", "done"]
    assert parsed[1]["text"] == "Line one\nline two"
    store.close()
