"""The flow vocabulary: the one mapping from the loop's tuples and from stored
messages to the chunks every surface draws (``chunks``), the chunk log every
surface keeps them in (``chunklog``: append, since, compact, fold, one merge rule), their rendering in a
terminal (``terminal``), text safety for what is printed (``textsafe``), and
where the front end's files are (``resources``). Imports only the engine.

The chunk names load on first use, so ``tahrix_lab.flow.textsafe`` (which the CLI's
commands use) does not import the engine and its price table."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tahrix_lab.flow.chunklog import Chunk, ChunkLog, Fold, compact, merge, mergeable
    from tahrix_lab.flow.vocabulary import chunks, history_chunks, to_chunk

_CHUNKLOG = ("Chunk", "ChunkLog", "Fold", "compact", "merge", "mergeable")
__all__ = [
    "Chunk",
    "ChunkLog",
    "Fold",
    "chunks",
    "compact",
    "history_chunks",
    "merge",
    "mergeable",
    "to_chunk",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'tahrix_lab.flow' has no attribute {name!r}")
    module = "chunklog" if name in _CHUNKLOG else "vocabulary"
    return getattr(importlib.import_module(f"tahrix_lab.flow.{module}"), name)
