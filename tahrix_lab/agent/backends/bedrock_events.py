"""Converse stream events and botocore failures -> the normalised events and
``BackendError`` (the Bedrock adapter's second translation)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tahrix_lab.agent.backends.base import DoneEvent, Event, ToolUseEvent, UsageDict, parse_tool_arguments
from tahrix_lab.agent.backends.headers import parse_retry_after
from tahrix_lab.agent.errors import BackendError
from tahrix_lab.agent.transcript import StopReason

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}

# error code (lower-cased; stream exceptions are camelCase) -> (HTTP status, retryable)
ERROR_CODES: dict[str, tuple[int, bool]] = {
    "throttlingexception": (429, True),
    "toomanyrequestsexception": (429, True),
    "serviceunavailableexception": (503, True),
    "internalserverexception": (500, True),
    "modelstreamerrorexception": (424, True),
    "modeltimeoutexception": (408, True),
    "modelnotreadyexception": (429, True),
    "validationexception": (400, False),
    "accessdeniedexception": (403, False),
    "unrecognizedclientexception": (403, False),
    "expiredtokenexception": (403, False),
    "resourcenotfoundexception": (404, False),
    "modelerrorexception": (424, False),
    "servicequotaexceededexception": (400, False),
}


# -- wire -> events -------------------------------------------------------------
def map_stop_reason(raw: str | None) -> StopReason:
    return STOP_REASONS.get(raw or "", "other")


def map_usage(usage: Mapping[str, Any] | None) -> UsageDict | None:
    """Bedrock's ``inputTokens`` excludes cache reads and writes; the engine's
    ``input_tokens`` includes them."""
    if not usage:
        return None
    read = usage.get("cacheReadInputTokens")
    write = usage.get("cacheWriteInputTokens")
    fresh = usage.get("inputTokens")
    return {
        "input_tokens": None if fresh is None else fresh + (read or 0) + (write or 0),
        "output_tokens": usage.get("outputTokens"),
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "reasoning_tokens": None,
    }


class _ToolUse:
    __slots__ = ("args", "id", "name")

    def __init__(self, tool_use_id: str, name: str) -> None:
        self.id = tool_use_id
        self.name = name
        self.args: list[str] = []

    def event(self) -> ToolUseEvent:
        raw = "".join(self.args)
        parsed = parse_tool_arguments(raw)
        return {"kind": "tool_use", "id": self.id, "name": self.name, "input": parsed, "raw": raw}


def map_stream(events: Iterable[Mapping[str, Any]]) -> Iterator[Event]:
    """Events from ConverseStream's parsed events, ending with one ``done``.

    A tool call is gathered from its ``contentBlockStart`` and input fragments
    and emitted at ``contentBlockStop``. A stream without ``messageStop`` was
    cut short: that is an error."""
    tools: dict[int, _ToolUse] = {}
    stop: str | None = None
    usage: UsageDict | None = None
    latency: float | None = None
    for event in events:
        block = event.get("contentBlockDelta")
        if block is not None:
            delta = block["delta"]
            text = delta.get("text")
            if text is not None:
                if text:
                    yield {"kind": "text", "text": text}
                continue
            fragment = delta.get("toolUse")
            if fragment is not None:
                index = block.get("contentBlockIndex", 0)
                if index not in tools:
                    raise BackendError(
                        "Bedrock sent tool input for a block it never started.", retryable=True
                    )
                tools[index].args.append(fragment.get("input", ""))
                continue
            thought = delta.get("reasoningContent")
            if thought is not None:
                if thought.get("text"):
                    yield {"kind": "reasoning", "text": thought["text"]}
                if thought.get("signature"):
                    yield {"kind": "reasoning", "text": "", "signature": thought["signature"]}
                if thought.get("redactedContent") is not None:
                    redacted = base64.b64encode(thought["redactedContent"]).decode("ascii")
                    yield {"kind": "reasoning", "text": "", "redacted": redacted}
            continue
        start = event.get("contentBlockStart")
        if start is not None:
            use = start.get("start", {}).get("toolUse")
            if use is not None:
                tools[start.get("contentBlockIndex", 0)] = _ToolUse(use["toolUseId"], use["name"])
            continue
        end = event.get("contentBlockStop")
        if end is not None:
            finished = tools.pop(end.get("contentBlockIndex", 0), None)
            if finished is not None:
                yield finished.event()
            continue
        message_stop = event.get("messageStop")
        if message_stop is not None:
            stop = message_stop.get("stopReason")
            continue
        metadata = event.get("metadata")
        if metadata is not None:
            usage = map_usage(metadata.get("usage"))
            latency = metadata.get("metrics", {}).get("latencyMs")
    if stop is None:
        raise BackendError("Bedrock's stream ended before the model finished its answer.", retryable=True)
    for index in sorted(tools):
        yield tools.pop(index).event()
    done: DoneEvent = {
        "kind": "done",
        "stop_reason": map_stop_reason(stop),
        "raw_stop_reason": stop,
        "usage": usage,
    }
    if latency is not None:
        done["latency_ms"] = float(latency)
    yield done


# -- failures -------------------------------------------------------------------
def map_error(exc: BaseException) -> BackendError:
    """The one place where a botocore or transport failure becomes a ``BackendError``."""
    if isinstance(exc, BackendError):
        return exc
    import botocore.eventstream
    import botocore.exceptions
    import urllib3.exceptions

    if isinstance(exc, botocore.exceptions.ClientError):  # EventStreamError is one too
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "")
        meta = exc.response.get("ResponseMetadata", {})
        known = ERROR_CODES.get(code.lower())
        status = meta.get("HTTPStatusCode")
        if not isinstance(status, int) or status < 400:  # stream exceptions arrive inside an HTTP 200
            status = known[0] if known else None
        retryable = known[1] if known else (status is not None and (status == 429 or status >= 500))
        message = error.get("Message") or str(exc)
        where = (
            "Bedrock failed in its stream"
            if isinstance(exc, botocore.exceptions.EventStreamError)
            else "Bedrock refused the request"
        )
        return BackendError(
            f"{where}: {code or status} {message}",
            status=status,
            retryable=retryable,
            retry_after=parse_retry_after(meta.get("HTTPHeaders")),
            cause=exc,
        )
    if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError):
        return BackendError(
            "No AWS credentials were found: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.",
            status=401,
            cause=exc,
        )
    if isinstance(exc, botocore.exceptions.ParamValidationError):
        return BackendError(f"The Bedrock request was not valid: {exc}", status=400, cause=exc)
    if isinstance(
        exc,
        botocore.exceptions.ConnectionError
        | botocore.exceptions.HTTPClientError
        | botocore.exceptions.ResponseStreamingError,
    ):
        return BackendError(
            f"Could not reach Bedrock, or it dropped the connection: {exc}", retryable=True, cause=exc
        )
    if isinstance(exc, botocore.eventstream.ParserError):
        return BackendError(f"Bedrock sent a corrupt event-stream frame: {exc}", retryable=True, cause=exc)
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return BackendError(f"The connection to Bedrock failed: {exc}", retryable=True, cause=exc)
    if isinstance(exc, ValueError):
        return BackendError(f"Bedrock sent a malformed event: {exc}", retryable=True, cause=exc)
    return BackendError(f"The Bedrock request failed: {type(exc).__name__}: {exc}", cause=exc)
