"""The Redis store's writes: one writer thread, one ``APPENDS`` call per batch for every job
with news (its text deltas merged); the script publishes what landed (``wake``). Under load the
writer waits a short window after each batch so chunks gather. It keeps each running job's
whole log (``Mirror``): a job Redis lost, or whose write's answer was lost, is written anew
under the same indexes. While Redis is down the run goes on and the writer retries; ``finish``
waits (at most ``grace_s``) for the end to land. The design: docs/service.md.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.secrets import redact_url
from tahrix_lab.flow import Chunk, Fold, compact
from tahrix_lab.jobs.contract import KEY_PREFIX, EndStatus, StoreUnavailable, end_status
from tahrix_lab.jobs.stores.wake import WAKE_CHANNEL

log = logging.getLogger(__name__)

# BUSY_JOBS jobs or more streaming through this writer means load: after each batch it waits
# 0.2 ms per streaming job, up to WINDOW_S, so chunks gather (100 jobs: 20 ms; 500: 100 ms).
# Counted by jobs, not by the batch: jobs that tick out of step make many small batches, each
# a round trip, and at 100 jobs those cost the worker twice the CPU of the runs themselves.
BUSY_JOBS = 32
WINDOW_PER_JOB_S = 0.0002
WINDOW_S = 0.1

# One encoder for every chunk (json.dumps with options builds a new one per call).
_to_json = json.JSONEncoder(ensure_ascii=False).encode

# A job's script call: (script name, keys, args).
Op = tuple[str, list[str], list[Any]]


def job_key(job_id: str) -> str:
    return f"{KEY_PREFIX}{job_id}"


@dataclass
class Mirror:
    """The writer's copy of one job it writes."""

    user: str
    request: dict[str, Any]
    header: dict[str, str] = field(default_factory=dict)  # session_id, message, history_len
    fold: Fold = field(default_factory=Fold)
    # Every chunk, in index order, as JSON only: strings, which the cyclic garbage collector
    # does not track. Kept as dicts, 500 jobs' logs made its full collections pause the
    # process for up to 600 ms, growing with every token.
    log: list[str] = field(default_factory=list)
    sent: int = 0  # how many of them Redis holds
    text_delta: str = ""  # the content and reasoning of the chunks Redis does not hold yet
    thought_delta: str = ""
    pending: list[Chunk] = field(default_factory=list)
    end: EndStatus | None = None
    restore: bool = False
    cancel: bool = False
    written: threading.Event = field(default_factory=threading.Event)  # the end landed


