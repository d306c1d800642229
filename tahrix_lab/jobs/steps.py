"""Streamed steps on one event loop: the one way the runner drives a job.

A run is a synchronous generator with its own thread, but a thread woken for every token
costs more than the tokens (500 jobs x 20 tokens/s: 10,000 wake-ups a second starving the
Redis writer). So one event loop thread (``StreamSteps``) reads every model stream and takes
each *streamed step*: the next event already read is text, reasoning or a tool call, which the
loop only yields. Every other step is the job's own thread's, so the loop never runs on two
threads at once. docs/service.md ("Runs stream on one event loop") has the measurements.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from tahrix_lab.agent.backends.base import Backend, stream_in_thread
from tahrix_lab.agent.errors import BackendError
from tahrix_lab.agent.loop import LoopEvent

# Loop events yielded straight from one backend event (after which the loop reads the stream).
STREAMED = frozenset({"token", "reasoning", "tool_use"})
# Backend events the loop only records and yields: safe to step on the event loop.
_PLAIN = frozenset({"text", "reasoning", "tool_use"})
_END = object()  # the stream is over
STOPPING = "The answer was interrupted: the service is stopping."
CANCELLED = "The answer was stopped before its first word."


class _Run:
    """One run between its thread and the event loop (the state below changes under ``cond``)."""

    def __init__(self, events_for: Callable[[Backend], Iterator[LoopEvent]], backend: Any,
                 handle: Callable[[str, dict[str, Any]], None], cancel: threading.Event, steps: StreamSteps) -> None:  # fmt: skip
        self.cond = threading.Condition()
        self.handle = handle
        self.cancel = cancel
        self.feed: _Feed | None = None
        self.parked = False  # the thread sleeps: the event loop takes the streamed steps
        self.stepping = False  # the event loop is inside one of them (nobody may hand it back)
        self.failure: BaseException | None = None  # raised by a step on the event loop
        self.events = events_for(_RunBackend(backend, self, steps))


class _Feed:
    """One model call's stream as the loop reads it: the events read on the event loop so far."""

    def __init__(self, run: _Run, steps: StreamSteps) -> None:
        self.run = run
        self.steps = steps
        self.items: deque[Any] = deque()
        self.task: asyncio.Task[None] | None = None
        self.closed = False

    def __iter__(self) -> _Feed:
        return self

    def __next__(self) -> Any:
        with self.run.cond:
            while not self.items:  # only the run's thread waits here (the first event of a call)
                if self.run.cancel.is_set():  # stopped before the model said anything: stop it
                    self.close()
                    raise BackendError(CANCELLED, retryable=False)  # the loop ends it as cancelled
                if not self.run.cond.wait(1.0) and not self.items and not self.steps.running():
                    raise BackendError(STOPPING, retryable=False)  # no event loop to read it
            item = self.items.popleft()
        if item is _END:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """The loop stops reading (cancelled, or done): stop reading the provider."""
        self.closed = True
        self.steps.cancel(self)


class _RunBackend:
    """The backend as one run sees it: ``stream`` returns a feed read on the event loop."""

    def __init__(self, backend: Any, run: _Run, steps: StreamSteps) -> None:
        self.backend = backend
        self.name: str = backend.name
        self.run = run
        self.steps = steps

    def stream(self, **request: Any) -> _Feed:
        self.steps.used(self.backend)
        feed = _Feed(self.run, self.steps)
        with self.run.cond:
            self.run.feed = feed
        astream = getattr(self.backend, "astream", None)
        stream = (
            astream(**request)
            if astream is not None
            else stream_in_thread(lambda: self.backend.stream(**request))
        )
        self.steps.read(feed, stream)
        return feed

    def __getattr__(self, name: str) -> Any:  # anything else the loop or a budget asks of it
        return getattr(self.backend, name)


