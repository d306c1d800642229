"""The loop: a plain synchronous generator of ``(event, payload)`` tuples.

It knows no wire format; surfaces (the widget, the job service, the CLI, the
SSE encoder) translate the tuples. Events and their payloads:

    token        {"kind": "text", "text": str}
    reasoning    {"kind": "reasoning", "text": str, "signature"?: str, "redacted"?: str}
    tool_use     {"kind": "tool_use", "id": str, "name": str, "input": dict | None, "raw"?: str}
    tool_start   {"id", "name"}  (when the tool begins to run; tool_use is when the model asked)
    tool_result  {"id", "name", "status": "ok"|"error", "result": dict, "duration_ms": float}
    follow_up    {"cycle": int, "text": "Synthesizing results..."}  (before each call that follows tool results)
    effects      {"effects": [dict, ...]}
    approval     {"id", "name", "args", "summary", "why", "state": "pending"}  (a call waits for the
                  analyst instead of a tool_result; ``agent.approvals``. After a decision:
                  "state": "approved"|"denied" with "decision", "by", "at", "reason")
    usage        {"backend", "model", "usage": dict, "cost_usd": float | None,
                  "uncached_cost_usd": float | None (the same tokens with no cache reads or
                  writes: what caching saved is the difference), "latency_ms", "ttft_ms",
                  "stop_reason", "position"}  (once per model call)
    done         {"session_id", "stop_reason"}  (stop_reason "cancelled" when stopped, "awaiting_approval"
                  with "pending": [call, ...] when a call waits for the analyst: the run ends there)
    error        {"kind": "backend"|"budget"|"cycle_limit"|"internal", "message": str (calm,
                  for the user), "retryable": bool, ...}

No provider or tool failure escapes as an exception: the raw error goes to the
log (with traceback) and the user gets a calm sentence. Closing the generator
(``gen.close()``) or setting ``cancel`` stops the run; what was streamed so far
is persisted either way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.approvals import AWAITING, is_pending, pending_calls
from tahrix_lab.agent.backends.base import Backend, ToolSpec
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import BackendError, BudgetExceeded, StoreUnavailableError
from tahrix_lab.agent.history import build_messages, capped_message
from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.retry import INTERNAL_ERROR_MESSAGE, STORE_ERROR_MESSAGE, RetryPolicy, calm_message
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.tools import (
    DEFAULT_MAX_RESULT_BYTES,
    REGISTRY,
    ToolRegistry,
    error_result,
    run_tool,
)
from tahrix_lab.agent.transcript import Message, Part, Session, StopReason, Usage

log = logging.getLogger(__name__)

MAX_TOOL_CYCLES = 8
FOLLOW_UP_TEXT = "Synthesizing results..."

LoopEvent = tuple[str, dict[str, Any]]


class _Call:
    """What one model call has produced so far (the partial answer)."""

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


def run_agent(
    session: Session | str,
    *,
    store: TranscriptStore,
    backend: Backend,
    model: str,
    inference: dict[str, Any] | None = None,
    context: Any = None,
    budget: Budget | None = None,
    max_tool_cycles: int = MAX_TOOL_CYCLES,
    follow_up_instruction: str | None = None,
    tools: Sequence[ToolSpec] | None = None,
    registry: ToolRegistry | None = None,
    retry: RetryPolicy | None = None,
    cancel: threading.Event | None = None,
    pricer: Pricer | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    history: Sequence[Message] | None = None,
) -> Iterator[LoopEvent]:
    """Run the model on the session's stored history until it answers.

    The caller persists the user's message first (or uses ``ask``). ``tools``
    overrides the catalog for the session's purpose; ``context`` is passed to
    every tool (a ``ContextProvider`` is resolved per call). ``history``: the
    session's messages as the caller just stored them (a new session), so the
    loop does not read them back; by default it reads them from ``store``.
    """
    run = _Run(
        session=session if isinstance(session, Session) else store.get_session(session),
        store=store,
        backend=backend,
        model=model,
        inference=inference,
        context=context,
        budget=budget,
        max_tool_cycles=max_tool_cycles,
        follow_up_instruction=follow_up_instruction,
        tools=tools,
        registry=registry or REGISTRY,
        retry=retry or RetryPolicy(),
        cancel=cancel,
        pricer=pricer or (budget.pricer if budget is not None else DEFAULT_PRICER),
        max_result_bytes=max_result_bytes,
        history=history,
    )
    events = run.run()
    try:
        for event, payload in events:
            if event in ("done", "error"):
                _record_turn_end(store, run.session.id, event, payload)
            yield event, payload
    except Exception as exc:
        log.exception("the agent loop failed on session %s", run.session.id)
        unreachable = isinstance(exc, StoreUnavailableError)  # the record is down or frozen: try again
        failure: dict[str, Any] = {
            "kind": "internal",
            "message": STORE_ERROR_MESSAGE if unreachable else INTERNAL_ERROR_MESSAGE,
            "retryable": unreachable,
        }
        _record_turn_end(store, run.session.id, "error", failure)
        yield "error", failure
    finally:
        _close(events)  # a consumer that stops early still gets the partial answer persisted


def _record_turn_end(store: TranscriptStore, session_id: str, event: str, payload: dict[str, Any]) -> None:
    """Keep how the turn ended, so a history draws what the live run showed."""
    try:
        if event == "done":
            store.append_turn_end(session_id, stop_reason=payload.get("stop_reason"))
        else:
            store.append_turn_end(
                session_id, error_kind=payload.get("kind"), error_message=payload.get("message")
            )
    except Exception:  # the answer matters more than its bookkeeping
        log.exception("could not record how the turn ended on session %s", session_id)


def ask(
    store: TranscriptStore,
    session: Session | str,
    text: str,
    *,
    media: Sequence[Part] = (),
    **kwargs: Any,
) -> Iterator[LoopEvent]:
    """Persist the user's message now and return the loop over it."""
    session_id = session.id if isinstance(session, Session) else session
    store.append_message(session_id, Message.user(text, *media))
    return run_agent(session, store=store, **kwargs)


