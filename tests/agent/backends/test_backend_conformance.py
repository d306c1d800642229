"""The conformance suite, run for the fake, OpenAI (SSE) and Bedrock (event-stream) alike."""

from __future__ import annotations

import pytest
from backend_conformance import (
    assert_invalid_tool_arguments,
    assert_no_retry_after_first_event,
    assert_no_usage_is_unknown,
    assert_not_retryable,
    assert_reasoning,
    assert_redacted_reasoning,
    assert_retries_before_first_event,
    assert_stop_reason,
    assert_text_stream,
    assert_tool_round_trip,
    tool_result_sent,
)
from harness import Harness

from tahrix_lab.agent.storage import TranscriptStore


def test_text_stream(harness: Harness, store: TranscriptStore) -> None:
    assert_text_stream(harness, store)


def test_stream_without_usage_records_unknown(harness: Harness, store: TranscriptStore) -> None:
    assert_no_usage_is_unknown(harness, store)


@pytest.mark.parametrize("stop", ["max_tokens", "content_filter"])
def test_stop_reasons(harness: Harness, store: TranscriptStore, stop: str) -> None:
    assert_stop_reason(harness, store, stop)


def test_tool_round_trip(harness: Harness, store: TranscriptStore) -> None:
    sent = assert_tool_round_trip(harness, store)
    assert tool_result_sent(harness, sent[1]) == ("call_1", {"address": "0xabc", "label": "exchange deposit"})


def test_reasoning(harness: Harness, store: TranscriptStore) -> None:
    assert_reasoning(harness, store)


def test_invalid_tool_arguments_answered_with_error(harness: Harness, store: TranscriptStore) -> None:
    assert_invalid_tool_arguments(harness, store)


def test_retries_before_first_event(harness: Harness, store: TranscriptStore) -> None:
    assert_retries_before_first_event(harness, store)


def test_no_retry_after_first_event(harness: Harness, store: TranscriptStore) -> None:
    assert_no_retry_after_first_event(harness, store)


def test_validation_error_is_not_retried(harness: Harness, store: TranscriptStore) -> None:
    assert_not_retryable(harness, store)


def test_redacted_reasoning(harness: Harness, store: TranscriptStore) -> None:
    assert_redacted_reasoning(harness, store)