class StreamSteps:
    """``drive`` from a job's thread; the event loop thread starts on first use, stops at ``close``."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._runs: set[_Run] = set()
        self._backends: dict[int, Any] = {}  # read here: their async clients close with the loop

    def drive(self, backend: Any, events_for: Callable[[Backend], Iterator[LoopEvent]],
              handle: Callable[[str, dict[str, Any]], None], cancel: threading.Event) -> None:  # fmt: skip
        """Run ``events_for(backend)`` to its end, passing each event to ``handle``: here, or on
        the event loop for the streamed steps. ``cancel`` set: the next step is taken here."""
        run = _Run(events_for, backend, handle, cancel, self)
        with self._lock:
            self._runs.add(run)
        try:
            for event, payload in run.events:  # advanced on the event loop too while parked
                handle(event, payload)
                if event in STREAMED:
                    self._park(run)
        finally:
            with self._lock:
                self._runs.discard(run)
            with contextlib.suppress(Exception):
                getattr(run.events, "close", lambda: None)()
            feed = run.feed
            if feed is not None and not feed.closed:  # ended early: stop reading the provider
                feed.close()

    def poke(self) -> None:
        """Hand every parked run whose ``cancel`` is set back to its thread, and wake a thread
        waiting for a call's first event: it stops the run now rather than at the stream's next
        event (which may be long in coming: a model thinking before its first word)."""
        with self._lock:
            runs = list(self._runs)
        for run in runs:
            if run.cancel.is_set():
                with run.cond:
                    if run.stepping:
                        continue  # the step's end sees the cancel
                    run.parked = False
                    run.cond.notify()

    def _park(self, run: _Run) -> None:
        """After a streamed step: sleep while the event loop takes the next ones, until a step
        is this thread's again (or a step there failed: raised here)."""
        with run.cond:
            feed = run.feed
            if feed is None or feed.items:
                return  # already here: cheaper to take it than to hand it over
            run.parked = True  # the next event that arrives is stepped on the event loop
            while run.parked:
                run.cond.wait()
            failure, run.failure = run.failure, None
        if failure is not None:
            raise failure

    # -- the event loop side ---------------------------------------------------
    def read(self, feed: _Feed, stream: AsyncIterator[Any]) -> None:
        loop = self._started()

        def start() -> None:
            feed.task = loop.create_task(self._pump(feed, stream))

        loop.call_soon_threadsafe(start)

    def cancel(self, feed: _Feed) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closing: the task goes with the loop
                loop.call_soon_threadsafe(lambda: feed.task.cancel() if feed.task is not None else None)

    async def _pump(self, feed: _Feed, stream: AsyncIterator[Any]) -> None:
        try:
            async for event in stream:
                if feed.closed:
                    return
                self._push(feed, event)
            self._push(feed, _END)
        except asyncio.CancelledError:
            if not feed.closed:  # the service is stopping under a run still reading
                self._push(feed, BackendError(STOPPING, retryable=False))
        except Exception as exc:  # the loop handles it as it would a synchronous stream's
            self._push(feed, exc)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    def _push(self, feed: _Feed, item: Any) -> None:
        run = feed.run
        with run.cond:
            feed.items.append(item)
            if not run.parked or run.feed is not feed:
                run.cond.notify()  # the thread may be waiting for it
                return
        self._advance(run)

    def _advance(self, run: _Run) -> None:
        """Take the run's streamed steps while their events are here; then hand it back to its
        thread, or leave it parked until the next event."""
        more = True
        while True:
            with run.cond:
                run.stepping = False
                if not run.parked:
                    return
                feed = run.feed
                head = feed.items[0] if feed is not None and feed.items else None
                if not more or run.cancel.is_set() or (head is not None and not _plain(head)):
                    run.parked = False  # the thread takes it from here
                    run.cond.notify()
                    return
                if head is None:
                    return  # parked until the next event
                run.stepping = True
            try:
                event, payload = next(run.events)
                run.handle(event, payload)
                more = event in STREAMED  # anything else after a plain event: the thread's
            except BaseException as exc:  # the loop catches its own: this is the handler's
                with run.cond:
                    run.failure = exc if not isinstance(exc, StopIteration) else None
                more = False

    def running(self) -> bool:
        """The event loop thread is there to read streams."""
        loop, thread = self._loop, self._thread
        return loop is not None and not loop.is_closed() and thread is not None and thread.is_alive()

    def used(self, backend: Any) -> None:
        if id(backend) not in self._backends:
            with self._lock:
                self._backends[id(backend)] = backend

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop: asyncio.AbstractEventLoop
                try:
                    import uvloop

                    loop = uvloop.new_event_loop()
                except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
                    loop = asyncio.new_event_loop()
                self._loop = loop
                self._thread = threading.Thread(target=loop.run_forever, name="tahrix-streams", daemon=True)
                self._thread.start()
            return self._loop

    def close(self, timeout: float = 5.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        backends = list(self._backends.values())

        async def stop() -> None:
            for task in asyncio.all_tasks(loop) - {asyncio.current_task()}:
                task.cancel()
            await asyncio.sleep(0.1)  # the pumps see their cancel and close their streams
            for backend in backends:  # e.g. OpenAIBackend's AsyncOpenAI, made on this loop
                aclose = getattr(backend, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(aclose(), 2.0)
            loop.stop()

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(lambda: loop.create_task(stop()))
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None


def _plain(item: Any) -> bool:
    return isinstance(item, dict) and item.get("kind") in _PLAIN


class BurstGate:
    """Admissions first: while requests arrive in a burst, a worker about to take a job
    (``wait()``) waits until ``quiet_s`` passes with no ``admitted()`` (at most ``max_s``), so
    hundreds of woken threads do not take the interpreter lock from the admissions.
    ``watching``: one worker waits, so the runner wakes no more."""

    def __init__(self, *, quiet_s: float = 0.005, max_s: float = 0.25) -> None:
        self.quiet_s = quiet_s
        self.max_s = max_s
        self.watching = False  # read without a lock: a stale value costs one wake-up at most
        self._last = 0.0  # monotonic time of the last admission
        self._lock = threading.Lock()  # one watcher; the other workers wait here, not waking

    def admitted(self) -> None:
        self._last = time.monotonic()

    def wait(self) -> None:
        with self._lock:
            self.watching = True
            try:
                until = time.monotonic() + self.max_s
                while (now := time.monotonic()) < until and now - self._last < self.quiet_s:
                    time.sleep(self.quiet_s)
            finally:
                self.watching = False
