"""Where jobs live: the chunk-log contract (``chunklog``), the in-process store
(``memory_store``) and the Redis store (``redis_store``), under one import."""

from __future__ import annotations

from tahrix_lab.jobs.chunklog import (
    DEFAULT_TTL_S,
    KEY_PREFIX,
    TERMINAL,
    CapReached,
    JobStatus,
    JobStore,
    Lapsed,
    StoreUnavailable,
)
from tahrix_lab.jobs.memory_store import MemoryJobStore
from tahrix_lab.jobs.redis_store import RedisJobStore
from tahrix_lab.jobs.redis_writer import job_key, redact_url

__all__ = ["DEFAULT_TTL_S", "KEY_PREFIX", "TERMINAL", "CapReached", "JobStatus", "JobStore", "Lapsed",
           "MemoryJobStore", "RedisJobStore", "StoreUnavailable", "job_key", "redact_url"]  # fmt: skip
