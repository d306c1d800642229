"""A loopback ConverseStream model that keeps a prompt cache by Bedrock's documented rules.

Use an instance as a ``WireServer`` reply source. Each request is read as
Bedrock reads a prompt: ``toolConfig.tools``, then ``system``, then the
messages, with ``cachePoint`` blocks marking prefixes to cache. The rules
modelled (Amazon Bedrock user guide, "Prompt caching"):

- at most 4 cache points per request; more is a ``ValidationException``;
- only the model families that cache take cache points (Claude: tools,
  system and messages; Nova: system and messages only); a cache point
  anywhere else is a ``ValidationException`` (an assumption: the guide only
  lists where they are supported);
- a cache point counts only when the prompt since the previous counting point
  holds at least the model's minimum tokens (1,024 for Claude Sonnet and
  Nova's 1K, 2,048 for Claude 3.5 Haiku, 4,096 for Claude Haiku 4.5); below
  it the request succeeds and nothing is cached;
- the longest counting prefix already cached (and not expired) is read; every
  counting prefix after it is written; the rest is plain input;
- an entry lives 5 minutes from its last write or read.

Not modelled: Claude's automatic look-back over the ~20 blocks before a cache
point (without it the savings measured here are a lower bound), and the
1-hour TTL. Tokens are estimated at about four characters each of the
block's JSON (the same stand-in the fake backend uses)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from tahrix_lab.agent.backends.fake import estimate_tokens

from . import eventstream
from .server import Recorded, Reply

MAX_POINTS = 4
TTL_SECONDS = 300.0


@dataclass(frozen=True)
class Rule:
    min_tokens: int
    tools: bool  # toolConfig.tools takes a cache point


# foundation-model id prefix (geo prefix removed) -> documented limits; first match wins
RULES: tuple[tuple[str, Rule], ...] = (
    ("anthropic.claude-3-5-haiku", Rule(2048, True)),
    ("anthropic.claude-haiku-4", Rule(4096, True)),
    ("anthropic.claude-3-7-sonnet", Rule(1024, True)),
    ("anthropic.claude-sonnet-4", Rule(1024, True)),
    ("anthropic.claude-opus-4", Rule(1024, True)),
    ("amazon.nova-", Rule(1000, False)),
)
GEO = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca.")

Respond = Callable[[dict[str, Any], str], Sequence[dict[str, Any]]]


class Refused(Exception):
    pass


@dataclass(frozen=True)
class Point:
    where: str  # "tools", "system" or "messages[i]"
    tokens: int  # prompt tokens before it
    digest: str  # identity of the prefix before it
    counts: bool  # met the minimum since the previous counting point


@dataclass
class Account:
    """What one request read, wrote and paid as plain input."""

    model: str
    points: list[Point]
    total: int
    read: int = 0
    write: int = 0

    @property
    def fresh(self) -> int:
        return self.total - self.read - self.write


def rule_for(model: str) -> Rule | None:
    bare = model.rsplit("/", 1)[-1].lower()
    for geo in GEO:
        if bare.startswith(geo):
            bare = bare[len(geo) :]
            break
    return next((rule for prefix, rule in RULES if bare.startswith(prefix)), None)


def block_tokens(block: Any) -> int:
    return estimate_tokens(json.dumps(block, sort_keys=True, ensure_ascii=False))


def read_prompt(model: str, body: dict[str, Any]) -> Account:
    """The prompt's total tokens and its cache points, checked against the rules."""
    rule = rule_for(model)
    digest = hashlib.sha256(model.encode())
    total = 0
    points: list[Point] = []
    since = 0  # tokens since the last counting point
    sections: list[tuple[str, list[Any]]] = [("tools", (body.get("toolConfig") or {}).get("tools") or [])]
    sections.append(("system", body.get("system") or []))
    for i, message in enumerate(body.get("messages") or []):
        sections.append((f"messages[{i}]", [{"role": message["role"]}, *message.get("content", [])]))
    for where, blocks in sections:
        for block in blocks:
            if isinstance(block, dict) and "cachePoint" in block:
                if rule is None:
                    raise Refused(
                        f"The model {model} does not support prompt caching (cachePoint in {where})."
                    )
                if where == "tools" and not rule.tools:
                    raise Refused(f"The model {model} does not accept a cachePoint in toolConfig.tools.")
                counts = rule is not None and since >= rule.min_tokens
                points.append(Point(where, total, digest.hexdigest(), counts))
                if counts:
                    since = 0
                continue
            digest.update(json.dumps([where.split("[")[0], block], sort_keys=True).encode())
            n = block_tokens(block)
            total += n
            since += n
    if len(points) > MAX_POINTS:
        raise Refused(f"A request may hold at most {MAX_POINTS} cache points; this one has {len(points)}.")
    return Account(model, points, total)


