"""One scripting language for three backends: the fake, OpenAI over SSE, Bedrock over event-stream.

A script is a list of turns (one per model call). A turn is a list of
neutral events, optionally ending in ``Drop()`` (the connection dies after
what came before), or a single ``Fail(status)`` (the provider refuses the
request before any event). Each harness turns the script into what its
backend really receives: for OpenAI and Bedrock, bytes from a loopback
server through the real SDK.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.config
from wire import eventstream, sse
from wire.server import Reply, WireServer

from tahrix_lab.agent.backends.base import Backend, Event
from tahrix_lab.agent.backends.bedrock import BedrockBackend
from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.backends.openai import OpenAIBackend
from tahrix_lab.agent.errors import BackendError


@dataclass(frozen=True)
class Fail:
    status: int
    retry_after: float | None = None


@dataclass(frozen=True)
class Drop:
    pass


Item = Event | Drop
Turn = Sequence[Item] | Fail


@dataclass
class Harness:
    name: str
    family: str
    signatures: bool  # the family round-trips reasoning signatures
    make: Callable[[list[Turn]], Backend]
    # wire request bodies sent so far (the fake records neutral requests)
    sent: Callable[[], list[Any]] = field(default=list)
    # raw request bodies (bytes) as they arrived on the wire
    raw: Callable[[], list[bytes]] = field(default=list)


def fake_script(turns: list[Turn]) -> list[Any]:
    script: list[Any] = []
    for turn in turns:
        if isinstance(turn, Fail):
            script.append(
                [
                    BackendError(
                        f"HTTP {turn.status}",
                        status=turn.status,
                        retryable=turn.status >= 429,
                        retry_after=turn.retry_after,
                    )
                ]
            )
            continue
        items: list[Any] = []
        for item in turn:
            if isinstance(item, Drop):
                items.append(BackendError("connection dropped", retryable=True))
            else:
                items.append(item)
        script.append(items)
    return script


@contextlib.contextmanager
def fake_harness() -> Iterator[Harness]:
    holder: dict[str, FakeBackend] = {}

    def make(turns: list[Turn]) -> Backend:
        holder["b"] = FakeBackend(fake_script(turns))
        return holder["b"]

    yield Harness("fake", "fake", True, make, lambda: holder["b"].requests if "b" in holder else [])


def _wire_replies(
    turns: list[Turn], build: Callable[[Sequence[Any]], Reply], fail: Callable[[Fail], Reply]
) -> list[Reply]:
    replies = []
    for turn in turns:
        if isinstance(turn, Fail):
            replies.append(fail(turn))
            continue
        events = [i for i in turn if not isinstance(i, Drop)]
        reply = build(events)
        if any(isinstance(i, Drop) for i in turn):
            # keep the opening and the content events, cut before the finish
            reply.drop_after = 1 + sum(1 for e in events if e["kind"] != "done")
        replies.append(reply)
    return replies


def _retry_headers(turn: Fail) -> dict[str, str]:
    return {"retry-after": f"{turn.retry_after:g}"} if turn.retry_after is not None else {}


@contextlib.contextmanager
def openai_harness() -> Iterator[Harness]:
    with WireServer() as server:
        backends: list[OpenAIBackend] = []

        def fail(turn: Fail) -> Reply:
            body = {"error": {"message": f"scripted {turn.status}", "type": "server_error", "code": None}}
            return Reply.json(turn.status, body, _retry_headers(turn))

        def make(turns: list[Turn]) -> Backend:
            server.add(*_wire_replies(turns, lambda ev: sse.turn_reply(ev), fail))
            backend = OpenAIBackend(base_url=server.url + "/v1", api_key="test-key")
            backends.append(backend)
            return backend

        try:
            yield Harness(
                "openai",
                "openai",
                False,
                make,
                lambda: [r.json() for r in server.requests],
                lambda: [r.body for r in server.requests],
            )
        finally:
            for b in backends:
                b.client.close()


def bedrock_client(url: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )


BEDROCK_ERROR_TYPES = {
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
    400: "ValidationException",
}


@contextlib.contextmanager
def bedrock_harness() -> Iterator[Harness]:
    with WireServer() as server:
        clients: list[Any] = []

        def fail(turn: Fail) -> Reply:
            headers = {
                "x-amzn-errortype": BEDROCK_ERROR_TYPES.get(turn.status, "ValidationException"),
                **_retry_headers(turn),
            }
            return Reply.json(turn.status, {"message": f"scripted {turn.status}"}, headers)

        def make(turns: list[Turn]) -> Backend:
            server.add(*_wire_replies(turns, lambda ev: eventstream.turn_reply(ev), fail))
            client = bedrock_client(server.url)
            clients.append(client)
            return BedrockBackend(client=client)

        try:
            yield Harness(
                "bedrock",
                "bedrock",
                True,
                make,
                lambda: [r.json() for r in server.requests],
                lambda: [r.body for r in server.requests],
            )
        finally:
            for c in clients:
                c.close()


HARNESSES = {"fake": fake_harness, "openai": openai_harness, "bedrock": bedrock_harness}


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
