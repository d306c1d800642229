"""Server-sent events for the loop's tuples, through the same chunk mapping.

For deployments where no proxy cuts long-lived responses; behind nginx or
Cloudflare prefer the job API (POST a job, then long-poll its chunks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from tahrix_lab.flow import chunks


def sse_events(events: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    """``text/event-stream`` frames, one per chunk: ``id`` is the chunk index, ``data`` its JSON."""
    for i, chunk in enumerate(chunks(events)):
        yield f"id: {i}\ndata: {json.dumps(chunk, ensure_ascii=False)}\n\n"