@dataclass
class CachingConverse:
    """The reply source: ``respond(body, model)`` gives the model's events for a
    request (text, tool_use); usage comes from the prompt and the cache.
    ``clock`` is injectable so a test can pass the 5 minutes without waiting."""

    respond: Respond
    clock: Callable[[], float] = time.monotonic
    cache: dict[str, float] = field(default_factory=dict)  # prefix digest -> expiry
    accounts: list[Account] = field(default_factory=list)

    def __call__(self, request: Recorded) -> Reply:
        model = unquote(request.path.split("/")[2])
        body = request.json()
        try:
            account = self.account(model, body)
        except Refused as exc:
            return Reply.json(400, {"message": str(exc)}, {"x-amzn-errortype": "ValidationException"})
        events = [dict(e) for e in self.respond(body, model)]
        out = sum(
            block_tokens(e.get("input") if e["kind"] == "tool_use" else e.get("text", "")) for e in events
        )
        cached = bool(account.points)
        usage = {
            "input_tokens": account.total,
            "output_tokens": out,
            "cache_read_tokens": account.read if cached else None,
            "cache_write_tokens": account.write if cached else None,
        }
        stop = "tool_use" if any(e["kind"] == "tool_use" for e in events) else "end_turn"
        return eventstream.turn_reply([*events, {"kind": "done", "stop_reason": stop, "usage": usage}])

    def account(self, model: str, body: dict[str, Any]) -> Account:
        account = read_prompt(model, body)
        now = self.clock()
        counting = [p for p in account.points if p.counts]
        hit = max(
            (i for i, p in enumerate(counting) if self.cache.get(p.digest, -1.0) > now),
            default=-1,
        )
        if hit >= 0:
            account.read = counting[hit].tokens
            for p in counting[: hit + 1]:  # a hit refreshes the entry's five minutes
                if p.digest in self.cache:
                    self.cache[p.digest] = now + TTL_SECONDS
        for p in counting[hit + 1 :]:
            self.cache[p.digest] = now + TTL_SECONDS
        if len(counting) > hit + 1:
            account.write = counting[-1].tokens - account.read
        self.accounts.append(account)
        return account


def scripted(turns: Sequence[Sequence[dict[str, Any]]]) -> Respond:
    """A respond function playing ``turns`` in order, one per request."""
    queue = list(turns)

    def respond(body: dict[str, Any], model: str) -> Sequence[dict[str, Any]]:
        if not queue:
            raise AssertionError("the caching model has no scripted turn left")
        return queue.pop(0)

    return respond


@dataclass
class PrefixCachingChat:
    """A Chat Completions reply source with OpenAI's automatic prefix cache:
    a request whose body starts with the same bytes as an earlier one of the
    same ``prompt_cache_key`` reads that common prefix, counted in 128-token
    steps from 1,024 tokens up (OpenAI's documented granularity)."""

    respond: Respond
    seen: dict[str | None, list[bytes]] = field(default_factory=dict)
    cached: list[int] = field(default_factory=list)

    def __call__(self, request: Recorded) -> Reply:
        from . import sse

        body = request.json()
        key = body.get("prompt_cache_key")
        common = max((_common_prefix(request.body, old) for old in self.seen.get(key, [])), default=0)
        tokens = estimate_tokens("x" * common)
        cached = 0 if tokens < 1024 else tokens - (tokens - 1024) % 128
        self.seen.setdefault(key, []).append(request.body)
        self.cached.append(cached)
        events = [dict(e) for e in self.respond(body, body["model"])]
        usage = {
            "input_tokens": estimate_tokens(request.body.decode()),
            "output_tokens": 1,
            "cache_read_tokens": cached,
        }
        stop = "tool_use" if any(e["kind"] == "tool_use" for e in events) else "end_turn"
        return sse.turn_reply([*events, {"kind": "done", "stop_reason": stop, "usage": usage}])


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)