@dataclass
class _Run:
    session: Session
    store: TranscriptStore
    backend: Backend
    model: str
    inference: dict[str, Any] | None
    context: Any
    budget: Budget | None
    max_tool_cycles: int
    follow_up_instruction: str | None
    tools: Sequence[ToolSpec] | None
    registry: ToolRegistry
    retry: RetryPolicy
    cancel: threading.Event | None
    pricer: Pricer
    max_result_bytes: int
    history: Sequence[Message] | None = None  # as the caller stored it; None: read it
    sent: list[Message] = field(default_factory=list)  # the history as sent to the backend

    def _persist(self, message: Message) -> Message:
        """Write a message and keep it in this run's history (loaded once per run)."""
        stored = self.store.append_message(self.session.id, message)
        # The loop answers every tool call before the next model call, so the
        # history as sent grows by this message alone (capped when it is a result).
        self.sent.append(capped_message(stored, self.max_result_bytes) if stored.role == "tool" else stored)
        return stored

    def run(self) -> Iterator[LoopEvent]:
        stored = list(self.history) if self.history is not None else self.store.load_messages(self.session.id)
        self.sent = build_messages(stored, self.max_result_bytes)
        specs = (
            list(self.tools) if self.tools is not None else self.registry.catalog_for(self.session.purpose)
        )
        offered = [s["name"] for s in specs]
        cycle = 0
        while True:
            if self.cancel is not None and self.cancel.is_set():  # stopped before this call began
                yield "done", {"session_id": self.session.id, "stop_reason": "cancelled"}
                return
            if self.budget is not None:
                try:
                    self.budget.check(self.session.user, store=self.store)
                except BudgetExceeded as exc:
                    log.info("budget refused user %s: %s", self.session.user, exc.bucket)
                    yield (
                        "error",
                        {"kind": "budget", "bucket": exc.bucket, "message": exc.message, "retryable": True},
                    )
                    return
            history = list(self.sent)
            system = self.session.system_prompt
            if cycle > 0:
                yield "follow_up", {"cycle": cycle, "text": FOLLOW_UP_TEXT}
                if self.follow_up_instruction:
                    system = (
                        f"{system}\n\n{self.follow_up_instruction}" if system else self.follow_up_instruction
                    )

            call = _Call()
            started = time.perf_counter()
            outcome = yield from self._stream(call, system, history, specs)
            if outcome != "ok":
                return

            parts = call.finish()
            done = call.done or {}
            usage = Usage.from_dict(done.get("usage"))
            elapsed = (time.perf_counter() - started) * 1000
            message = self._persist(
                Message(
                    role="assistant",
                    parts=parts,
                    backend=self.backend.name,
                    model_id=self.model,
                    stop_reason=done.get("stop_reason", "other"),
                    raw_stop_reason=done.get("raw_stop_reason"),
                    usage=usage,
                    tools_offered=offered,
                    latency_ms=elapsed,
                    ttft_ms=((call.first_at - started) * 1000) if call.first_at is not None else None,
                ),
            )
            yield "usage", self._usage_payload(message)

            tool_uses = message.tool_uses()
            if not tool_uses:
                yield "done", {"session_id": self.session.id, "stop_reason": message.stop_reason}
                return
            if cycle >= self.max_tool_cycles:
                self._close_unanswered(
                    tool_uses, "The tool-call limit for one question was reached; not run."
                )
                log.warning(
                    "session %s hit the tool-cycle ceiling (%d)", self.session.id, self.max_tool_cycles
                )
                yield (
                    "error",
                    {
                        "kind": "cycle_limit",
                        "message": (
                            f"I stopped after {self.max_tool_cycles} rounds of tool calls without reaching an answer. "
                            "Try a narrower question, or ask me to continue."
                        ),
                        "retryable": False,
                    },
                )
                return

            waiting = yield from self._run_tools(tool_uses, offered)
            if waiting:  # the run ends here; the analyst's decision continues it (approvals.decide)
                pending = [c.to_dict() for c in pending_calls(self.sent)]
                yield "done", {"session_id": self.session.id, "stop_reason": AWAITING, "pending": pending}
                return
            if self.cancel is not None and self.cancel.is_set():
                yield "done", {"session_id": self.session.id, "stop_reason": "cancelled"}
                return
            cycle += 1

    # -- one model call ------------------------------------------------------
    def _stream(
        self, call: _Call, system: str | None, history: list[Message], specs: list[ToolSpec]
    ) -> Generator[LoopEvent, None, str]:  # returns "ok" or "stopped"
        attempt = 0
        while True:
            try:
                stream = self.backend.stream(
                    system=system, messages=history, tools=specs, model=self.model, inference=self.inference
                )
                event: Any
                for event in stream:
                    ev: dict[str, Any] = event
                    if call.first_at is None:
                        call.first_at = time.perf_counter()
                    kind = ev["kind"]
                    if kind == "text":
                        if call.buffer_kind != "text":
                            call.flush()
                            call.buffer_kind = "text"
                        call.buffer.append(ev["text"])
                        yield "token", ev
                    elif kind == "reasoning":
                        self._on_reasoning(call, ev)
                        yield "reasoning", ev
                    elif kind == "tool_use":
                        call.flush()
                        call.parts.append(Part.of_tool_use(ev["id"], ev["name"], ev["input"], ev.get("raw")))
                        yield "tool_use", ev
                    elif kind == "done":
                        call.done = dict(ev)
                    if self._cancelled():
                        _close(stream)
                        yield from self._stop_cancelled(call)
                        return "stopped"
                return "ok"
            except GeneratorExit:
                self._persist_partial(call, "cancelled")
                raise
            except BackendError as exc:
                if self._cancelled():  # the stream was stopped for the cancel (or failed after it)
                    log.debug("stream ended after a cancel: %r", exc)
                    yield from self._stop_cancelled(call)
                    return "stopped"
                if call.first_at is None and exc.retryable and attempt + 1 < self.retry.attempts:
                    delay = self.retry.delay(attempt, exc)
                    log.warning(
                        "backend %s failed (attempt %d), retrying in %.2fs: %r",
                        self.backend.name,
                        attempt + 1,
                        delay,
                        exc,
                    )
                    attempt += 1
                    self.retry.sleep(delay)
                    if self._cancelled():  # during the backoff: no new call
                        yield from self._stop_cancelled(call)
                        return "stopped"
                    continue
                yield from self._fail(call, exc)
                return "stopped"
            except Exception as exc:  # an adapter bug must not crash the surface either
                yield from self._fail(
                    call, BackendError(f"unexpected {type(exc).__name__}: {exc}", cause=exc)
                )
                return "stopped"

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _stop_cancelled(self, call: _Call) -> Iterator[LoopEvent]:
        self._persist_partial(call, "cancelled")
        yield "done", {"session_id": self.session.id, "stop_reason": "cancelled"}

    def _on_reasoning(self, call: _Call, ev: dict[str, Any]) -> None:
        if "redacted" in ev:
            call.flush()
            call.parts.append(Part.of_reasoning(None, ev["redacted"]))
            return
        if call.buffer_kind != "reasoning":
            call.flush()
            call.buffer_kind = "reasoning"
        if ev.get("text"):
            call.buffer.append(ev["text"])
        if ev.get("signature"):
            call.signature = ev["signature"]

    def _fail(self, call: _Call, exc: BackendError) -> Iterator[LoopEvent]:
        log.error(
            "backend %s failed on session %s (status=%s, retryable=%s): %s",
            self.backend.name, self.session.id, exc.status, exc.retryable, exc.message,
            exc_info=exc.cause or exc,
        )  # fmt: skip
        self._persist_partial(call, "error", raw=f"error: {exc.message}"[:500])
        yield (
            "error",
            {
                "kind": "backend",
                "message": calm_message(exc),
                "retryable": exc.retryable,
                "status": exc.status,
            },
        )

    def _persist_partial(self, call: _Call, reason: StopReason, raw: str | None = None) -> None:
        """Keep what the user already saw: the partial answer, marked as such."""
        parts = call.finish()
        if not parts:
            return
        message = self._persist(
            Message(
                role="assistant",
                parts=parts,
                backend=self.backend.name,
                model_id=self.model,
                stop_reason=reason,
                raw_stop_reason=raw or reason,
                usage=Usage(),
            ),
        )
        tool_uses = message.tool_uses()
        if tool_uses:
            self._close_unanswered(tool_uses, "The answer was cut off before this tool ran.")

    def _close_unanswered(self, tool_uses: list[Part], why: str) -> None:
        result = error_result("not_run", why)
        self._persist(
            Message(
                role="tool",
                parts=[
                    Part.of_tool_result(p.tool_use_id or "", p.tool_name, result, "error") for p in tool_uses
                ],
            ),
        )

    # -- tools ------------------------------------------------------------------
    def _run_tools(self, tool_uses: list[Part], offered: list[str]) -> Generator[LoopEvent, None, bool]:
        """Run the calls of one model answer; returns whether one of them waits for the analyst."""
        results: list[Part] = []
        effects: list[dict[str, Any]] = []
        waiting = False
        try:
            for use in tool_uses:
                if self.cancel is not None and self.cancel.is_set():
                    results.append(
                        Part.of_tool_result(
                            use.tool_use_id or "",
                            use.tool_name,
                            error_result("cancelled", "Stopped by the user."),
                            "error",
                        )
                    )
                    continue
                yield "tool_start", {"id": use.tool_use_id, "name": use.tool_name}
                out = run_tool(
                    use, self.context, registry=self.registry, offered=offered, session=self.session
                )
                results.append(out.to_part())
                effects.extend(out.effects)
                if is_pending(out.result):
                    waiting = True
                    error = out.result["error"]
                    yield "approval", {"id": out.tool_use_id, "name": out.name, "args": use.tool_input,
                                       "summary": error.get("summary"), "why": error.get("why"), "state": "pending"}  # fmt: skip
                    continue
                yield (
                    "tool_result",
                    {
                        "id": out.tool_use_id,
                        "name": out.name,
                        "status": out.status,
                        "result": out.result,
                        "duration_ms": out.duration_ms,
                    },
                )
        finally:
            # Persist whatever ran, even when the consumer stops mid-way.
            answered = {p.tool_use_id for p in results}
            for use in tool_uses:
                if use.tool_use_id not in answered:
                    results.append(
                        Part.of_tool_result(
                            use.tool_use_id or "",
                            use.tool_name,
                            error_result("cancelled", "Stopped by the user."),
                            "error",
                        )
                    )
            self._persist(Message(role="tool", parts=results))
        if effects:
            yield "effects", {"effects": effects}
        return waiting

    def _usage_payload(self, message: Message) -> dict[str, Any]:
        usage = message.usage or Usage()
        cost, uncached = self.pricer.price_message(message)
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


def _close(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()
