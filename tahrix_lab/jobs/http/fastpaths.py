"""``FastPaths``: the outer ASGI app that answers a well-formed poll or start before FastAPI.

Under load nearly every request is a long-poll answer or, in a burst, a start, and FastAPI's layers
(middlewares, dependency solving, validation) cost several times the work of the answer. This one
calls the routes' own functions (the same ownership check, deadline, admission and JSON; the POST
body checked by the route's pydantic model); anything else goes on to FastAPI, which answers it as
documented (401, 413, 422, ...): the OpenAPI routes stay the contract.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from tahrix_lab.jobs.contract import JobRejected, StoreUnavailable
from tahrix_lab.web.guards import read_body, replaying, send_json

log = logging.getLogger(__name__)

_JOB_ID = re.compile(r"[^/]+")
# Bool query values FastAPI reads the same way; any other goes on to FastAPI (which may answer 422).
_BOOLS = dict.fromkeys(("1", "true", "on", "yes"), True) | dict.fromkeys(("0", "false", "off", "no"), False)
STORE_DOWN = "The job store is unreachable right now. Please try again in a moment."


@dataclass(eq=False)
class FastPaths:
    """``read(job_id, user, since, wait, content)`` and ``admit(body, user)`` are the routes'
    functions; they refuse with ``JobRejected``."""

    app: ASGIApp
    prefix: str
    tokens: dict[str, str]
    read: Callable[[str, str, int, float, bool], Awaitable[dict[str, Any]]]
    admit: Callable[[Any, str], Awaitable[dict[str, Any]]]
    body_model: type[BaseModel]
    max_body: int

    def __post_init__(self) -> None:
        self.start_path = f"{self.prefix}/chat-stream-job"
        self.path_prefix = self.start_path + "/"

    def _user(self, scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        return None

    def _poll(self, scope: Scope) -> tuple[str, str, int, float, bool] | None:
        """(job id, user, since, wait, content) of a well-formed poll, else None (FastAPI answers it)."""
        job_id = scope["path"][len(self.path_prefix) :]
        user = self._user(scope)
        if user is None or not _JOB_ID.fullmatch(job_id):
            return None
        since, wait, content = 0, 0.0, True
        try:
            for key, value in parse_qsl(scope["query_string"].decode("latin-1")):
                if key == "since":
                    since = int(value)
                elif key == "wait":
                    wait = float(value)
                elif key == "content":
                    content = _BOOLS[value.lower()]
        except (ValueError, KeyError):
            return None
        if not (0 <= since <= 10_000_000 and 0 <= wait <= 25):  # the route's bounds; NaN fails too
            return None
        return job_id, user, since, wait, content

    def _json_post(self, scope: Scope) -> bool:
        declared = -1
        json_type = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = int(value) if value.isdigit() else -1
            elif name == b"content-type":
                json_type = value.split(b";")[0].strip().lower() == b"application/json"
        return json_type and 0 <= declared <= self.max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            if method == "GET" and path.startswith(self.path_prefix):
                poll = self._poll(scope)
                if poll is not None:
                    await self._answer(send, self.read(*poll))
                    return
            elif method == "POST" and path == self.start_path and self._json_post(scope):
                await self._start(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _start(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = await read_body(receive)
        if raw is None:
            return
        user = self._user(scope)
        body: BaseModel | None = None
        if user is not None and len(raw) <= self.max_body:
            with contextlib.suppress(ValidationError):
                body = self.body_model.model_validate_json(raw)
        if body is None or user is None:  # FastAPI answers it (401, 413, 422) from the same bytes
            await self.app(scope, replaying(raw, receive), send)
            return
        await self._answer(send, self.admit(body, user))

    async def _answer(self, send: Send, result: Awaitable[Any]) -> None:
        try:
            answer = await result
        except StoreUnavailable as exc:
            log.error("job store unavailable: %s", exc)
            await send_json(send, 503, {"detail": STORE_DOWN, "field": None})
        except JobRejected as exc:
            await send_json(send, exc.status, {"detail": exc.message, "field": exc.field})
        else:
            await send_json(send, 200, answer)
