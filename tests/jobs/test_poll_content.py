"""``content=false`` on a poll: the text comes once, in the chunks, not again in every answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from .test_api import ALICE, JOB, SLOW, service

WORDS = " ".join(f"w{i}" for i in range(40))


def follow(
    client: httpx.Client, job_id: str, **params: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Long-poll to the end with ``params``; (every answer, every chunk)."""
    since, answers, chunks = 0, [], []
    while True:
        r = client.get(f"{JOB}/{job_id}", params={"since": since, "wait": 5, **params}, headers=ALICE)
        assert r.status_code == 200, r.text
        state = r.json()
        answers.append(state)
        chunks += state["chunks"]
        since = state["next"]
        if state["status"] != "streaming":
            return answers, chunks


def text(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["text"] for c in chunks if c["type"] == "content")


def test_polls_without_content_carry_everything_else(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, SLOW, redis_url=mode) as (client, _built):
        job = client.post(JOB, json={"message": "go"}, headers=ALICE).json()["job_id"]
        lean, lean_chunks = follow(client, job, content="false")  # the fast path
        assert len(lean) > 2  # the answer streamed over several polls
        for state in lean:
            assert "content" not in state and "reasoning" not in state
            assert {
                "status",
                "chunks",
                "next",
                "usage",
                "tool_calls",
                "session_id",
                "stop_reason",
            } <= state.keys()
        assert text(lean_chunks) == WORDS
        assert lean[-1]["status"] == "done"

        full, full_chunks = follow(client, job)  # a seed client, after the end: everything
        assert full[-1]["content"] == WORDS == text(full_chunks)
        assert {k: v for k, v in full[-1].items() if k not in ("content", "reasoning")} == {
            **lean[-1],
            "chunks": full_chunks,
        }


def test_the_routes_read_content_as_fastapi_does(tmp_path: Path, mode: str | None) -> None:
    with service(tmp_path, SLOW, redis_url=mode) as (client, _built):
        job = client.post(JOB, json={"message": "go"}, headers=ALICE).json()["job_id"]
        follow(client, job)
        # "f" and "T" are bools to FastAPI but not to the fast path, which hands them on
        routed = client.get(f"{JOB}/{job}", params={"content": "f"}, headers=ALICE).json()
        fast = client.get(f"{JOB}/{job}", params={"content": "0"}, headers=ALICE).json()
        assert routed == fast and "content" not in routed
        assert client.get(f"{JOB}/{job}", params={"content": "T"}, headers=ALICE).json()["content"] == WORDS
        bad = client.get(f"{JOB}/{job}", params={"content": "maybe"}, headers=ALICE)
        assert bad.status_code == 422 and bad.json()["field"] == "content"
