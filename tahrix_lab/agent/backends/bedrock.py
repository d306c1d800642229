"""Amazon Bedrock through boto3 ``bedrock-runtime`` ``converse_stream``.

The module-level functions are the two translations and can be tested without
a client; their names match the OpenAI adapter's:

    as_wire_messages / as_wire_tools / as_wire_request   neutral -> wire
    map_stream / map_stop_reason / map_usage              wire -> events
    map_error                                             any failure -> BackendError
                                                          (both in bedrock_events)

``BedrockBackend`` only sets up the client (botocore retries off: the loop
retries) and runs a request through them.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tahrix_lab.agent.backends.base import (
    Event,
    ToolSpec,
    stream_in_thread,
    tool_result_text,
)
from tahrix_lab.agent.backends.bedrock_caching import add_cache_points, caching_for
from tahrix_lab.agent.backends.bedrock_events import ERROR_CODES as ERROR_CODES  # re-exported
from tahrix_lab.agent.backends.bedrock_events import STOP_REASONS as STOP_REASONS  # re-exported
from tahrix_lab.agent.backends.bedrock_events import map_error, map_stream
from tahrix_lab.agent.backends.bedrock_events import map_stop_reason as map_stop_reason  # re-exported
from tahrix_lab.agent.backends.bedrock_events import map_usage as map_usage  # re-exported
from tahrix_lab.agent.backends.media import Media, load_media
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.transcript import Message, Part

log = logging.getLogger(__name__)

FAMILY = "bedrock"


NEUTRAL_KEYS = frozenset({"max_tokens", "temperature", "top_p", "stop_sequences", "prompt_caching"})
BEDROCK_KEYS = frozenset({"additional_model_request_fields", "guardrail_config", "performance_config"})
OTHER_FAMILY_KEYS = frozenset(
    {"extra_body", "extra_headers", "reasoning_effort", "seed", "parallel_tool_calls"}
)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What differs between models behind Converse, as data."""

    tool_result_status: bool = True  # accepts toolResult.status ("error")
    tool_result_format: Literal["json", "text"] = "json"


# model-id fragment -> profile; first match wins (ids look like
# "us.anthropic.claude-…", "amazon.nova-micro-v1:0", or a foundation-model ARN)
PROFILES: tuple[tuple[str, ModelProfile], ...] = (
    ("anthropic.", ModelProfile()),
    ("amazon.nova", ModelProfile()),
    ("meta.", ModelProfile(tool_result_status=False, tool_result_format="text")),
    ("mistral.", ModelProfile(tool_result_status=False, tool_result_format="text")),
    ("deepseek.", ModelProfile(tool_result_status=False, tool_result_format="text")),
)
DEFAULT_PROFILE = ModelProfile(tool_result_status=False)

Loader = Callable[[Part], Media]


def profile_for(model: str) -> ModelProfile:
    lowered = model.lower()
    for fragment, profile in PROFILES:
        if fragment in lowered:
            return profile
    return DEFAULT_PROFILE


