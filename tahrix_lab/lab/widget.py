"""ChatWidget: the assistant in a notebook cell (an anywidget).

The front end is ``widgets/flow.js`` (the renderer shared with the job
service's page) joined with ``widgets/chat.js`` (the anywidget glue). The loop
runs in a background thread so the kernel stays free; each loop tuple becomes
a chunk (``tahrix_lab.flow.to_chunk``) that is

* appended to ``_chunks``, the authoritative ordered conversation, mirrored to
  the synced ``chunks`` trait (so a re-display or a page reload shows it all);
* sent at once as a custom message ``{"type": "chunks", "start": i, "chunks":
  [...]}`` for live drawing. ``start`` is the chunk's index: a view skips
  what it already drew and asks for a resend (``{"type": "resync", "since":
  n}``) when it sees a gap, so nothing is lost or drawn twice.

Syncing a whole list is costly, so during a stream the trait is refreshed on
every block boundary (tool call, tool result, usage, …) and at most twice a
second for tokens. When a run ends, its token chunks are merged into one chunk
per block (what a stored history gives, and it draws the same) and ``epoch``
goes up: views then redraw from the trait, and index messages of another epoch
are ignored, so a long conversation does not keep one chunk per token.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.loop import ask as ask_loop
from tahrix_lab.agent.store import TranscriptStore
from tahrix_lab.agent.tools import ToolRegistry
from tahrix_lab.agent.transcript import Session
from tahrix_lab.flow import Chunk, history_chunks, to_chunk
from tahrix_lab.resources import widget_file

log = logging.getLogger(__name__)

EffectCallback = Callable[[dict[str, Any]], Any]
FOLLOW_UP_MODES = ("keep", "replace")
_STREAMING = frozenset({"content", "reasoning"})
_TRAIT_INTERVAL_S = 0.5


def _bundle() -> str:
    # anywidget serves _esm as one module: a relative import of flow.js would
    # not resolve, so the renderer and the glue are joined here.
    return (
        widget_file("flow.js").read_text(encoding="utf-8")
        + "\n"
        + widget_file("chat.js").read_text(encoding="utf-8")
    )


class ChatWidget(anywidget.AnyWidget):
    """A chat with the assistant, drawn in order: reasoning, tool calls, answer.

    ``send(text)`` starts a run and returns at once; ``ask(text)`` waits and
    returns the answer; ``stop()`` ends a run (the loop keeps the partial
    answer). ``session`` is ``None`` (a new session), a ``Session`` or a
    session id; a session that already has messages is shown first.
    ``run_kwargs`` go to the loop (``max_tool_cycles``, ``tools``,
    ``follow_up_instruction``, ``retry``, ``pricer`` …).
    """

    _esm = _bundle()
    _css = widget_file("flow.css").read_text(encoding="utf-8")

    chunks = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    meter = traitlets.Dict().tag(sync=True)
    follow_up_mode = traitlets.Unicode("keep").tag(sync=True)
    session_id = traitlets.Unicode("").tag(sync=True)
    epoch = traitlets.Int(0).tag(sync=True)

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
        self._chunks: list[Chunk] = compact(history_chunks(store.load_messages(self.session.id)))
        self._synced_at = 0.0
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._answer: list[str] = []
        self._effect_callbacks: list[EffectCallback] = []
        super().__init__(
            chunks=list(self._chunks),
            follow_up_mode=follow_up_mode,
            session_id=self.session.id,
            meter=self._meter(),
        )
        self.on_msg(self._on_front_end)

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

    def send(self, text: str) -> None:  # ipywidgets' own send() is _post() here
        """Start answering ``text`` in a background thread and return at once."""
        text = (text or "").strip()
        if not text:
            raise ValueError("There is no question to send: the text is empty.")
        with self._lock:
            if self.running:
                raise RuntimeError("The assistant is still answering. Wait for it, or call stop() first.")
            self._cancel = threading.Event()
            self._answer = []
            self._emit({"type": "user", "text": text}, sync=True)
            self.busy = True
            self._thread = threading.Thread(target=self._run, args=(text,), name="tahrix-chat", daemon=True)
            self._thread.start()

    def ask(self, text: str, timeout: float | None = None) -> str:
        """Answer ``text`` and block until done; returns the final answer's text."""
        self.send(text)
        self.wait(timeout)
        return self.answer

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the current run; ``False`` if it is still running after ``timeout`` s."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
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
        """A copy of the conversation as chunks, in order."""
        with self._lock:
            return list(self._chunks)

    def close(self) -> None:
        cancel = getattr(self, "_cancel", None)  # absent when __init__ refused its arguments
        if cancel is not None:
            cancel.set()
        super().close()

    # -- the run -------------------------------------------------------------
    def _run(self, text: str) -> None:
        try:
            events = ask_loop(
                self.store,
                self.session,
                text,
                backend=self.backend,
                model=self.model_name,
                inference=self.inference,
                context=self.context,
                budget=self.budget,
                registry=self.registry,
                cancel=self._cancel,
                **self.run_kwargs,
            )
            for event, payload in events:
                self._handle(event, payload)
        except Exception:  # the loop never raises; a bad argument here might
            log.exception("the chat run failed on session %s", self.session.id)
            self._emit(
                {
                    "type": "error",
                    "kind": "internal",
                    "message": "Something went wrong on our side while answering. The details are in the log.",
                }
            )
        finally:
            with self._lock:
                merged = compact(self._chunks)
                if len(merged) < len(self._chunks):
                    # views that drew every chunk keep their DOM; others reload
                    self._post({"type": "merged", "from_epoch": self.epoch, "epoch": self.epoch + 1,
                                "raw_length": len(self._chunks)})  # fmt: skip
                    self._chunks = merged
                    with self.hold_sync():  # one update carries both, so a view sees them together
                        self.epoch += 1
                        self.chunks = list(merged)
                self._sync()  # complete before busy flips, so views end on the full list
                self.busy = False

    def _handle(self, event: str, payload: dict[str, Any]) -> None:
        if event == "follow_up":
            self._answer = []
        elif event == "token":
            self._answer.append(payload.get("text") or "")
        chunk = to_chunk(event, payload)
        if chunk is not None:
            self._emit(chunk)
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

    # -- transport ---------------------------------------------------------------
    def _emit(self, chunk: Chunk, *, sync: bool = False) -> None:
        with self._lock:
            start = len(self._chunks)
            self._chunks.append(chunk)
            self._post({"type": "chunks", "epoch": self.epoch, "start": start, "chunks": [chunk]})
            now = time.monotonic()
            if sync or chunk["type"] not in _STREAMING or now - self._synced_at >= _TRAIT_INTERVAL_S:
                self._sync()

    def _sync(self) -> None:
        self._synced_at = time.monotonic()
        if len(self.chunks) != len(self._chunks):
            self.chunks = list(self._chunks)

    def _post(self, content: dict[str, Any]) -> None:
        # ipywidgets' Widget.send, under another name: `send` asks the assistant here.
        self._send({"method": "custom", "content": content})

    def _on_front_end(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "send":
            try:
                self.send(str(content.get("text") or ""))
            except (RuntimeError, ValueError) as exc:
                log.info("ignored a send from the widget: %s", exc)
        elif kind == "stop":
            self.stop()
        elif kind == "resync":
            since = content.get("since")
            with self._lock:
                # a view of another epoch reloads from the trait instead
                if content.get("epoch", self.epoch) != self.epoch:
                    return
                if isinstance(since, int) and 0 <= since < len(self._chunks):
                    self._post(
                        {
                            "type": "chunks",
                            "epoch": self.epoch,
                            "start": since,
                            "chunks": self._chunks[since:],
                        }
                    )

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

    def _meter(self) -> dict[str, float]:
        if self.budget is None:
            return {}
        fill = self.budget.meter(self.session.user, store=self.store)
        return {bucket: value for bucket, value in fill.items() if value is not None}


def compact(chunks: list[Chunk]) -> list[Chunk]:
    """Merge runs of token chunks (content, or reasoning with the same flags) into one chunk each."""
    out: list[Chunk] = []
    for chunk in chunks:
        prev = out[-1] if out else None
        if (
            prev is not None
            and chunk["type"] in _STREAMING
            and prev["type"] == chunk["type"]
            and {k: v for k, v in prev.items() if k != "text"}
            == {k: v for k, v in chunk.items() if k != "text"}
        ):
            out[-1] = {**prev, "text": (prev.get("text") or "") + (chunk.get("text") or "")}
        else:
            out.append(chunk)
    return out
