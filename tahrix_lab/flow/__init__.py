"""The flow vocabulary: the one mapping from the loop's tuples and from stored
messages to the chunks every surface draws (``chunks``), their rendering in a
terminal (``terminal``), text safety for what is printed (``textsafe``), and
where the front end's files are (``resources``). Imports only the engine."""

from __future__ import annotations

from tahrix_lab.flow.chunks import Chunk, chunks, compact, history_chunks, mergeable, to_chunk

__all__ = ["Chunk", "chunks", "compact", "history_chunks", "mergeable", "to_chunk"]