def wire_tool_id(tool_use_id: str | None) -> str:
    """Bedrock accepts ``[A-Za-z0-9_-]{1,64}``; other families' ids are mapped
    deterministically, so a replay sends the same id again."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", tool_use_id or "")[:64]
    return cleaned or "tool"


# -- neutral -> wire ------------------------------------------------------------
def as_wire_system(system: str | None) -> list[dict[str, Any]]:
    return [{"text": system}] if system else []


def as_wire_messages(
    messages: Sequence[Message],
    *,
    model: str = "",
    load: Loader = load_media,
) -> list[dict[str, Any]]:
    """Converse ``messages``: user/assistant strictly alternating.

    Tool results go as ``toolResult`` blocks in a user message; consecutive
    messages of the same role are merged (tool results and any follow-up text
    travel together). Reasoning signatures and redacted reasoning go back only
    when this family produced them; reasoning from another family is dropped."""
    profile = profile_for(model)
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "assistant":
            role = "assistant"
            blocks = _assistant_blocks(msg, same_family=msg.backend == FAMILY)
        elif msg.role == "tool":
            role = "user"
            blocks = [_tool_result_block(p, profile) for p in msg.parts if p.type == "tool_result"]
        else:
            role = "user"
            blocks = _user_blocks(msg.parts, load)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _assistant_blocks(msg: Message, *, same_family: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in msg.parts:
        if part.type == "text":
            if part.text and part.text.strip():
                blocks.append({"text": part.text})
        elif part.type == "reasoning":
            block = _reasoning_block(part) if same_family else None
            if block is not None:
                blocks.append(block)
        elif part.type == "tool_use":
            blocks.append(
                {
                    "toolUse": {
                        "toolUseId": wire_tool_id(part.tool_use_id),
                        "name": part.tool_name or "",
                        "input": part.tool_input if part.tool_input is not None else {},
                    }
                }
            )
    return blocks


def _reasoning_block(part: Part) -> dict[str, Any] | None:
    """Signed or redacted reasoning, exactly as received; unsigned reasoning
    cannot be verified by the model and is not sent."""
    if part.is_redacted_reasoning:
        try:
            return {"reasoningContent": {"redactedContent": base64.b64decode(part.signature or "")}}
        except (binascii.Error, ValueError):
            log.warning("dropping redacted reasoning whose data is not base64")
            return None
    if part.text is not None and part.signature:
        return {"reasoningContent": {"reasoningText": {"text": part.text, "signature": part.signature}}}
    return None


def _tool_result_block(part: Part, profile: ModelProfile) -> dict[str, Any]:
    result = part.tool_result if part.tool_result is not None else {}
    content = (
        [{"json": result}] if profile.tool_result_format == "json" else [{"text": tool_result_text(result)}]
    )
    block: dict[str, Any] = {"toolUseId": wire_tool_id(part.tool_use_id), "content": content}
    if part.tool_status == "error" and profile.tool_result_status:
        block["status"] = "error"
    return {"toolResult": block}


def _user_blocks(parts: Sequence[Part], load: Loader) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text":
            if part.text and part.text.strip():
                blocks.append({"text": part.text})
        elif part.type in ("image", "document"):
            blocks.append(_media_block(load(part)))
    return blocks


def _media_block(media: Media) -> dict[str, Any]:
    if media.kind == "image":
        return {"image": {"format": media.format, "source": {"bytes": media.data}}}
    return {"document": {"format": media.format, "name": media.name, "source": {"bytes": media.data}}}


def as_wire_tools(tools: Sequence[ToolSpec], messages: Sequence[Message] = ()) -> list[dict[str, Any]]:
    """``toolConfig.tools``. Bedrock refuses a history with tool blocks and no
    ``toolConfig``, so tools used earlier but no longer offered get a stub spec."""
    specs = [_tool_spec(t["name"], t["description"], t["parameters"]) for t in tools]
    offered = {t["name"] for t in tools}
    for msg in messages:
        for part in msg.parts:
            if part.type == "tool_use" and part.tool_name and part.tool_name not in offered:
                offered.add(part.tool_name)
                specs.append(_tool_spec(part.tool_name, "No longer available.", {"type": "object"}))
    return specs


def _tool_spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "inputSchema": {"json": parameters}}
    if description:
        spec["description"] = description
    return {"toolSpec": spec}


def as_wire_request(
    *,
    system: str | None,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    model: str,
    inference: dict[str, Any] | None,
    load: Loader = load_media,
    profile_model: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.converse_stream``. ``profile_model`` is
    the model id to choose quirks by when ``model`` is an opaque profile ARN.
    Cache points are added for families that cache, unless
    ``inference["prompt_caching"]`` is false."""
    inference = dict(inference or {})
    unknown = set(inference) - NEUTRAL_KEYS - BEDROCK_KEYS - OTHER_FAMILY_KEYS
    if unknown:
        raise ConfigurationError(
            f"Unknown inference setting(s) {sorted(unknown)} for the bedrock backend; "
            f"known: {sorted(NEUTRAL_KEYS | BEDROCK_KEYS)}."
        )
    request: dict[str, Any] = {
        "modelId": model,
        "messages": as_wire_messages(messages, model=profile_model or model, load=load),
    }
    system_blocks = as_wire_system(system)
    if system_blocks:
        request["system"] = system_blocks
    tool_specs = as_wire_tools(tools, messages)
    if tool_specs:
        request["toolConfig"] = {"tools": tool_specs}
    config: dict[str, Any] = {}
    for key, wire_key in (("max_tokens", "maxTokens"), ("temperature", "temperature"), ("top_p", "topP")):
        if inference.get(key) is not None:
            config[wire_key] = inference[key]
    if inference.get("stop_sequences"):
        config["stopSequences"] = list(inference["stop_sequences"])
    if config:
        request["inferenceConfig"] = config
    for key, wire_key in (
        ("additional_model_request_fields", "additionalModelRequestFields"),
        ("guardrail_config", "guardrailConfig"),
        ("performance_config", "performanceConfig"),
    ):
        if inference.get(key) is not None:
            request[wire_key] = inference[key]
    caching = caching_for(profile_model or model)
    if caching is not None and inference.get("prompt_caching", True):
        add_cache_points(request, caching)
    return request


