"""The two hot paths of the job API, an ASGI app around the FastAPI app.

Under load nearly every request is a long-poll answer (``GET
/api/v1/agent/chat-stream-job/{id}?since=N&wait=S``) or, in a burst, a start
(``POST /api/v1/agent/chat-stream-job``), and FastAPI's layers (middlewares,
dependency solving, validation) cost several times the work of the answer
itself. ``FastPaths`` answers a well-formed request with a known token
directly, with the routes' own functions (the same ownership check, deadline,
admission and JSON); the POST body is checked by the route's own pydantic
model. Anything else (no or unknown token, a parameter out of range, a body
the model refuses, another path) goes on to the FastAPI app, which answers it
as documented (401, 413, 422, ...), so the OpenAPI routes stay the contract.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tahrix_lab.jobs.contract import StoreUnavailable

log = logging.getLogger(__name__)

_JOB_ID = re.compile(r"[^/]+")
# What FastAPI reads as a bool query parameter; anything else goes to it (and is a 422).
_BOOLS = {
    "1": True,
    "true": True,
    "on": True,
    "yes": True,
    "0": False,
    "false": False,
    "off": False,
    "no": False,
}
STORE_DOWN = "The job store is unreachable right now. Please try again in a moment."


class FastPaths:
    """The outer ASGI app: see the module docstring. ``read(job_id, user, since, wait, content)`` and
    ``admit(body, user)`` are the routes' functions; an exception of a ``refused`` type
    carries its answer (``response``, or ``status``/``message``/``field``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        prefix: str,
        tokens: dict[str, str],
        read: Callable[[str, str, int, float, bool], Awaitable[dict[str, Any]]],
        admit: Callable[[Any, str], Awaitable[dict[str, Any]]],
        body_model: type[BaseModel],
        max_body: int,
        refused: tuple[type[Exception], ...],
    ) -> None:
        self.app = app
        self.start_path = f"{prefix}/chat-stream-job"
        self.path_prefix = self.start_path + "/"
        self.tokens = tokens
        self.read = read
        self.admit = admit
        self.body_model = body_model
        self.max_body = max_body
        self.refused = refused

    def _user(self, scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        return None

    def _poll(self, scope: Scope) -> tuple[str, str, int, float, bool] | None:
        """(job id, user, since, wait, content) of a well-formed poll, else None (FastAPI
        answers it)."""
        job_id = scope["path"][len(self.path_prefix) :]
        if not _JOB_ID.fullmatch(job_id):
            return None
        user = self._user(scope)
        if user is None:
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
                    await self._answer(scope, receive, send, self.read(*poll))
                    return
            elif method == "POST" and path == self.start_path and self._json_post(scope):
                await self._start(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _start(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        user = self._user(scope)
        body: Any = None
        if user is not None and len(raw) <= self.max_body:
            try:
                body = self.body_model.model_validate_json(raw)
            except ValidationError:
                body = None
        if body is None or user is None:  # FastAPI answers it (401, 413, 422) from the same bytes
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": raw, "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        await self._answer(scope, receive, send, self.admit(body, user))

    async def _answer(self, scope: Scope, receive: Receive, send: Send, result: Awaitable[Any]) -> None:
        try:
            answer = await result
        except StoreUnavailable as exc:
            log.error("job store unavailable: %s", exc)
            body, status = json.dumps({"detail": STORE_DOWN, "field": None}).encode(), 503
        except self.refused as exc:
            response = getattr(exc, "response", None)
            if response is not None:
                await response(scope, receive, send)
                return
            problem = {"detail": getattr(exc, "message", str(exc)), "field": getattr(exc, "field", None)}
            body, status = json.dumps(problem, ensure_ascii=False).encode(), int(getattr(exc, "status", 400))
        else:
            body = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()
            status = 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
