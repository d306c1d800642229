"""The hybrid streaming job service: POST a job, long-poll its chunks.

Names load on first use, so importing one part does not import FastAPI or
redis. The chunk vocabulary lives below this package, in ``tahrix_lab.flow``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tahrix_lab.jobs.api import Service, create_app
    from tahrix_lab.jobs.chunklog import JobStore, StoreUnavailable
    from tahrix_lab.jobs.domain import ChatIntegration, JobIntegration
    from tahrix_lab.jobs.runner import JobRejected, JobRequest, JobRunner
    from tahrix_lab.jobs.settings import Settings
    from tahrix_lab.jobs.sse import sse_events
from tahrix_lab.jobs.memory_store import MemoryJobStore
from tahrix_lab.jobs.redis_store import RedisJobStore

_WHERE = {
    "Service": "api",
    "create_app": "api",
    "ChatIntegration": "domain",
    "JobIntegration": "domain",
    "JobRejected": "runner",
    "JobRequest": "runner",
    "JobRunner": "runner",
    "Settings": "settings",
    "sse_events": "sse",
    "JobStore": "chunklog",
    "MemoryJobStore": "memory_store",
    "RedisJobStore": "redis_store",
    "StoreUnavailable": "chunklog",
}

__all__ = [
    "ChatIntegration",
    "JobIntegration",
    "JobRejected",
    "JobRequest",
    "JobRunner",
    "JobStore",
    "MemoryJobStore",
    "RedisJobStore",
    "Service",
    "Settings",
    "StoreUnavailable",
    "create_app",
    "sse_events",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tahrix_lab.jobs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tahrix_lab.jobs.{module}"), name)
