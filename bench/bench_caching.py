"""Dollars per investigation, with and without Bedrock prompt caching.

The sample investigation (the scripted investigator of ``tahrix demo``: the
same questions, the same tool calls, run for real against the sample case)
goes through the real Bedrock adapter and boto3 to the loopback ConverseStream
model in ``tests/wire/caching.py``, which decides each turn with the scripted
investigator (reading the tool results back from the wire request) and
reports usage from a prompt cache kept by Bedrock's documented rules. Each
run is priced with genai-prices (the loop's ``usage`` events) on a Claude
Sonnet and a Nova model, with and without cache points.

Printed per (model, caching): model calls, input tokens (cache reads and
writes included), tokens read from and written to the cache, USD per
investigation; then the saving with caching (target: >= 60% less) and
whether the tool calls and answers were the same, beside the best any cache
placement could do on the same calls (every call reads all of the previous
prompt and writes only what is new; the last call writes nothing). Then the
same session with a follow-up question, as analysts ask in the notebook: the
whole first investigation is the cached prefix of the second.

    python bench/bench_caching.py
    BENCH_CACHING_MODELS=us.anthropic.claude-3-7-sonnet-20250219-v1:0,amazon.nova-lite-v1:0 python bench/bench_caching.py

Tokens are estimated at ~4 characters each (no provider tokenizer offline),
so absolute dollars are indicative; the with/without ratio is what counts.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import boto3  # noqa: E402
import botocore.config  # noqa: E402
from wire.caching import CachingConverse  # noqa: E402
from wire.server import WireServer  # noqa: E402

from tahrix_lab.agent.backends.bedrock import BedrockBackend  # noqa: E402
from tahrix_lab.agent.backends.fake import answers_since_question  # noqa: E402
from tahrix_lab.agent.pricing import Pricer  # noqa: E402
from tahrix_lab.agent.transcript import Message, Part, Usage  # noqa: E402
from tahrix_lab.case.investigator import QUESTION, investigation_turns  # noqa: E402
from tahrix_lab.case.workspace import Workspace  # noqa: E402

MODELS = os.environ.get(
    "BENCH_CACHING_MODELS", "us.anthropic.claude-sonnet-4-20250514-v1:0,us.amazon.nova-pro-v1:0"
).split(",")
TARGET = 0.60
# A second question in the same session (analysts ask follow-ups in the notebook); the
# scripted investigator answers it with the same five turns, reading the new results.
FOLLOW_UP = "Check that again from the start and confirm the exchange deposits, with hashes and flag ids."


def neutral(body: dict[str, Any]) -> list[Message]:
    """The Converse request's messages as the neutral history the scripted investigator reads."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in body["messages"]:
        blocks = [b for b in m["content"] if "cachePoint" not in b]
        if m["role"] == "assistant":
            parts = []
            for b in blocks:
                if "text" in b:
                    parts.append(Part.of_text(b["text"]))
                elif "toolUse" in b:
                    use = b["toolUse"]
                    names[use["toolUseId"]] = use["name"]
                    parts.append(Part.of_tool_use(use["toolUseId"], use["name"], use["input"]))
            out.append(Message(role="assistant", parts=parts))
        elif any("toolResult" in b for b in blocks):
            results = []
            for b in blocks:
                r = b.get("toolResult")
                if r is None:
                    continue
                content = r["content"][0]
                value = content["json"] if "json" in content else {"text": content.get("text")}
                status = "error" if r.get("status") == "error" else "ok"
                results.append(Part.of_tool_result(r["toolUseId"], names.get(r["toolUseId"]), value, status))
            out.append(Message(role="tool", parts=results))
        else:
            out.append(Message.user("".join(b.get("text", "") for b in blocks)))
    return out


def investigator() -> Any:
    turns = investigation_turns(None)

    def respond(body: dict[str, Any], model: str) -> list[dict[str, Any]]:
        messages = neutral(body)
        turn = turns[answers_since_question(messages)]
        return [dict(e) for e in turn(messages, [])]  # type: ignore[operator]

    return respond


@dataclass
class Run:
    model: str
    caching: bool
    calls: int = 0
    input_tokens: int = 0
    read: int = 0
    written: int = 0
    usd: float | None = 0.0
    tools: list[tuple[str, str]] = field(default_factory=list)
    answer: str = ""
    prompts: list[int] = field(default_factory=list)  # prompt tokens of each call, as the model counted
    outputs: list[int] = field(default_factory=list)  # output tokens of each call


