"""Replay the recorded provider exchanges in ``tests/vectors`` (provenance in its README).

A missing file is a failure, not a skip: these recordings are what the
adapters are pinned against."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .server import Reply

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def vectors_dir() -> Path:
    if not (VECTORS / "README.md").is_file():
        raise FileNotFoundError(
            f"The recorded provider vectors are missing: expected {VECTORS} (tests/vectors in the checkout)."
        )
    return VECTORS


@dataclass
class Interaction:
    request: dict[str, Any]  # the JSON body the real client sent
    reply: Reply
    raw_body: bytes


def load(relative: str, *, piece: int | None = None) -> list[Interaction]:
    """Interactions of a cassette (``"openai/…yaml"``). SSE bodies go out one
    event per HTTP chunk; binary bodies in ``piece``-byte chunks (default: whole)."""
    data = yaml.safe_load((vectors_dir() / relative).read_text())
    out = []
    for item in data["interactions"]:
        request = item["request"]
        body = request.get("parsed_body")
        if body is None and request.get("body"):
            raw = request["body"]
            body = json.loads(raw if isinstance(raw, str | bytes) else raw["string"])
        response = item["response"]
        status = response["status"]["code"]
        headers = {k.lower(): v[0] for k, v in (response.get("headers") or {}).items()}
        content_type = headers.get("content-type", "application/json")
        if "parsed_body" in response:
            raw_body = json.dumps(response["parsed_body"]).encode()
        else:
            string = response["body"]["string"]
            raw_body = string if isinstance(string, bytes) else string.encode()
        if content_type.startswith("text/event-stream"):
            chunks = [part + b"\n\n" for part in raw_body.split(b"\n\n") if part.strip()]
        elif piece:
            chunks = [raw_body[i : i + piece] for i in range(0, len(raw_body), piece)]
        else:
            chunks = [raw_body]
        out.append(
            Interaction(body or {}, Reply(status=status, chunks=chunks, content_type=content_type), raw_body)
        )
    return out
