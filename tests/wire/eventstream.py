"""AWS event-stream framing (as ConverseStream sends it), built from neutral events.

A frame: total length (u32), headers length (u32), CRC32 of those 8 bytes,
headers, payload, CRC32 of everything before it. Header values here are all
strings (type 7: u16 length + UTF-8)."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from .server import Reply

CONTENT_TYPE = "application/vnd.amazon.eventstream"
STOP_TO_BEDROCK = {"content_filter": "content_filtered"}


def encode_headers(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        n, v = name.encode(), value.encode()
        out += bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v
    return out


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    head = encode_headers(headers)
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, body: dict[str, Any]) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(body).encode())


def exception(exception_type: str, message: str) -> bytes:
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())


def bedrock_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Neutral usage -> Bedrock's (whose inputTokens exclude cache reads and writes)."""
    if not usage:
        return None
    read = usage.get("cache_read_tokens") or 0
    write = usage.get("cache_write_tokens") or 0
    out: dict[str, Any] = {
        "inputTokens": (usage.get("input_tokens") or 0) - read - write,
        "outputTokens": usage.get("output_tokens") or 0,
        "totalTokens": (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0),
    }
    if usage.get("cache_read_tokens") is not None:
        out["cacheReadInputTokens"] = read
    if usage.get("cache_write_tokens") is not None:
        out["cacheWriteInputTokens"] = write
    return out


def turn_frames(events: Sequence[dict[str, Any]], *, fragment: int = 7) -> list[bytes]:
    """Event-stream frames for one scripted model turn."""
    out = [event("messageStart", {"role": "assistant"})]
    index = 0
    open_kind: str | None = None
    stop = "end_turn"
    usage: dict[str, Any] | None = None
    saw_tool = False

    def close() -> None:
        nonlocal index, open_kind
        if open_kind is not None:
            out.append(event("contentBlockStop", {"contentBlockIndex": index}))
            index += 1
            open_kind = None

    for ev in events:
        kind = ev["kind"]
        if kind == "text":
            if open_kind != "text":
                close()
                open_kind = "text"
            out.append(
                event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": ev["text"]}})
            )
        elif kind == "reasoning":
            if "redacted" in ev:
                close()
                data = {"redactedContent": ev["redacted"]}  # base64 on the wire
                out.append(
                    event(
                        "contentBlockDelta", {"contentBlockIndex": index, "delta": {"reasoningContent": data}}
                    )
                )
                open_kind = "redacted"
                close()
                continue
            if open_kind != "reasoning":
                close()
                open_kind = "reasoning"
            if ev.get("text"):
                delta = {"reasoningContent": {"text": ev["text"]}}
                out.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
            if ev.get("signature"):
                delta = {"reasoningContent": {"signature": ev["signature"]}}
                out.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        elif kind == "tool_use":
            close()
            saw_tool = True
            raw = ev.get("raw", json.dumps(ev["input"]))
            start = {"toolUse": {"toolUseId": ev["id"], "name": ev["name"]}}
            out.append(event("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            for at in range(0, len(raw), fragment):
                delta = {"toolUse": {"input": raw[at : at + fragment]}}
                out.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
            open_kind = "tool"
            close()
        elif kind == "done":
            stop = STOP_TO_BEDROCK.get(ev["stop_reason"], ev["stop_reason"])
            usage = ev.get("usage")
    close()
    if not any(e["kind"] == "done" for e in events) and saw_tool:
        stop = "tool_use"
    out.append(event("messageStop", {"stopReason": stop}))
    wire_usage = bedrock_usage(usage)
    if wire_usage is not None:
        out.append(event("metadata", {"usage": wire_usage, "metrics": {"latencyMs": 42}}))
    return out


def turn_reply(events: Sequence[dict[str, Any]], **kwargs: Any) -> Reply:
    return Reply(chunks=turn_frames(events, **kwargs), content_type=CONTENT_TYPE)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_frames(data: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Split event-stream bytes into (string headers, payload), checking both CRCs."""
    out = []
    at = 0
    while at < len(data):
        total, head_len = struct.unpack(">II", data[at : at + 8])
        (prelude_crc,) = struct.unpack(">I", data[at + 8 : at + 12])
        assert zlib.crc32(data[at : at + 8]) == prelude_crc, "prelude CRC"
        message = data[at : at + total]
        (message_crc,) = struct.unpack(">I", message[-4:])
        assert zlib.crc32(message[:-4]) == message_crc, "message CRC"
        headers: dict[str, str] = {}
        h = message[12 : 12 + head_len]
        i = 0
        while i < len(h):
            n = h[i]
            name = h[i + 1 : i + 1 + n].decode()
            i += 1 + n
            assert h[i] == 7, "only string headers here"
            (vlen,) = struct.unpack(">H", h[i + 1 : i + 3])
            headers[name] = h[i + 3 : i + 3 + vlen].decode()
            i += 3 + vlen
        out.append((headers, message[12 + head_len : -4]))
        at += total
    return out
