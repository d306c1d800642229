"""What the job service's new outer layers cost per request (issue 31 items 2 and 7).

``SecurityHeaders`` (CSP, frame, nosniff, referrer on every response) and ``SignInThrottle``
(failed sign-ins per client address) wrap the whole app, the fast poll path included. This calls
an ASGI app that answers at once, bare and inside both layers, in-process (no sockets), and prints
microseconds per request and the ratio; the difference is what each request pays.

    .venv/bin/python bench/bench_service_limits.py          # 200,000 requests each
    TAHRIX_BENCH_N=50000 .venv/bin/python bench/bench_service_limits.py
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from tahrix_lab.web.guards import SecurityHeaders, SignInThrottle

N = int(os.environ.get("TAHRIX_BENCH_N", "200000"))
SCOPE = {"type": "http", "method": "GET", "path": "/api/v1/agent/chat-stream-job/abc", "client": ("10.0.0.1", 5),
         "headers": [(b"authorization", b"Bearer x")], "query_string": b"since=3&wait=20"}  # fmt: skip
BODY = b'{"status":"streaming","chunks":[]}'


async def answer(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": BODY})


async def run(app: Any) -> float:
    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        return None

    start = time.perf_counter()
    for _ in range(N):
        await app(SCOPE, receive, send)
    return (time.perf_counter() - start) / N * 1e6


async def main() -> None:
    wrapped = SecurityHeaders(SignInThrottle(answer, 30))
    await run(answer), await run(wrapped)  # warm up
    bare, layered = await run(answer), await run(wrapped)
    print(f"requests: {N} in-process, load average {os.getloadavg()[0]:.2f}")
    print(f"bare app:                      {bare:.2f} us/request")
    print(
        f"with SecurityHeaders+Throttle: {layered:.2f} us/request (+{layered - bare:.2f} us, x{layered / bare:.2f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