def best_placement_usd(model: str, prompts: list[int], outputs: list[int]) -> float | None:
    """The least any cache placement could cost for these calls: every call reads
    all of the previous prompt from the cache, writes only what is new, and the
    last call writes nothing (no later call could read it)."""
    total = 0.0
    before = 0
    for i, (prompt, out) in enumerate(zip(prompts, outputs, strict=True)):
        new = prompt - before
        last = i == len(prompts) - 1
        usage = Usage(prompt, out, cache_read_tokens=before, cache_write_tokens=0 if last else new)
        usd = Pricer().price(model, usage, backend="bedrock")
        if usd is None:
            return None
        total += usd
        before = prompt
    return total


def investigate(model: str, caching: bool, questions: int = 1) -> Run:
    run = Run(model, caching)
    model_server = CachingConverse(investigator())
    with tempfile.TemporaryDirectory() as tmp, WireServer(model_server) as server:
        client = boto3.client(
            "bedrock-runtime", endpoint_url=server.url, region_name="us-east-1",
            aws_access_key_id="bench", aws_secret_access_key="bench",
            config=botocore.config.Config(retries={"total_max_attempts": 1}),
        )  # fmt: skip
        ws = Workspace(Path(tmp) / "bench.duckdb")
        try:
            case_id = ws.load_sample_case()
            session = ws.start_investigation(case_id, user="bench", grant={"may_write": False})
            asked = [QUESTION.format(case_id=case_id), FOLLOW_UP][:questions]
            events = [e for q in asked for e in ws.ask(session, q, backend=BedrockBackend(client=client),
                      model=model, inference={"prompt_caching": caching})]  # fmt: skip
            for event, payload in events:
                if event == "usage":
                    u = payload["usage"]
                    run.calls += 1
                    run.outputs.append(u["output_tokens"] or 0)
                    run.input_tokens += u["input_tokens"] or 0
                    run.read += u["cache_read_tokens"] or 0
                    run.written += u["cache_write_tokens"] or 0
                    cost = payload["cost_usd"]
                    run.usd = None if run.usd is None or cost is None else run.usd + cost
                elif event == "tool_use":
                    run.tools.append((payload["name"], repr(sorted(payload["input"].items()))))
                elif event == "token":
                    run.answer += payload["text"]
                elif event == "error":
                    raise SystemExit(f"the investigation failed: {payload}")
        finally:
            ws.close()
            client.close()
    run.prompts = [a.total for a in model_server.accounts]
    return run


def compare(model: str, questions: int) -> bool:
    """Print one model's runs with and without caching; True when both made the same calls and answer."""
    runs = {on: investigate(model, on, questions) for on in (False, True)}
    label = model if questions == 1 else f"{model} (+ follow-up)"
    for on, r in runs.items():
        usd = "unknown" if r.usd is None else f"${r.usd:.5f}"
        print(f"{label:60} {'on' if on else 'off':>7} {r.calls:>5} {r.input_tokens:>10,} {r.read:>10,} "
              f"{r.written:>11,} {usd:>18}")  # fmt: skip
    off, on = runs[False], runs[True]
    last = on.prompts[-1] if on.prompts else 0
    print(
        f"  prompt tokens per call: {', '.join(f'{n:,}' for n in on.prompts)}; the last prompt is "
        f"{last / max(on.input_tokens, 1):.0%} of all input (each of its tokens is written to the cache once)"
    )
    same = off.tools == on.tools and off.answer == on.answer
    if off.usd and on.usd is not None:
        saving = 1 - on.usd / off.usd
        best = best_placement_usd(model, on.prompts, on.outputs)
        bound = (
            ""
            if best is None
            else f"; the best any placement could do on these calls: {1 - best / off.usd:.1%} less"
        )
        print(f"  -> {saving:.1%} less per {'investigation' if questions == 1 else 'two-question session'} with "
              f"caching (target >= {TARGET:.0%}: {'met' if saving >= TARGET else 'NOT met'}){bound}")  # fmt: skip
        print(f"     {len(on.tools)} tool calls, same tool calls and answer: {same}")
    else:
        print("  -> no price known: cannot compare")
    return same


def main() -> int:
    print("Sample investigation over the loopback Bedrock wire, priced with genai-prices")
    print(f"{'model':60} {'caching':>7} {'calls':>5} {'input tok':>10} {'cache read':>10} "
          f"{'cache write':>11} {'USD/investigation':>18}")  # fmt: skip
    consistent = True  # the same tool calls and answers with and without caching
    for model in MODELS:
        consistent &= compare(model, 1)
    print("The same session with a follow-up question (the history so far is the cached prefix):")
    for model in MODELS:
        consistent &= compare(model, 2)
    # the figures are reported, not enforced; different tool calls or answers are a failure
    return 0 if consistent else 1


if __name__ == "__main__":
    raise SystemExit(main())
