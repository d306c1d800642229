"""``map_error`` of both adapters on failures that are awkward to provoke over a socket."""

from __future__ import annotations

import json

import botocore.eventstream
import botocore.exceptions
import httpx2
import openai
import pytest
import urllib3.exceptions

from tahrix_lab.agent.backends import bedrock
from tahrix_lab.agent.backends import openai as openai_adapter
from tahrix_lab.agent.errors import BackendError

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")


@pytest.mark.parametrize(
    ("exc", "retryable", "status"),
    [
        (botocore.exceptions.ReadTimeoutError(endpoint_url="http://x"), True, None),
        (botocore.exceptions.ConnectTimeoutError(endpoint_url="http://x"), True, None),
        (botocore.exceptions.EndpointConnectionError(endpoint_url="http://x"), True, None),
        (botocore.exceptions.ResponseStreamingError(error="reset"), True, None),
        (urllib3.exceptions.ProtocolError("Connection broken"), True, None),
        (botocore.eventstream.ChecksumMismatch(1, 2), True, None),
        (botocore.exceptions.NoCredentialsError(), False, 401),
        (botocore.exceptions.ParamValidationError(report="bad"), False, 400),
        (
            botocore.exceptions.ClientError(
                {
                    "Error": {"Code": "AccessDeniedException", "Message": "no"},
                    "ResponseMetadata": {"HTTPStatusCode": 403},
                },
                "ConverseStream",
            ),
            False,
            403,
        ),
        (
            botocore.exceptions.ClientError(
                {
                    "Error": {"Code": "SomethingNew", "Message": "?"},
                    "ResponseMetadata": {"HTTPStatusCode": 502},
                },
                "ConverseStream",
            ),
            True,
            502,
        ),
        (RuntimeError("adapter bug"), False, None),
    ],
)
def test_bedrock_map_error(exc: BaseException, retryable: bool, status: int | None) -> None:
    mapped = bedrock.map_error(exc)
    assert isinstance(mapped, BackendError)
    assert (mapped.retryable, mapped.status) == (retryable, status)
    assert mapped.cause is exc


@pytest.mark.parametrize(
    ("exc", "retryable", "status"),
    [
        (openai.APITimeoutError(request=REQUEST), True, None),
        (openai.APIConnectionError(request=REQUEST), True, None),
        (openai.APIError("in-band", REQUEST, body={"code": 502, "message": "upstream"}), True, 502),
        (openai.APIError("in-band", REQUEST, body={"code": "weird"}), False, None),
        (json.JSONDecodeError("Expecting value", "{", 1), True, None),
        (
            openai.RateLimitError(
                "slow down",
                response=httpx2.Response(429, headers={"retry-after": "12"}, request=REQUEST),
                body=None,
            ),
            True,
            429,
        ),
        (RuntimeError("adapter bug"), False, None),
    ],
)
def test_openai_map_error(exc: BaseException, retryable: bool, status: int | None) -> None:
    mapped = openai_adapter.map_error(exc)
    assert (mapped.retryable, mapped.status) == (retryable, status)
    assert mapped.cause is exc


def test_openai_retry_after_from_the_response() -> None:
    exc = openai.RateLimitError(
        "slow", response=httpx2.Response(429, headers={"retry-after": "12"}, request=REQUEST), body=None
    )
    assert openai_adapter.map_error(exc).retry_after == 12.0


def test_backend_errors_pass_through_unchanged() -> None:
    original = BackendError("already mapped", retryable=True)
    assert bedrock.map_error(original) is original
    assert openai_adapter.map_error(original) is original
