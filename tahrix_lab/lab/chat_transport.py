"""The chat's chunks on their way to the views, linear in the conversation's size.

* live chunks go out as custom messages ``{"type": "chunks", "from": a,
  "to": b, "chunks": [...]}`` carrying chunks ``a..b`` with their tokens
  merged; they are batched (one message per ``FLUSH_S`` at most while tokens
  stream), because every message costs a Jupyter envelope of several hundred
  bytes;
* the synced traits are a compact snapshot (one chunk per block, see
  ``flow.compact``): ``chunks`` holds the conversation before the current run
  (refreshed when a run ends), ``live`` the current run so far, and ``seq``
  how many chunks both cover. A view that renders asks for a resync; the
  kernel sees that request at once on its shell-channel thread even while
  ``ask()`` blocks the main thread (``kernel_wait.route_early``) and
  refreshes ``live`` + ``seq`` (at most every ``SNAPSHOT_S``), which reaches
  the page from a background thread. ``seq`` is always the end of a live
  message already sent, so that view draws the snapshot and goes on with the
  next live message; views that are current cost nothing more;
* a view that is behind (opened mid-run, reconnected) asks ``{"type":
  "resync", "since": n}`` and gets the chunks from ``n`` (or the whole
  snapshot when ``n`` is older than the current run) before the next live
  message, so nothing is lost or drawn twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tahrix_lab.flow import Chunk, ChunkLog, compact

FLUSH_S = 0.05  # at most ~20 live messages a second, whatever the token rate
SNAPSHOT_S = 0.25  # how stale the synced snapshot of a running answer may be

Post = Callable[[dict[str, Any]], None]  # one custom message to every view
Publish = Callable[..., None]  # set synced traits (chunks, live, seq) in one update


class ChatTransport:
    """The conversation as chunks (``snap``, ``seq``) and how each new one reaches the views.

    ``lock`` is the widget's: a run's thread, the main thread and the
    shell-channel thread all come through here.
    """

    def __init__(self, snapshot: list[Chunk], *, lock: threading.RLock, post: Post, publish: Publish) -> None:
        self.lock = lock
        self._post = post
        self._publish = publish
        self.snap = snapshot
        self.seq = len(snapshot)
        self.published_seq = self.seq  # the seq the views were last given in the synced traits
        self._run_chunks = ChunkLog(base=self.seq)  # the current run's chunks, kept raw for resyncs
        self._snap_start = len(snapshot)  # where the current run starts in the snapshot
        self.nonce: str | None = None  # the front end's name for the question of the current run
        self._synced_at = 0.0
        self._behind = False  # a view asked to catch up during this run
        self._sync_timer: threading.Timer | None = None
        self._pending: list[Chunk] = []
        self._pending_from = self.seq
        self._flushed_at = 0.0
        self._timer: threading.Timer | None = None

    def start_run(self) -> None:
        self._snap_start = len(self.snap)

    def emit(self, chunk: Chunk, *, nonce: str | None = None) -> None:
        with self.lock:
            compact([chunk], into=self.snap)
            self.seq += 1
            self._run_chunks.append([chunk])
            self._pending.append({**chunk, "nonce": nonce} if nonce else chunk)
            wait = FLUSH_S - (time.monotonic() - self._flushed_at)
            if wait <= 0 or chunk["type"] in ("user", "done", "error"):
                self.flush()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        with self.lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._pending:
                return
            self._post({"type": "chunks", "from": self._pending_from, "to": self.seq,
                        "chunks": compact(self._pending)})  # fmt: skip
            self._pending, self._pending_from = [], self.seq
            self._flushed_at = time.monotonic()
            if self._behind:
                self._sync_snapshot()

    def end_run(self) -> None:
        """Send what is pending and make the whole conversation the synced snapshot."""
        with self.lock:
            self.flush()
            if self._sync_timer is not None:
                self._sync_timer.cancel()
                self._sync_timer = None
            # One update carries the snapshot and its seq, so a view sees them together.
            self._publish(chunks=list(self.snap), live=[], seq=self.seq)
            self.published_seq = self.seq
            self._run_chunks = ChunkLog(base=self.seq)
            self._snap_start = len(self.snap)

    def catch_up(self) -> None:
        """A view rendered late or missed a message during a run: refresh the synced snapshot soon."""
        with self.lock:
            self._behind = True
            self._sync_snapshot(timer=True)

    def _sync_snapshot(self, *, timer: bool = False) -> None:
        """Bring the synced snapshot of the running answer up to the last live message (throttled).

        Called right after a live message is posted (or by its timer, which posts
        what is pending first), so ``seq`` is always where a live message ended.
        """
        with self.lock:
            if timer:
                self._sync_timer = None
                if self._pending:
                    self.flush()  # posts, then comes back here
                    return
            if self.seq == self.published_seq or self._pending:
                self._behind = self._behind and bool(self._pending)
                return
            due = SNAPSHOT_S - (time.monotonic() - self._synced_at)
            if due > 0:
                if self._sync_timer is None:
                    self._sync_timer = threading.Timer(due, self._sync_snapshot, kwargs={"timer": True})
                    self._sync_timer.daemon = True
                    self._sync_timer.start()
                return
            run = list(self.snap[self._snap_start :])
            if run and run[0].get("type") == "user" and self.nonce:
                run[0] = {**run[0], "nonce": self.nonce}  # the view that asked knows its question
            self._publish(live=run, seq=self.seq)
            self.published_seq = self.seq
            self._synced_at = time.monotonic()
            self._behind = False

    def resync(self, since: Any) -> None:
        """Answer a view that asks for the chunks from ``since``."""
        with self.lock:
            self.flush()  # what is pending goes first, so the reply ends where live messages go on
            if not isinstance(since, int) or since >= self.seq or since < 0:
                return
            if self._run_chunks.holds(since):
                tail = compact(self._run_chunks.since(since))
                self._post({"type": "chunks", "from": since, "to": self.seq, "chunks": tail})
            else:  # older than this run: the whole snapshot, once
                self._post({"type": "snapshot", "seq": self.seq, "chunks": list(self.snap)})
