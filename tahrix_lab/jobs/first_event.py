"""A model call's first event awaited where a cancel can interrupt it, for backends read on
the job's own thread (no ``astream``: Bedrock, whose boto3 read blocks).

A model may think for a long time before its first word, and a blocking read
cannot be interrupted from another thread. So each call is opened, and its
first event read, on a short-lived helper thread, while the job's thread waits
for it and looks at the job's ``cancel`` meanwhile. Cancelled first, the job's
thread raises, and the loop ends the run as cancelled at once (a stream that
fails once ``cancel`` is set is a cancel); the helper closes the provider's
stream as soon as its read returns. After the first event the stream is read
on the job's thread as before: one helper per model call, none per token.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tahrix_lab.agent.errors import BackendError

CANCELLED = "The answer was stopped before its first word."
POLL_S = 1.0  # a cancel that is a plain Event (no wake-ups) is looked at this often


class CancelFlag(threading.Event):
    """A job's cancel: an ``Event`` that also wakes the job's thread where it waits for a
    model's first event (no polling: hundreds of jobs may be waiting at once)."""

    def __init__(self) -> None:
        super().__init__()
        self._wakes: list[Callable[[], None]] = []

    def set(self) -> None:
        super().set()
        for wake in list(self._wakes):
            wake()

    def on_set(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` when the flag is set; returns what undoes it."""
        self._wakes.append(wake)
        return lambda: self._wakes.remove(wake) if wake in self._wakes else None


class FirstEventBackend:
    """``backend`` as one job's run sees it: ``stream`` awaits each call's first event on a
    helper thread, watching ``cancel``. Anything else is the backend's."""

    def __init__(self, backend: Any, cancel: threading.Event, *, poll_s: float = POLL_S) -> None:
        self.backend = backend
        self.name: str = backend.name
        self.cancel = cancel
        self.poll_s = poll_s

    def stream(self, **request: Any) -> _FirstEventStream:
        return _FirstEventStream(self.backend, request, self.cancel, self.poll_s)

    def __getattr__(self, name: str) -> Any:  # anything else the loop or a budget asks of it
        return getattr(self.backend, name)


class _FirstEventStream:
    def __init__(self, backend: Any, request: dict[str, Any], cancel: threading.Event, poll_s: float) -> None:
        self.cancel = cancel
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._wake = threading.Event()  # set when the first event arrives or the job is cancelled
        # (the provider's stream, its iterator, and its first event, an exception or _END)
        self._first: tuple[Any, Iterator[Any], Any] | None = None
        self._abandoned = False  # the job stopped waiting: the helper closes what it opened
        self._rest: Iterator[Any] | None = None
        on_set = getattr(cancel, "on_set", None)
        self._unwatch: Callable[[], None] = on_set(self._wake.set) if on_set is not None else lambda: None
        threading.Thread(target=self._open, args=(backend, request), name="tahrix-first-event",
                         daemon=True).start()  # fmt: skip

    def _open(self, backend: Any, request: dict[str, Any]) -> None:
        stream: Any = None
        events: Iterator[Any] = iter(())
        try:
            stream = backend.stream(**request)
            events = iter(stream)
            first: Any = next(events, _END)
        except BaseException as exc:  # raised on the job's thread, as a read there would
            first = exc
        with self._lock:
            self._first = (stream, events, first)
            abandoned = self._abandoned
        self._wake.set()
        if abandoned:
            _close(stream)

    def __iter__(self) -> _FirstEventStream:
        return self

    def __next__(self) -> Any:
        if self._rest is not None:
            return next(self._rest)
        try:
            while self._first is None:
                if self.cancel.is_set():
                    with self._lock:
                        if self._first is None:  # still thinking: stop waiting for it
                            self._abandoned = True
                            raise BackendError(CANCELLED, retryable=False)
                self._wake.wait(self.poll_s)
        finally:
            self._unwatch()
        assert self._first is not None
        _stream, self._rest, first = self._first
        if first is _END:
            raise StopIteration
        if isinstance(first, BaseException):
            raise first
        return first

    def close(self) -> None:
        """The loop stops reading: close the provider's stream (once it is open)."""
        with self._lock:
            if self._first is None:
                self._abandoned = True
                return
            stream = self._first[0]
        _close(stream)


_END = object()


def _close(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
