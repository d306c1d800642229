"""Load the bytes behind an ``image`` or ``document`` part, checked before sending.

The transcript only holds a reference (``media_ref``: a local path or an
``s3://bucket/key``); an adapter calls ``load_media`` while it builds a
request, so a missing file, an unsupported type or an oversized file fails
with a clear ``MediaError`` before anything reaches the provider.

The limits are Bedrock's (the stricter of the two families) so a transcript
stays portable between providers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from tahrix_lab.agent.errors import BackendError
from tahrix_lab.agent.transcript import Part

MediaKind = Literal["image", "document"]

# media type -> short format name, per kind (what either provider can take)
FORMATS: dict[MediaKind, dict[str, str]] = {
    "image": {
        "image/png": "png",
        "image/jpeg": "jpeg",
        "image/gif": "gif",
        "image/webp": "webp",
    },
    "document": {
        "application/pdf": "pdf",
        "text/csv": "csv",
        "text/plain": "txt",
        "text/markdown": "md",
        "text/html": "html",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    },
}

# Bedrock Converse: 3.75 MB per image, 4.5 MB per document.
MAX_BYTES: dict[MediaKind, int] = {"image": 3_750_000, "document": 4_500_000}


class MediaError(BackendError):
    """A media part cannot be sent (missing, unsupported or too large).

    A ``BackendError`` that is never retryable, raised before any request;
    its message names the file and is shown to the user as it is."""

    user_facing = True

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message, status=None, retryable=False, cause=cause)


@dataclass(frozen=True, slots=True)
class Media:
    kind: MediaKind
    media_type: str
    format: str
    name: str
    data: bytes


def media_format(part: Part) -> tuple[MediaKind, str]:
    """The kind and short format of a media part, or ``MediaError``."""
    if part.type not in ("image", "document"):
        raise MediaError(f"A {part.type!r} part is not media.")
    kind: MediaKind = "image" if part.type == "image" else "document"
    media_type = (part.media_type or "").lower()
    fmt = FORMATS[kind].get(media_type)
    if fmt is None:
        allowed = ", ".join(sorted(FORMATS[kind].values()))
        raise MediaError(
            f"The {kind} {part.media_ref!r} has type {part.media_type!r}, which cannot be sent; "
            f"supported {kind} formats are: {allowed}."
        )
    return kind, fmt


def load_media(part: Part, *, s3_client: Any = None) -> Media:
    """Read and check the bytes of ``part`` (a local path or ``s3://`` key).

    ``s3_client`` is a boto3 S3 client; one is made on demand for ``s3://``
    references when none is given."""
    kind, fmt = media_format(part)
    ref = part.media_ref
    if not ref:
        raise MediaError(f"The {kind} part has no media_ref to load.")
    limit = MAX_BYTES[kind]
    if ref.startswith("s3://"):
        data = _read_s3(ref, limit, kind, s3_client)
        name = PurePosixPath(ref).stem
    else:
        path = Path(ref).expanduser()
        if not path.is_file():
            raise MediaError(f"The {kind} file {ref!r} does not exist (or is not a file).")
        size = path.stat().st_size
        if size > limit:
            raise MediaError(_too_big(kind, ref, size, limit))
        data = path.read_bytes()
        name = path.stem
    if not data:
        raise MediaError(f"The {kind} {ref!r} is empty.")
    return Media(kind, (part.media_type or "").lower(), fmt, document_name(name), data)


def document_name(stem: str) -> str:
    """A name Bedrock accepts: letters, digits, single spaces, hyphens, brackets."""
    cleaned = re.sub(r"[^A-Za-z0-9\-\(\)\[\] ]+", "-", stem)
    cleaned = re.sub(r"\s+", " ", cleaned).strip()
    return cleaned[:200] or "document"


def _too_big(kind: str, ref: str, size: int, limit: int) -> str:
    return f"The {kind} {ref!r} is {size:,} bytes; the most that can be sent is {limit:,} bytes."


def _read_s3(ref: str, limit: int, kind: str, client: Any) -> bytes:
    bucket, _, key = ref[len("s3://") :].partition("/")
    if not bucket or not key:
        raise MediaError(f"The {kind} reference {ref!r} is not of the form s3://bucket/key.")
    import botocore.exceptions

    if client is None:
        import boto3

        client = boto3.client("s3")
    try:
        head = client.head_object(Bucket=bucket, Key=key)
        size = int(head.get("ContentLength", 0))
        if size > limit:
            raise MediaError(_too_big(kind, ref, size, limit))
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        data: bytes = body.read(limit + 1)
    except botocore.exceptions.ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise MediaError(f"The {kind} {ref!r} could not be read from S3 ({code or exc}).", cause=exc) from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise MediaError(f"The {kind} {ref!r} could not be read from S3: {exc}", cause=exc) from exc
    if len(data) > limit:
        raise MediaError(_too_big(kind, ref, len(data), limit))
    return data
