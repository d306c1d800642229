"""The poll's hot path, served before FastAPI's stack.

Under load nearly every request is a long-poll answer (``GET
/api/v1/agent/chat-stream-job/{id}?since=N&wait=S``), and FastAPI's layers
(middlewares, dependency solving, query validation) cost several times the
work of the answer itself. ``FastPoll`` answers a well-formed poll with a known
token directly: the same ownership check, deadline and JSON as the FastAPI
route. Anything else (no or unknown token, a parameter out of range, another
path) goes on to the FastAPI app, which answers it as documented (401, 422,
...), so the OpenAPI route stays the contract.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from tahrix_lab.jobs.chunklog import StoreUnavailable

log = logging.getLogger(__name__)

_JOB_ID = re.compile(r"[^/]+")
STORE_DOWN = "The job store is unreachable right now. Please try again in a moment."


class FastPoll:
    """ASGI middleware: see the module docstring. ``read(job_id, user, since, wait)`` is the
    API's ``own_state`` (it raises the API's refusal, whose ``response`` is sent as is)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        prefix: str,
        tokens: dict[str, str],
        read: Callable[[str, str, int, float], Awaitable[dict[str, Any]]],
        refused: type[Exception],
    ) -> None:
        self.app = app
        self.path_prefix = f"{prefix}/chat-stream-job/"
        self.tokens = tokens
        self.read = read
        self.refused = refused

    def _parse(self, scope: Scope) -> tuple[str, str, int, float] | None:
        """(job id, user, since, wait) of a well-formed poll, else None (FastAPI answers it)."""
        if scope["type"] != "http" or scope["method"] != "GET":
            return None
        path: str = scope["path"]
        if not path.startswith(self.path_prefix):
            return None
        job_id = path[len(self.path_prefix) :]
        if not _JOB_ID.fullmatch(job_id):
            return None
        user = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    user = self.tokens.get(token.strip())
                break
        if user is None:
            return None
        since, wait = 0, 0.0
        try:
            for key, value in parse_qsl(scope["query_string"].decode("latin-1"), strict_parsing=False):
                if key == "since":
                    since = int(value)
                elif key == "wait":
                    wait = float(value)
        except ValueError:
            return None
        if not (0 <= since <= 10_000_000 and 0 <= wait <= 25):  # the route's bounds; NaN fails too
            return None
        return job_id, user, since, wait

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        poll = self._parse(scope)
        if poll is None:
            await self.app(scope, receive, send)
            return
        try:
            state = await self.read(*poll)
        except StoreUnavailable as exc:
            log.error("job store unavailable: %s", exc)
            body, status = json.dumps({"detail": STORE_DOWN, "field": None}).encode(), 503
        except self.refused as exc:
            await exc.response(scope, receive, send)  # type: ignore[attr-defined]
            return
        else:
            body = json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode()
            status = 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