# -- the client -----------------------------------------------------------------
class BedrockBackend:
    """A ``Backend`` for Amazon Bedrock's Converse API.

    ``client`` is a boto3 ``bedrock-runtime`` client used as it is; otherwise
    one is made from ``region``/``profile``/``endpoint_url`` and the standard
    ``AWS_*`` configuration, with botocore's retries off. ``model_aliases``
    maps application-inference-profile ARNs to model ids (for quirks and prices)."""

    name = FAMILY

    def __init__(
        self,
        client: Any = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        *,
        profile: str | None = None,
        model_aliases: Mapping[str, str] | None = None,
        read_timeout: float = 120.0,
        connect_timeout: float = 10.0,
        load: Loader = load_media,
    ) -> None:
        self.load = load
        self.model_aliases = dict(model_aliases or {})
        if client is not None:
            self.client = client
            return
        import boto3
        import botocore.config
        import botocore.exceptions

        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        try:
            session = boto3.session.Session(profile_name=profile, region_name=region)
        except botocore.exceptions.ProfileNotFound as exc:
            raise ConfigurationError(
                f"The AWS profile {profile!r} does not exist: fix AWS_PROFILE or ~/.aws/config."
            ) from exc
        if session.region_name is None:
            raise ConfigurationError(
                "The bedrock backend needs an AWS region: set AWS_REGION (or AWS_DEFAULT_REGION)."
            )
        if session.get_credentials() is None:
            raise ConfigurationError(
                "The bedrock backend found no AWS credentials: set AWS_PROFILE, "
                "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
            )
        config = botocore.config.Config(
            retries={"total_max_attempts": 1, "mode": "standard"},  # the loop retries
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
        )
        self.client = session.client("bedrock-runtime", endpoint_url=endpoint_url, config=config)

    def stream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> Iterator[Event]:
        request = as_wire_request(
            system=system,
            messages=messages,
            tools=tools,
            model=model,
            inference=inference,
            load=self.load,
            profile_model=self.model_aliases.get(model),
        )
        try:
            response = self.client.converse_stream(**request)
            events = response["stream"]
        except Exception as exc:
            raise map_error(exc) from exc
        try:
            yield from map_stream(events)
        except Exception as exc:
            raise map_error(exc) from exc
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def astream(
        self,
        *,
        system: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        model: str,
        inference: dict[str, Any] | None,
    ) -> AsyncIterator[Event]:
        """``stream`` for an event loop: boto3 blocks, so each call is read on a thread of its own."""
        return stream_in_thread(
            lambda: self.stream(
                system=system, messages=messages, tools=tools, model=model, inference=inference
            )
        )
