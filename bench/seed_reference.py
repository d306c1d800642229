"""A reference of the seed's job service design, for side-by-side benchmarks.

As the seed's contract fixed it (DESIGN.md, section 8): FastAPI and Redis; a
POST starts a background job and answers ``{job_id, meta}``; the job's whole
JSON state (status, content, chunks, usage...) lives under ``chatjob:{id}``
and is rewritten on every chunk (``SET ... EX 180``); ``GET`` answers that
state and the client, polling every 500 ms, renders the chunks after its
``lastChunkIdx`` and stops on ``done`` or ``error``.

The token source is the same as the benchmark's for our service: ``count``
tokens at ``interval`` seconds, each " seq:unix-time".
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI

TTL_S = 180


def create_seed_app(redis_url: str, count: int, interval: float) -> FastAPI:
    import redis.asyncio

    app = FastAPI()
    # As the seed's client: a connection per concurrent command (redis-py 8 caps its default
    # pool, so the cap is set far above the load). A bounded pool of 64 starved this reference:
    # at 200 jobs its p95 read 24 s instead of 0.9 s, the wait for a connection, not the design.
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True, max_connections=10_000)
    tasks: set[asyncio.Task[None]] = set()

    async def run(job_id: str) -> None:
        state: dict[str, Any] = {"status": "streaming", "content": "", "reasoning": "", "chunks": [],
                                 "tool_calls": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0}}  # fmt: skip
        key = f"chatjob:{job_id}"
        start = time.monotonic()
        for seq in range(count):
            delay = start + seq * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            text = f" {seq}:{time.time():.6f}"
            state["content"] += text
            state["chunks"].append({"type": "content", "text": text})
            state["usage"]["completion_tokens"] += 1
            await client.set(key, json.dumps(state), ex=TTL_S)  # the whole state, every chunk
        state["status"] = "done"
        await client.set(key, json.dumps(state), ex=TTL_S)

    @app.post("/api/v1/agent/chat-stream-job")
    async def start(body: dict[str, Any]) -> dict[str, Any]:
        job_id = uuid.uuid4().hex
        await client.set(f"chatjob:{job_id}", json.dumps({"status": "streaming", "chunks": []}), ex=TTL_S)
        task = asyncio.create_task(run(job_id))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return {"job_id": job_id, "meta": {}}

    @app.get("/api/v1/agent/chat-stream-job/{job_id}")
    async def poll(job_id: str) -> Any:
        raw = await client.get(f"chatjob:{job_id}")
        if raw is None:
            return {"status": "error", "chunks": []}
        return json.loads(raw)

    @app.get("/healthz")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    return app


def serve_seed(port: int, redis_url: str, count: int, interval: float) -> None:
    import uvicorn

    uvicorn.run(create_seed_app(redis_url, count, interval), host="127.0.0.1", port=port,
                log_level="warning", backlog=4096)  # fmt: skip
