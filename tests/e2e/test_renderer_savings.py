"""The usage line in widgets/flow.js shows what prompt caching saved, in real headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e


def usage(cost: float | None, uncached: float | None, read: int | None) -> dict[str, Any]:
    return {
        "type": "usage",
        "model": "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "backend": "bedrock",
        "usage": {"input_tokens": 13_645, "output_tokens": 80, "cache_read_tokens": read},
        "cost_usd": cost,
        "uncached_cost_usd": uncached,
        "latency_ms": 900,
        "ttft_ms": 200,
        "stop_reason": "tool_use",
    }


def test_usage_lines_show_the_saving_and_the_extra_cost_of_writes(page: Any, mount_flow: Any) -> None:
    mount_flow(page)
    page.evaluate("() => window.flow.startTurn('Where did the funds go?')")
    chunks = [
        usage(0.0150, 0.0120, None),  # a call that wrote the cache: it cost more
        usage(0.0040, 0.0420, 12_000),  # a call that read it
        usage(0.0030, 0.0030, None),  # nothing cached: no saving shown
        usage(None, None, 500),  # unknown price: no saving claimed
    ]
    page.evaluate("(chunks) => chunks.forEach(c => window.flow.push(c))", chunks)
    lines = page.locator(".tx-usage").all_inner_texts()
    assert "cache write +$0.0030" in lines[0] and "saved" not in lines[0]
    assert "12000 cached" in lines[1] and "saved $0.038" in lines[1]
    assert "saved" not in lines[2] and "cache write" not in lines[2]
    assert "cost unknown" in lines[3] and "saved" not in lines[3]
    assert page.console_errors == []
