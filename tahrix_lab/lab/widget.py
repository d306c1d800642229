"""ChatWidget: the assistant in a notebook cell (an anywidget).

The front end is ``widgets/flow.js`` (the renderer shared with the job
service's page) joined with ``widgets/chat.js`` (the anywidget glue). The loop
runs in a background thread so the kernel stays free; each loop tuple becomes
a chunk (``tahrix_lab.flow.to_chunk``) numbered by ``seq`` (how many chunks
the conversation has had).

How the chunks reach the views (batched live messages, a synced snapshot,
resyncs for a view that is behind) is ``chat_transport``.

``ask()`` blocks the cell, yet Stop works while it waits: the kernel acts
on a Stop as it receives it (``kernel_wait.route_stop``; on older kernels
``jupyter_ui_poll`` handles UI messages during the wait).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import anywidget
import traitlets

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.decisions import decide as decide_loop
from tahrix_lab.agent.errors import ConfigurationError, UserFacingError
from tahrix_lab.agent.loop import ask as ask_loop
from tahrix_lab.agent.pricing import DEFAULT_PRICER
from tahrix_lab.agent.retry import INTERNAL_ERROR_MESSAGE
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Session
from tahrix_lab.case.citations import with_citations
from tahrix_lab.case.context import CaseContextProvider
from tahrix_lab.flow import Chunk, compact, history_chunks, to_chunk
from tahrix_lab.flow.resources import widget_bundle, widget_file
from tahrix_lab.lab.chat_transport import FLUSH_S, SNAPSHOT_S, ChatTransport
from tahrix_lab.lab.kernel_wait import route_early, wait_for_thread
from tahrix_lab.lab.run_log import RunLog

__all__ = ["FLUSH_S", "SNAPSHOT_S", "ChatWidget", "compact"]

log = logging.getLogger(__name__)

EffectCallback = Callable[[dict[str, Any]], Any]
FOLLOW_UP_MODES = ("keep", "replace")


class ChatWidget(anywidget.AnyWidget):
    """A chat with the assistant, drawn in order: reasoning, tool calls, answer.

    ``send(text)`` starts a run and returns at once; ``ask(text)`` waits and
    returns the answer; ``stop()`` ends a run (the loop keeps the partial
    answer). ``session`` is ``None`` (a new session), a ``Session`` or a
    session id; a session that already has messages is shown first.
    ``run_kwargs`` go to the loop (``max_tool_cycles``, ``tools``,
    ``follow_up_instruction``, ``retry``, ``pricer`` …).
    """

    _esm = widget_bundle(
        "cards.js", "citations.js", "markdown.js", "flow.js", "chat.js"
    )  # each after what it imports
    _css = "\n".join(widget_file(name).read_text(encoding="utf-8") for name in ("flow.css", "citations.css"))

    chunks = traitlets.List(traitlets.Dict()).tag(sync=True)  # the snapshot before the current run
    live = traitlets.List(traitlets.Dict()).tag(sync=True)  # the current run so far
    seq = traitlets.Int(0).tag(sync=True)  # how many chunks chunks + live cover
    busy = traitlets.Bool(False).tag(sync=True)
    meter = traitlets.Dict().tag(sync=True)
    follow_up_mode = traitlets.Unicode("keep").tag(sync=True)
    session_id = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        *,
        store: TranscriptStore,
        session: Session | str | None = None,
        backend: Backend,
        model: str,
        context: Any = None,
        budget: Budget | None = None,
        registry: ToolRegistry | None = None,
        inference: dict[str, Any] | None = None,
        follow_up_mode: str = "keep",
        user: str = "analyst",
        purpose: str = "chat",
        system_prompt: str | None = None,
        error_details: bool = True,
        **run_kwargs: Any,
    ) -> None:
        if follow_up_mode not in FOLLOW_UP_MODES:
            raise ValueError(f"follow_up_mode must be 'keep' or 'replace', not {follow_up_mode!r}.")
        self.store = store
        self.backend = backend
        self.model_name = model
        self.context = context
        self.budget = budget
        self.registry = registry
        self.inference = inference
        self.run_kwargs = run_kwargs
        self.session = self._resolve_session(session, user, purpose, system_prompt)
        self._lock = threading.RLock()
        self._transport = ChatTransport(self._stored_history(), lock=self._lock, post=self._post,
                                        publish=self._publish)  # fmt: skip
        self._error_details = error_details
        self._run_log: RunLog | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._answer: list[str] = []
        self._effect_callbacks: list[EffectCallback] = []
        super().__init__(
            chunks=list(self._transport.snap),
            seq=self._transport.seq,
            follow_up_mode=follow_up_mode,
            session_id=self.session.id,
            meter=self._meter(),
        )
        self.on_msg(self._on_front_end)
        # Stop works even while a cell blocks the kernel's main thread (ask, or any long cell).
        route_early(self.comm, self._early)

    @classmethod
    def from_session(
        cls, session_id: str, *, store: TranscriptStore, backend: Backend, model: str, **kwargs: Any
    ) -> ChatWidget:
        """Show a stored conversation (reasoning, tools and answers in order) and continue it."""
        return cls(store=store, session=session_id, backend=backend, model=model, **kwargs)

    # -- public ------------------------------------------------------------
    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def send(self, text: str, *, nonce: str | None = None) -> None:  # ipywidgets' send() is _post() here
        """Start answering ``text`` in a background thread and return at once.

        ``nonce`` is the front end's name for a question it already shows.
        """
        text = (text or "").strip()
        if not text:
            raise ValueError("There is no question to send: the text is empty.")
        with self._lock:
            if self.running:
                raise RuntimeError("The assistant is still answering. Wait for it, or call stop() first.")
            self._cancel = threading.Event()
            self._answer = []
            self._transport.start_run()
            self._transport.nonce = nonce or uuid.uuid4().hex
            # busy first: a view that draws the snapshot holding this question keeps its turn open
            self.busy = True
            self._transport.emit({"type": "user", "text": text}, nonce=self._transport.nonce)
            cancel = self._cancel
            events = lambda: ask_loop(self.store, self.session, text, **self._loop_kwargs(cancel))  # noqa: E731
            self._thread = threading.Thread(target=self._run, args=(events,), name="tahrix-chat", daemon=True)
            self._thread.start()

    def decide(
        self, call_id: str, *, approve: bool, reason: str | None = None, by: str | None = None
    ) -> None:
        """Approve or deny a call that waits for the analyst (what the card's buttons do), then go on.

        ``by`` is the analyst deciding, by default the session's user; the call runs under
        their name. Runs in the background like ``send``; raises ``UserFacingError`` when no
        such call waits (decided already, or a new question was asked).
        """
        with self._lock:
            if self.running:
                raise RuntimeError("The assistant is still answering. Wait for it, or call stop() first.")
            cancel = threading.Event()
            events = decide_loop(self.store, self.session, call_id, approve=approve, by=by or self.session.user,
                                 reason=reason, **self._loop_kwargs(cancel))  # fmt: skip
            self._cancel, self._answer = cancel, []
            self._transport.start_run()
            self.busy = True
            self._thread = threading.Thread(
                target=self._run, args=(lambda: events,), name="tahrix-decision", daemon=True
            )
            self._thread.start()

    def _loop_kwargs(self, cancel: threading.Event) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model_name, "inference": self.inference,
                "context": self.context, "budget": self.budget, "registry": self.registry, "cancel": cancel,
                **self.run_kwargs}  # fmt: skip

    def ask(self, text: str, timeout: float | None = None) -> str:
        """Answer ``text`` and block until done; returns the final answer's text.

        In a kernel the Stop button works while the cell is blocked (see
        ``kernel_wait``); a question typed meanwhile is shown at once and
        taken when the cell ends.
        """
        self.send(text)
        self.wait(timeout)
        return self.answer

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the current run; ``False`` if it is still running after ``timeout`` s."""
        thread = self._thread
        if thread is not None:
            wait_for_thread(thread, timeout)
        return not self.running

    def stop(self) -> None:
        """Stop the current run; what was streamed so far is kept in the transcript."""
        self._cancel.set()

    @property
    def answer(self) -> str:
        """The text of the last model call of the latest run (the synthesis after any tools)."""
        return "".join(self._answer)

    def on_effect(self, callback: EffectCallback) -> EffectCallback:
        """Call ``callback(effect)`` for each effect a tool reports (usable as a decorator)."""
        self._effect_callbacks.append(callback)
        return callback

    def history(self) -> list[Chunk]:
        """A copy of the conversation as chunks (one per block), in order."""
        with self._lock:
            return list(self._transport.snap)

    def close(self) -> None:
        cancel = getattr(self, "_cancel", None)  # absent when __init__ refused its arguments
        if cancel is not None:
            cancel.set()
        super().close()

    # -- the run -------------------------------------------------------------
    def _with_citations(
        self, events: Iterable[tuple[str, dict[str, Any]]]
    ) -> Iterable[tuple[str, dict[str, Any]]]:
        """In a case investigation, each answer ends with its citations checked against the case."""
        if not isinstance(self.context, CaseContextProvider):
            return events
        link = self.context.db.session_link(self.session.id)
        return events if link is None else with_citations(events, self.context.db, link[0])

    def _run(self, make_events: Callable[[], Iterable[tuple[str, dict[str, Any]]]]) -> None:
        # In a notebook the analyst is the operator: an error row can show what was logged.
        run_log = RunLog.start() if self._error_details else None
        self._run_log = run_log
        try:
            for event, payload in self._with_citations(make_events()):
                self._handle(event, payload)
        except Exception:  # the loop never raises; a bad argument here might
            log.exception("the chat run failed on session %s", self.session.id)
            self._transport.emit(
                self._with_details({"type": "error", "kind": "internal", "message": INTERNAL_ERROR_MESSAGE})
            )
        finally:
            if run_log is not None:
                run_log.stop()
            with self._lock:
                self._transport.end_run()
                self.busy = False

    def _handle(self, event: str, payload: dict[str, Any]) -> None:
        if event == "follow_up":
            self._answer = []
        elif event == "token":
            self._answer.append(payload.get("text") or "")
        chunk = to_chunk(event, payload)
        if chunk is not None:
            self._transport.emit(self._with_details(chunk) if event == "error" else chunk)
        if event == "usage" and self.budget is not None:
            self.meter = self._meter()
        if event == "effects":
            for effect in payload.get("effects") or []:
                self._fire(effect)

    def _fire(self, effect: dict[str, Any]) -> None:
        for callback in list(self._effect_callbacks):
            try:
                callback(effect)
            except Exception:  # one broken listener must not stop the answer
                log.exception("an on_effect callback failed for %r", effect)

    # -- the views ---------------------------------------------------------------
    def _early(self, data: Any) -> None:
        """A message from a view, seen on the shell-channel thread before the main thread is free."""
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "stop":
            self._cancel.set()
        elif kind == "resync" and self.running:  # a view rendered late, or missed a message
            self._transport.catch_up()

    def _with_details(self, chunk: Chunk) -> Chunk:
        log_ = self._run_log
        details = log_.text() if log_ is not None else ""
        return {**chunk, "details": details} if details else chunk

    def _post(self, content: dict[str, Any]) -> None:
        # ipywidgets' Widget.send, under another name: `send` asks the assistant here.
        self._send({"method": "custom", "content": content})

    def _publish(self, **traits: Any) -> None:
        with self.hold_sync():  # one update, so a view sees them together
            for name, value in traits.items():
                setattr(self, name, value)

    def _on_front_end(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "send":
            nonce = content.get("nonce")
            nonce = str(nonce) if nonce else None
            try:
                self.send(str(content.get("text") or ""), nonce=nonce)
            except (RuntimeError, ValueError) as exc:
                log.info("refused a send from the widget: %s", exc)
                self._post({"type": "refused", "nonce": nonce, "message": str(exc)})
        elif kind == "stop":
            self.stop()
        elif kind == "decide":  # the analyst at this notebook clicked Approve or Deny
            call_id, approve, reason = content.get("id"), content.get("approve"), content.get("reason")
            try:
                self.decide(str(call_id or ""), approve=approve is True, reason=str(reason or "") or None)
            except (RuntimeError, UserFacingError) as exc:
                log.info("refused a decision from the widget: %s", exc)
                self._post({"type": "refused", "id": call_id, "message": str(exc)})
        elif kind == "resync":
            self._transport.resync(content.get("since"))

    # -- helpers -------------------------------------------------------------------
    def _resolve_session(
        self, session: Session | str | None, user: str, purpose: str, system_prompt: str | None
    ) -> Session:
        if session is None:
            return self.store.create_session(user=user, purpose=purpose, system_prompt=system_prompt)
        if isinstance(session, str):
            return self.store.get_session(session)
        try:
            return self.store.get_session(session.id)
        except ConfigurationError:  # a Session object not stored yet
            return self.store.create_session(session=session)

    def _stored_history(self) -> list[Chunk]:
        pricer = self.run_kwargs.get("pricer") or (self.budget.pricer if self.budget else DEFAULT_PRICER)

        sid = self.session.id
        return history_chunks(
            self.store.load_messages(sid), self.store.load_turn_ends(sid), price=pricer.price_message
        )

    def _meter(self) -> dict[str, float]:
        if self.budget is None:
            return {}
        fill = self.budget.meter(self.session.user, store=self.store)
        return {bucket: value for bucket, value in fill.items() if value is not None}