class Writer:
    """See the module docstring: ``RedisJobStore``'s writes, with the thread that sends them."""

    def __init__(self, client: Any, redis_module: Any, scripts: dict[str, Any], url: str, grace_s: float,
                 ttl: Callable[[], int]) -> None:  # fmt: skip
        self.client = client
        self.where = redact_url(url)
        self.grace_s = grace_s
        self._ttl = ttl
        self._redis = redis_module
        self._scripts = scripts
        self._mirrors: dict[str, Mirror] = {}
        self._dirty: dict[str, None] = {}  # insertion-ordered set
        self._cond = threading.Condition()
        self._inbox: deque[tuple[str, list[Chunk], EndStatus | None]] = deque()
        self._nudge = threading.Event()  # the writer has something to do
        self._writer_thread: threading.Thread | None = None
        self._closing = False
        self._inflight = False

    # -- what the store tells its writer ----------------------------------------
    def take(self, job_id: str, user: str, request: dict[str, Any]) -> None:
        """This process writes the job from now on (the writer keeps its log)."""
        with self._cond:
            self._mirrors.setdefault(job_id, Mirror(user=user, request=request))

    def note_session(self, job_id: str, header: dict[str, str]) -> None:
        """The job's session, written again with it if Redis loses the job."""
        with self._cond:
            if (mirror := self._mirrors.get(job_id)) is not None:
                mirror.header = header

    def cancelled(self, job_ids: set[str]) -> None:
        with self._cond:
            for job_id in job_ids:
                if (m := self._mirrors.get(job_id)) is not None:
                    m.cancel = True

    def restore(self, job_ids: list[str]) -> None:
        """Redis restarted empty: write these jobs anew now."""
        with self._cond:
            for job_id in job_ids:
                if (m := self._mirrors.get(job_id)) is not None:
                    m.restore = True
                    self._dirty[job_id] = None
            self._cond.notify_all()
        self._kick()

    def close(self, timeout: float) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._nudge.set()
        if self._writer_thread is not None:
            self._writer_thread.join(timeout)
            self._writer_thread = None

    # -- writing ---------------------------------------------------------------
    # The run threads (hundreds under load) only put their chunks in the inbox, a deque whose
    # append is atomic: no lock they would all contend for. The writer takes the inbox in order.
    def append(self, job_id: str, chunks: list[Chunk]) -> bool:
        self._inbox.append((job_id, chunks, None))
        self._kick()
        mirror = self._mirrors.get(job_id)
        return mirror is not None and mirror.cancel

    def finish(self, job_id: str, status: EndStatus, chunks: list[Chunk]) -> None:
        with self._cond:
            mirror = self._mirrors.setdefault(job_id, Mirror(user="", request={}))
        self._inbox.append((job_id, chunks, status))  # after this job's earlier chunks
        self._kick()
        if not mirror.written.wait(self.grace_s):
            with self._cond:
                self._mirrors.pop(job_id, None)
                self._dirty.pop(job_id, None)
            raise StoreUnavailable(f"Redis at {self.where} stayed unreachable; the job's end was not written")

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every chunk queued so far is written (tests; a clean shutdown)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._inbox or self._dirty or self._inflight) and time.monotonic() < deadline:
                self._cond.wait(0.05)

    def _kick(self) -> None:
        """Wake the writer (started on first use). Cheap when it is already awake."""
        if not self._nudge.is_set():
            self._nudge.set()
        if self._writer_thread is None:
            with self._cond:
                if self._writer_thread is None:
                    self._writer_thread = threading.Thread(
                        target=self._drain, name="tahrix-redis-writer", daemon=True
                    )
                    self._writer_thread.start()

    def _take_inbox(self) -> None:
        """Move what the runs appended into the mirrors (under the lock)."""
        while self._inbox:
            job_id, chunks, end = self._inbox.popleft()
            mirror = self._mirrors.get(job_id)
            if mirror is None:
                mirror = self._mirrors[job_id] = Mirror(user="", request={})
            mirror.pending.extend(chunks)
            if end is not None:
                mirror.end = end
            self._dirty[job_id] = None

    def _drain(self) -> None:
        failing = False
        while True:
            self._nudge.wait()
            self._nudge.clear()  # before taking: an append after this sets it again
            with self._cond:
                self._take_inbox()
                if self._closing and not self._dirty:
                    return
                if not self._dirty:
                    continue
                batch = list(self._dirty)
                self._dirty.clear()
                ops = [(job_id, self._op(job_id)) for job_id in batch if job_id in self._mirrors]
                self._inflight = True
            try:
                ok = self._send(ops)
            finally:
                with self._cond:
                    self._inflight = False
                    if self._dirty:
                        self._nudge.set()  # retries and the rest of a job: the next batch
                    self._cond.notify_all()
            if not ok:
                if not failing:
                    log.error("Redis at %s is unreachable; the runs go on and their chunks wait", self.where)
                failing = True
                time.sleep(0.5)
                continue
            if failing:
                log.warning("Redis at %s answers again; writing the waiting chunks", self.where)
                failing = False
            streaming = len(self._mirrors)
            if streaming >= BUSY_JOBS:
                time.sleep(min(WINDOW_S, streaming * WINDOW_PER_JOB_S))  # under load: let it gather

    def _op(self, job_id: str) -> Op:
        """The script call that brings Redis up to date with this job (under the lock)."""
        m = self._mirrors[job_id]
        for chunk in compact(m.pending):
            text, thought, _changed = m.fold.apply(chunk)
            m.text_delta += text
            m.thought_delta += thought
            m.log.append(_to_json(chunk))
        m.pending = []
        status = ""
        if m.end is not None:
            status = end_status(m.end)
            m.fold.end(m.end == "cancelled")
        key = job_key(job_id)
        folded = m.fold.fields()
        if m.restore:
            header = {"user": m.user, "request": json.dumps(m.request), **m.header, **folded}
            args: list[Any] = [self._ttl(), status or "streaming", len(m.log), *m.log]
            for k, v in header.items():
                args += [k, v]
            return "RESTORE", [key, key + ":chunks"], args
        unsent = m.log[m.sent :]
        fields = [folded["tool_calls"], folded["usage"], folded["stop_reason"]]  # JSON
        # The news for the API's tails (wake.py), published by the script if the append lands.
        news = f'[{_to_json(job_id)},{m.sent},"{status}",[{",".join(unsent)}],{",".join(fields)}]'
        args = [job_id, status, m.sent, m.text_delta, m.thought_delta, len(unsent), *unsent, *fields, news]
        return "APPENDS", [], args

    def _pipelined(self, ops: list[tuple[str, Op]]) -> list[Any]:
        """One ``APPENDS`` call for every append of the batch, one ``RESTORE`` per job written
        anew; the answers in the order of ``ops``."""
        pipe = self.client.pipeline(transaction=False)
        appends: list[Any] = [self._ttl()]
        n_appends = 0
        for _job_id, (name, keys, args) in ops:
            if name == "APPENDS":
                appends += args
                n_appends += 1
            else:
                pipe.evalsha(self._scripts[name].sha, len(keys), *keys, *args)
        if n_appends:
            pipe.evalsha(self._scripts["APPENDS"].sha, 0, *appends)
        got = list(pipe.execute(raise_on_error=False))
        codes = got.pop() if n_appends else []
        if not isinstance(codes, list):  # the batch call failed: each of its jobs sees why
            codes = [codes] * n_appends
        restores, appended = iter(got), iter(codes)
        return [next(appended) if op[0] == "APPENDS" else next(restores) for _job_id, op in ops]

    def _publish(self, changed: list[str]) -> None:
        """Wake the readers of jobs written anew (their tails are dropped: they read Redis).
        Lost (Redis down): the API's listeners reconnect and re-read anyway."""
        if changed:
            try:
                self.client.publish(WAKE_CHANNEL, " ".join(changed))
            except self._redis.RedisError as exc:
                log.debug("wake-up not published: %s", exc)

    def _send(self, ops: list[tuple[str, Op]]) -> bool:
        try:
            # EVALSHA straight away: a pipeline of Script objects would first ask SCRIPT EXISTS,
            # one more round trip per batch. A fresh or restarted Redis has not loaded the
            # scripts yet: load them and send again at once (a script not found did not run).
            results = self._pipelined(ops)
            if any(isinstance(r, self._redis.exceptions.NoScriptError) for r in results):
                for script in self._scripts.values():
                    self.client.script_load(script.script)
                results = self._pipelined(ops)
        except self._redis.RedisError as exc:
            results = [exc] * len(ops)
        ok = True
        changed: list[str] = []
        with self._cond:
            for (job_id, op), res in zip(ops, results, strict=False):
                m = self._mirrors.get(job_id)
                if op[0] == "RESTORE" and isinstance(res, int):
                    changed.append(job_id)  # written anew: its readers read it again
                if m is None:
                    continue
                if isinstance(res, Exception):
                    # Unknown whether it landed: the next write checks where the log is.
                    self._dirty[job_id] = None
                    if isinstance(res, self._redis.ResponseError):
                        log.error("job %s: Redis refused a write: %s", job_id, res)
                        m.restore = True
                    else:
                        ok = False  # unreachable: back off before the next try
                    continue
                code = int(res)
                if code == -1 and not m.user:  # never taken here (it expired): nothing to restore
                    m.cancel = True
                    m.written.set()
                    self._mirrors.pop(job_id, None)
                    continue
                if code in (-1, -2):
                    m.restore = True  # Redis lost the job (or an answer): write it all again
                    self._dirty[job_id] = None
                    continue
                m.restore = False
                m.sent = len(m.log)
                m.text_delta = m.thought_delta = ""
                if code == -3:  # a reaper ended it (its lease lapsed): stop the run
                    m.cancel = True
                    m.end = m.end or "error"
                elif code == 1:
                    m.cancel = True
                if m.end is not None and not m.pending:
                    m.written.set()
                    self._mirrors.pop(job_id, None)
                elif m.pending:
                    self._dirty[job_id] = None
        self._publish(changed)
        return ok
