"""A threaded HTTP/1.1 server on 127.0.0.1 that plays scripted replies."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One HTTP response. ``chunks`` go out as HTTP chunks; ``drop_after`` cuts
    the connection after that many chunks (no terminating chunk: a dropped stream);
    ``pace`` waits that many seconds before each chunk after the first (a model producing
    tokens over time, not all at once); ``think`` waits that many seconds after the headers
    before the first chunk (a model thinking before its first word), ending early if the
    client hangs up (counted in ``WireServer.hangups``)."""

    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    drop_after: int | None = None
    pace: float = 0.0
    think: float = 0.0

    @classmethod
    def json(cls, status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, chunks=[json.dumps(body).encode()], headers=dict(headers or {}))


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


ReplySource = Callable[[Recorded], Reply]


class WireServer:
    """Serves ``replies`` in order (or asks a callable for each). Use as a
    context manager; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, replies: Iterable[Reply] | ReplySource = ()) -> None:
        self.requests: list[Recorded] = []
        self.hangups = 0  # clients that hung up while a reply was thinking
        self._queue: deque[Reply] = deque()
        self._source: ReplySource | None = None
        if callable(replies):
            self._source = replies
        else:
            self._queue.extend(replies)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._source is not None:
                return self._source(request)
            if self._queue:
                return self._queue.popleft()
        return Reply.json(500, {"message": "the test server has no scripted reply left"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                reply = server._next(request)
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    if reply.think:
                        self.wfile.flush()
                        ready, _, _ = select.select([self.connection], [], [], reply.think)
                        if ready and not self.connection.recv(1, socket.MSG_PEEK):  # hung up
                            server.hangups += 1
                            self.close_connection = True
                            return
                    for sent, piece in enumerate(reply.chunks):
                        if reply.drop_after is not None and sent >= reply.drop_after:
                            self._drop()
                            return
                        if reply.pace and sent:
                            self.wfile.flush()
                            time.sleep(reply.pace)
                        if piece:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    if reply.drop_after is not None:
                        self._drop()
                        return
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client went away: fine
                    self.close_connection = True

            do_GET = do_POST

            def do_HEAD(self) -> None:
                request = Recorded("HEAD", self.path, {k.lower(): v for k, v in self.headers.items()}, b"")
                reply = server._next(request)
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(sum(len(c) for c in reply.chunks)))
                self.end_headers()

            def _drop(self) -> None:
                self.wfile.flush()
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

        return Handler
