"""One model call: the budget check before it, the stream with its retries, the answer kept, its usage line.

A call that fails or is stopped keeps what the user already saw (the partial
answer, marked as such) and ends in a calm sentence, never an exception.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from typing import Any

from tahrix_lab.agent.backends.base import ToolSpec
from tahrix_lab.agent.errors import BackendError, BudgetExceeded
from tahrix_lab.agent.retry import calm_message
from tahrix_lab.agent.run_state import LoopEvent, Run, close_stream
from tahrix_lab.agent.transcript import Message, Part, StopReason, Usage

log = logging.getLogger("tahrix_lab.agent.loop")  # the loop's log, as operators know it


class PartialAnswer:
    """What one model call has produced so far."""

    __slots__ = ("buffer", "buffer_kind", "done", "first_at", "parts", "signature")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.buffer: list[str] = []
        self.buffer_kind: str | None = None
        self.signature: str | None = None
        self.done: dict[str, Any] | None = None
        self.first_at: float | None = None

    def flush(self) -> None:
        if self.buffer_kind == "text":
            self.parts.append(Part.of_text("".join(self.buffer)))
        elif self.buffer_kind == "reasoning":
            self.parts.append(Part.of_reasoning("".join(self.buffer), self.signature))
        self.buffer = []
        self.buffer_kind = None
        self.signature = None

    def finish(self) -> list[Part]:
        self.flush()
        return self.parts

    def on_text(self, ev: dict[str, Any]) -> None:
        if self.buffer_kind != "text":
            self.flush()
            self.buffer_kind = "text"
        self.buffer.append(ev["text"])

    def on_reasoning(self, ev: dict[str, Any]) -> None:
        if "redacted" in ev:
            self.flush()
            self.parts.append(Part.of_reasoning(None, ev["redacted"]))
            return
        if self.buffer_kind != "reasoning":
            self.flush()
            self.buffer_kind = "reasoning"
        if ev.get("text"):
            self.buffer.append(ev["text"])
        if ev.get("signature"):
            self.signature = ev["signature"]


def budget_refusal(run: Run) -> LoopEvent | None:
    """The error to end the run with when the budget refuses the next call, else None."""
    if run.budget is None:
        return None
    try:
        run.budget.check(run.session.user, store=run.store)
    except BudgetExceeded as exc:
        log.info("budget refused user %s: %s", run.session.user, exc.bucket)
        return "error", {"kind": "budget", "bucket": exc.bucket, "message": exc.message, "retryable": True}
    return None


def call_model(
    run: Run, system: str | None, history: list[Message], specs: list[ToolSpec], offered: list[str]
) -> Generator[LoopEvent, None, Message | None]:
    """Stream one answer and keep it; returns the stored message, or None when the run ends here."""
    call = PartialAnswer()
    started = time.perf_counter()
    outcome = yield from _stream(run, call, system, history, specs)
    if outcome != "ok":
        return None
    done = call.done or {}
    message = run.persist(
        Message(
            role="assistant",
            parts=call.finish(),
            backend=run.backend.name,
            model_id=run.model,
            stop_reason=done.get("stop_reason", "other"),
            raw_stop_reason=done.get("raw_stop_reason"),
            usage=Usage.from_dict(done.get("usage")),
            tools_offered=offered,
            latency_ms=(time.perf_counter() - started) * 1000,
            ttft_ms=((call.first_at - started) * 1000) if call.first_at is not None else None,
        ),
    )
    yield "usage", _usage_payload(run, message)
    return message


def _stream(
    run: Run, call: PartialAnswer, system: str | None, history: list[Message], specs: list[ToolSpec]
) -> Generator[LoopEvent, None, str]:  # returns "ok" or "stopped"
    attempt = 0
    while True:
        try:
            stream = run.backend.stream(
                system=system, messages=history, tools=specs, model=run.model, inference=run.inference
            )
            event: Any
            for event in stream:
                ev: dict[str, Any] = event
                if call.first_at is None:
                    call.first_at = time.perf_counter()
                kind = ev["kind"]
                if kind == "text":
                    call.on_text(ev)
                    yield "token", ev
                elif kind == "reasoning":
                    call.on_reasoning(ev)
                    yield "reasoning", ev
                elif kind == "tool_use":
                    call.flush()
                    call.parts.append(Part.of_tool_use(ev["id"], ev["name"], ev["input"], ev.get("raw")))
                    yield "tool_use", ev
                elif kind == "done":
                    call.done = dict(ev)
                if run.cancelled():
                    close_stream(stream)
                    yield from _stop_cancelled(run, call)
                    return "stopped"
            return "ok"
        except GeneratorExit:
            _persist_partial(run, call, "cancelled")
            raise
        except BackendError as exc:
            if run.cancelled():  # the stream was stopped for the cancel (or failed after it)
                log.debug("stream ended after a cancel: %r", exc)
                yield from _stop_cancelled(run, call)
                return "stopped"
            if call.first_at is None and exc.retryable and attempt + 1 < run.retry.attempts:
                delay = run.retry.delay(attempt, exc)
                log.warning(
                    "backend %s failed (attempt %d), retrying in %.2fs: %r",
                    run.backend.name,
                    attempt + 1,
                    delay,
                    exc,
                )
                attempt += 1
                run.retry.sleep(delay)
                if run.cancelled():  # during the backoff: no new call
                    yield from _stop_cancelled(run, call)
                    return "stopped"
                continue
            yield from _fail(run, call, exc)
            return "stopped"
        except Exception as exc:  # an adapter bug must not crash the surface either
            yield from _fail(run, call, BackendError(f"unexpected {type(exc).__name__}: {exc}", cause=exc))
            return "stopped"


def _stop_cancelled(run: Run, call: PartialAnswer) -> Iterator[LoopEvent]:
    _persist_partial(run, call, "cancelled")
    yield run.stopped()


def _fail(run: Run, call: PartialAnswer, exc: BackendError) -> Iterator[LoopEvent]:
    log.error(
        "backend %s failed on session %s (status=%s, retryable=%s): %s",
        run.backend.name, run.session.id, exc.status, exc.retryable, exc.message,
        exc_info=exc.cause or exc,
    )  # fmt: skip
    _persist_partial(run, call, "error", raw=f"error: {exc.message}"[:500])
    yield (
        "error",
        {
            "kind": "backend",
            "message": calm_message(exc),
            "retryable": exc.retryable,
            "status": exc.status,
        },
    )


def _persist_partial(run: Run, call: PartialAnswer, reason: StopReason, raw: str | None = None) -> None:
    """Keep what the user already saw: the partial answer, marked as such."""
    parts = call.finish()
    if not parts:
        return
    message = run.persist(
        Message(
            role="assistant",
            parts=parts,
            backend=run.backend.name,
            model_id=run.model,
            stop_reason=reason,
            raw_stop_reason=raw or reason,
            usage=Usage(),
        ),
    )
    tool_uses = message.tool_uses()
    if tool_uses:
        run.close_unanswered(tool_uses, "The answer was cut off before this tool ran.")


def _usage_payload(run: Run, message: Message) -> dict[str, Any]:
    usage = message.usage or Usage()
    cost, uncached = run.pricer.price_message(message)
    return {
        "backend": message.backend,
        "model": message.model_id,
        "usage": usage.to_dict(),
        "cost_usd": cost,
        "uncached_cost_usd": uncached,
        "latency_ms": message.latency_ms,
        "ttft_ms": message.ttft_ms,
        "stop_reason": message.stop_reason,
        "position": message.position,
    }
