"""Bedrock prompt caching as data: which model families cache, and where the cache points go.

Bedrock caches the prompt prefix up to each ``cachePoint`` block for five
minutes (refreshed on every hit); later requests that start with the same
prefix read it at about a tenth of the input price (Claude; Nova a quarter),
and writing it costs a little more than input (Claude) or the same (Nova).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Caching:
    """How a model family takes Bedrock prompt caching (``cachePoint`` blocks)."""

    tools: bool = True  # a cache point may close toolConfig.tools (Claude); Nova: system and messages only


# Bedrock's documented limit of cache points in one request (tools, system and messages together).
MAX_CACHE_POINTS = 4
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
# Cross-region inference-profile prefixes: "us.anthropic.claude-…" caches like "anthropic.claude-…".
GEO_PREFIXES = frozenset({"us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"})
# Foundation-model id prefix -> caching, for the families Bedrock caches for. An
# allow-list: a model missing here gets no cache points (a request it would refuse).
CACHING: tuple[tuple[str, Caching], ...] = (
    ("anthropic.claude-3-5-haiku", Caching()),
    ("anthropic.claude-3-7-sonnet", Caching()),
    ("anthropic.claude-sonnet-4", Caching()),  # 4, 4.5, 4.6
    ("anthropic.claude-opus-4", Caching()),  # 4, 4.1, 4.5, 4.6
    ("anthropic.claude-haiku-4", Caching()),  # 4.5
    ("amazon.nova-micro", Caching(tools=False)),
    ("amazon.nova-lite", Caching(tools=False)),
    ("amazon.nova-pro", Caching(tools=False)),
    ("amazon.nova-premier", Caching(tools=False)),
    ("amazon.nova-2-lite", Caching(tools=False)),
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


def add_cache_points(request: dict[str, Any], caching: Caching) -> None:
    """Mark the prefixes Bedrock should cache, at most ``MAX_CACHE_POINTS``.

    Bedrock reads a prompt as tools, then system, then messages, and caches the
    prefix up to each cache point. The points go after the tool specs (where the
    family allows it), after the system prompt, and at the end of the last two
    user turns: the earlier one ends what the previous call sent (read back
    now), the latest one ends this call's prompt (read back on the next call).
    A point before the model's minimum prefix is ignored by Bedrock, not refused."""
    used = 0
    tools = request.get("toolConfig", {}).get("tools")
    if tools and caching.tools:
        tools.append(dict(CACHE_POINT))
        used += 1
    if request.get("system"):
        request["system"].append(dict(CACHE_POINT))
        used += 1
    room = MAX_CACHE_POINTS - used
    users = [m for m in request["messages"] if m["role"] == "user"]
    for message in users[-min(2, room) :] if room > 0 else []:
        message["content"].append(dict(CACHE_POINT))
