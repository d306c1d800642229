"""Media loading (local and s3://) and backend choice from configuration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import pytest
from wire.server import Reply, WireServer

from tahrix_lab.agent.backends import get_backend
from tahrix_lab.agent.backends.bedrock import BedrockBackend
from tahrix_lab.agent.backends.fake import FakeBackend
from tahrix_lab.agent.backends.headers import parse_retry_after
from tahrix_lab.agent.backends.media import MAX_BYTES, MediaError, document_name, load_media
from tahrix_lab.agent.backends.openai import OpenAIBackend
from tahrix_lab.agent.backends.registry import default_model, model_aliases
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.pricing import Pricer
from tahrix_lab.agent.transcript import Part


def test_local_media_is_loaded_and_checked(tmp_path: Path) -> None:
    image = tmp_path / "graph.webp"
    image.write_bytes(b"RIFF....WEBP")
    media = load_media(Part.of_media("image", str(image), "image/webp"))
    assert (media.kind, media.format, media.name, media.data) == ("image", "webp", "graph", b"RIFF....WEBP")


@pytest.mark.parametrize(
    ("kind", "media_type", "match"),
    [
        ("image", "image/bmp", "supported image formats"),
        ("document", "application/zip", "supported document formats"),
    ],
)
def test_unsupported_types(tmp_path: Path, kind: Any, media_type: str, match: str) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"x")
    with pytest.raises(MediaError, match=match):
        load_media(Part.of_media(kind, str(path), media_type))


def test_missing_empty_and_oversized(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="does not exist"):
        load_media(Part.of_media("image", str(tmp_path / "none.png"), "image/png"))
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(MediaError, match="empty"):
        load_media(Part.of_media("image", str(empty), "image/png"))
    big = tmp_path / "big.png"
    big.write_bytes(b"x" * (MAX_BYTES["image"] + 1))
    with pytest.raises(MediaError, match="the most that can be sent"):
        load_media(Part.of_media("image", str(big), "image/png"))


def test_document_names_are_what_bedrock_accepts() -> None:
    assert document_name("Q3 report_final.v2") == "Q3 report-final-v2"
    assert document_name("___") == "-"
    assert document_name("") == "document"


@pytest.fixture
def s3_server() -> Iterator[WireServer]:
    def reply(request: Any) -> Reply:
        if request.path.startswith("/bucket/missing"):
            return Reply(status=404, content_type="application/xml", chunks=[b""])
        return Reply(status=200, content_type="image/png", chunks=[b"\x89PNG-from-s3"], headers={})

    with WireServer(reply) as s:
        yield s


def test_s3_media(s3_server: WireServer) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=s3_server.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
    )
    try:
        media = load_media(
            Part.of_media("image", "s3://bucket/cases/7/chart.png", "image/png"), s3_client=client
        )
        assert media.data == b"\x89PNG-from-s3"
        assert media.name == "chart"
        with pytest.raises(MediaError, match="could not be read from S3"):
            load_media(Part.of_media("image", "s3://bucket/missing.png", "image/png"), s3_client=client)
        with pytest.raises(MediaError, match="s3://bucket/key"):
            load_media(Part.of_media("image", "s3://bucket-only", "image/png"), s3_client=client)
    finally:
        client.close()


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None


def test_get_backend_by_name_and_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAHRIX_BACKEND", raising=False)
    assert isinstance(get_backend(), FakeBackend)
    backend = get_backend("http://127.0.0.1:9/v1")
    assert isinstance(backend, OpenAIBackend)
    assert str(backend.client.base_url).startswith("http://127.0.0.1:9/v1")
    backend.client.close()
    monkeypatch.setenv("TAHRIX_BACKEND", "nope")
    with pytest.raises(ConfigurationError, match="TAHRIX_BACKEND"):
        get_backend()


def test_get_backend_bedrock_reads_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    monkeypatch.setenv("TAHRIX_MODEL_ALIASES", f"{arn}=anthropic.claude-3-haiku-20240307-v1:0")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    backend = get_backend("bedrock")
    assert isinstance(backend, BedrockBackend)
    assert backend.model_aliases == {arn: "anthropic.claude-3-haiku-20240307-v1:0"}
    backend.client.close()


def test_model_aliases_forms_and_pricing() -> None:
    arn = "arn:aws:bedrock:us-east-1:1:application-inference-profile/p1"
    assert model_aliases(f'{{"{arn}": "m1"}}') == {arn: "m1"}
    assert model_aliases(f"{arn}=m1, b=m2") == {arn: "m1", "b": "m2"}
    assert model_aliases("") == {}
    with pytest.raises(ConfigurationError, match="ARN=model-id"):
        model_aliases("no-equals-sign")
    with pytest.raises(ConfigurationError, match="JSON"):
        model_aliases("{bad")
    pricer = Pricer(aliases=model_aliases(f"{arn}=anthropic.claude-3-haiku-20240307-v1:0"))
    assert pricer.aliases[arn] == "anthropic.claude-3-haiku-20240307-v1:0"


def test_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAHRIX_MODEL", raising=False)
    assert default_model("openai") == "gpt-4o-mini"
    assert default_model("http://localhost:8000/v1") == "gpt-4o-mini"
    monkeypatch.setenv("TAHRIX_MODEL", "qwen3:8b")
    assert default_model("openai") == "qwen3:8b"
