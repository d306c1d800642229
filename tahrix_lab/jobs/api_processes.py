"""Several API processes on one port (``tahrix serve --role api --api-processes N``).

An API process is one event loop: on two or more cores it is the API's ceiling,
and a burst of starts queues behind it. With ``--api-processes N`` this process
and N - 1 children each listen on the same address with ``SO_REUSEPORT``, and
the kernel spreads new connections over them (a connection stays with the
process that accepted it). API processes share nothing but Redis, so any of
them can answer any job.

This process supervises: a child that dies (``kill -9``, a crash) is started
again within a second, and the others serve meanwhile. A connection that was
waiting in the dead child's accept queue is reset, as with any listener that
dies; clients retry. SIGTERM or SIGINT to this process stops them all.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess

from tahrix_lab.jobs.settings import Settings

RESTART_CHECK_S = 0.5
YOUNG_S = 10.0  # a process that dies sooner is restarted later and later, up to MAX_BACKOFF_S
MAX_BACKOFF_S = 30.0
STOP_GRACE_S = 5.0


def listen_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket, accepting (queueing) from the moment it returns."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


def end_with(parent: int) -> None:
    """Stop (as on SIGTERM) once the supervising process is gone, even after its kill -9."""
    while os.getppid() == parent:
        time.sleep(RESTART_CHECK_S)
    os.kill(os.getpid(), signal.SIGTERM)


class Children:
    """The N - 1 other API processes, kept running until ``stop``."""

    def __init__(
        self, settings: Settings, port: int, count: int, target: Callable[[Settings, int, int], None]
    ) -> None:
        """``target(settings, port, parent_pid)`` runs in each spawned process (a module-level function)."""
        self.settings, self.port, self.count, self.target = settings, port, count, target
        self.procs: list[BaseProcess] = []
        self.started: list[float] = []  # when each was started (monotonic)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _start_one(self) -> BaseProcess:
        proc = mp.get_context("spawn").Process(
            target=self.target, args=(self.settings, self.port, os.getpid()), name="tahrix-api", daemon=False
        )
        proc.start()
        return proc

    def start(self) -> Children:
        self.procs = [self._start_one() for _ in range(self.count)]
        self.started = [time.monotonic()] * self.count
        self._thread = threading.Thread(target=self._watch, name="tahrix-api-supervisor", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        delay = [RESTART_CHECK_S] * len(self.procs)  # doubles while a process dies young
        due = [0.0] * len(self.procs)
        while not self._stopping.wait(RESTART_CHECK_S):
            for i, proc in enumerate(self.procs):
                if proc.is_alive() or self._stopping.is_set():
                    continue
                now = time.monotonic()
                if not due[i]:
                    young = now - self.started[i] < YOUNG_S
                    delay[i] = min(MAX_BACKOFF_S, delay[i] * 2) if young else RESTART_CHECK_S
                    due[i] = now + delay[i] - RESTART_CHECK_S
                    print(f"tahrix serve: API process {proc.pid} ended (exit code {proc.exitcode}); "
                          f"starting another in {delay[i] - RESTART_CHECK_S:.0f} s", flush=True)  # fmt: skip
                if now >= due[i]:
                    due[i] = 0.0
                    self.procs[i] = self._start_one()
                    self.started[i] = time.monotonic()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(RESTART_CHECK_S * 4)
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()  # SIGTERM: uvicorn finishes its answers and exits
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs:
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1)
