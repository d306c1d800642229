"""What a long answer costs on the wire: long-polls with and without ``content``, in one run.

Two jobs stream the same long answer at once from the stamping fake source
(``--tokens`` tokens of the form " seq:unix-time", ``--rate`` a second), through
the real service wiring on Redis (``--role all``). One client long-polls as a
seed client reads (every answer carries ``content``, the whole text so far), the
other as ``poll.js`` does (``content=false``: the text comes once, in the
chunks). Prints the answer's size, the bytes each client received (bodies and
headers), the number of answers, and the ratio; both clients must rebuild the
same tokens, all of them, in order.

    .venv/bin/python bench/bench_poll_bytes.py                  # 20,000 tokens at 2,000/s
    .venv/bin/python bench/bench_poll_bytes.py --tokens 5000 --rate 500
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import uvloop

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_jobs_latency import JOB, RawConn, RedisProc, Server


class CountingConn(RawConn):
    """A RawConn that counts what it reads."""

    received = 0

    async def _request(self, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        reader = self.reader
        read, readline, readexactly = reader.read, reader.readline, reader.readexactly

        async def counted_readline() -> bytes:
            line = await readline()
            self.received += len(line)
            return line

        async def counted_readexactly(n: int) -> bytes:
            data = await readexactly(n)
            self.received += len(data)
            return data

        reader.readline, reader.readexactly = counted_readline, counted_readexactly  # type: ignore[method-assign]
        try:
            return await super()._request(method, path, body)
        finally:
            reader.readline, reader.readexactly, reader.read = readline, readexactly, read  # type: ignore[method-assign]


async def follow(conn: CountingConn, content: bool) -> tuple[str, int, int]:
    """Start a job and long-poll it to its end; (text rebuilt, answers, bytes received)."""
    status, job = await conn.request("POST", JOB, b'{"message": "a long answer"}')
    assert status == 200, job
    since, answers, parts = 0, 0, []
    flag = "" if content else "&content=false"
    while True:
        status, state = await conn.request("GET", f"{JOB}/{job['job_id']}?since={since}&wait=20{flag}")
        assert status == 200, state
        answers += 1
        parts += [c["text"] for c in state["chunks"] if c["type"] == "content"]
        since = state["next"]
        if state["status"] != "streaming":
            text = "".join(parts)
            if content:
                assert state["content"] == text, "the chunks and content disagree"
            return text, answers, conn.received


async def drive(url: str) -> list[tuple[str, int, int]]:
    host, port = url.removeprefix("http://").split(":")
    full, lean = CountingConn(host, int(port)), CountingConn(host, int(port))
    try:
        return list(await asyncio.gather(follow(full, True), follow(lean, False)))
    finally:
        full.close()
        lean.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=2_000.0, help="tokens a second (default 2000)")
    args = ap.parse_args()
    redis_proc = RedisProc()
    try:
        with Server(redis_url=redis_proc.url, count=args.tokens, interval=1 / args.rate) as srv:
            (text_a, n_a, bytes_a), (text_b, n_b, bytes_b) = uvloop.run(drive(srv.url))
    finally:
        redis_proc.close()
    for text in (text_a, text_b):  # every token, in order (the stamps differ between the jobs)
        assert [int(t.split(":")[0]) for t in text.split()] == list(range(args.tokens)), "tokens lost"
    size = len(text_a.encode())
    print(f"poll traffic for one answer of {args.tokens} tokens ({size / 1000:.0f} KB of text) at "
          f"{args.rate:g} tokens/s, cores={os.cpu_count()}:")  # fmt: skip
    print(
        f"  with content (a seed client): {bytes_a / 1e6:8.2f} MB in {n_a} answers ({bytes_a / size:.1f}x the text)"
    )
    print(
        f"  content=false (poll.js):      {bytes_b / 1e6:8.2f} MB in {n_b} answers ({bytes_b / size:.1f}x the text)"
    )
    print(f"  ratio {bytes_a / bytes_b:.1f}x")


if __name__ == "__main__":
    main()
