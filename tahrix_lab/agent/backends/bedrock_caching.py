"""Bedrock prompt caching as data: which model families cache, and where the cache points go.

Bedrock caches the prompt prefix up to each ``cachePoint`` block for five
minutes (refreshed on every hit); later requests that start with the same
prefix read it at about a tenth of the input price (Claude; Nova a quarter),
and writing it costs a little more than input (Claude) or the same (Nova).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Caching:
    """How a model family takes Bedrock prompt caching (``cachePoint`` blocks)."""

    tools: bool = True  # a cache point may close toolConfig.tools (Claude); Nova: system and messages only
    # Bedrock counts a cache point only when this many tokens precede it since the
    # previous counted one ("Cache checkpoints": 1,024 for Sonnet, 2,048/4,096 for Haiku).
    min_tokens: int = 1024


# Bedrock's documented limit of cache points in one request (tools, system and messages together).
MAX_CACHE_POINTS = 4
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
# Cross-region inference-profile prefixes: "us.anthropic.claude-…" caches like "anthropic.claude-…".
GEO_PREFIXES = frozenset({"us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"})
# Foundation-model id prefix -> caching, for the families Bedrock caches for. An
# allow-list: a model missing here gets no cache points (a request it would refuse).
NOVA = Caching(tools=False, min_tokens=1000)
CACHING: tuple[tuple[str, Caching], ...] = (
    ("anthropic.claude-3-5-haiku", Caching(min_tokens=2048)),
    ("anthropic.claude-3-7-sonnet", Caching()),
    ("anthropic.claude-sonnet-4", Caching()),  # 4, 4.5, 4.6
    ("anthropic.claude-opus-4", Caching()),  # 4, 4.1, 4.5, 4.6
    ("anthropic.claude-haiku-4", Caching(min_tokens=4096)),  # 4.5
    ("amazon.nova-micro", NOVA),
    ("amazon.nova-lite", NOVA),
    ("amazon.nova-pro", NOVA),
    ("amazon.nova-premier", NOVA),
    ("amazon.nova-2-lite", NOVA),
)


def base_model_id(model: str) -> str:
    """``anthropic.claude-…`` from a model id, a cross-region inference-profile
    id (``us.``/``eu.``/``apac.``/``global.`` …) or either's ARN."""
    bare = model.rsplit("/", 1)[-1].lower()
    head, dot, rest = bare.partition(".")
    return rest if dot and head in GEO_PREFIXES else bare


def caching_for(model: str) -> Caching | None:
    """How ``model`` takes cache points, or ``None`` when Bedrock does not cache for it."""
    base = base_model_id(model)
    for prefix, caching in CACHING:
        if base.startswith(prefix):
            return caching
    return None


def estimated_tokens(blocks: list[Any]) -> int:
    """About four characters of JSON a token. Real tokenizers give JSON, hashes and
    addresses more tokens than that, so the estimate errs low: a point it takes
    to clear the minimum does clear it."""
    return sum(len(json.dumps(b, ensure_ascii=False)) for b in blocks) // 4


def add_cache_points(request: dict[str, Any], caching: Caching) -> None:
    """Mark the prefixes Bedrock should cache, at most ``MAX_CACHE_POINTS``.

    Bedrock reads a prompt as tools, then system, then messages, caches the
    prefix up to each cache point, and counts a point only when at least the
    family's minimum tokens precede it since the previous counted point. The
    candidates are the ends of the tool specs (where the family allows it), of
    the system prompt and of every user turn. Scanning from the start, a
    candidate becomes an anchor when it clears the minimum since the previous
    anchor. Anchors depend only on the prompt before them, so every later call
    of the session picks the same ones: the anchor a call wrote last is among
    the next call's, which reads it back. A request gets the first anchor (the
    static prefix, shared by the sessions with the same tools and system
    prompt) and the last three (the previous calls' writes, and this call's)."""
    sections: list[tuple[list[Any], bool]] = []  # (blocks, may close with a cache point)
    tools = request.get("toolConfig", {}).get("tools")
    if tools:
        sections.append((tools, caching.tools))
    if request.get("system"):
        sections.append((request["system"], True))
    for message in request["messages"]:
        sections.append((message["content"], message["role"] == "user"))
    anchors: list[list[Any]] = []
    since = 0
    for blocks, candidate in sections:
        since += estimated_tokens(blocks)
        if candidate and since >= caching.min_tokens:
            anchors.append(blocks)
            since = 0
    chosen = anchors[:1] + anchors[1:][-(MAX_CACHE_POINTS - 1) :]
    for blocks in chosen:
        blocks.append(dict(CACHE_POINT))
