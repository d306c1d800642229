"""The hybrid streaming job service: POST a job, long-poll its chunks.

``contract`` (jobs, the store interface, leases), ``runner`` + ``steps`` (running jobs),
``stores``, ``http`` (the API and its ``fastpaths``), ``server`` (``tahrix serve``) and
``domain`` (how a domain plugs in); docs/service.md has the table. Imports go to ``agent``,
``flow`` and ``web`` only: the service page joins from the composition root
(``tahrix_lab.app.workplace``) through ``Service.extend``. Names load on first use, so
importing one part does not import FastAPI or redis.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tahrix_lab.jobs.contract import JobRejected, JobRequest, JobStore, StoreUnavailable
    from tahrix_lab.jobs.domain import ChatIntegration, JobIntegration
    from tahrix_lab.jobs.http.api import Service, create_app, sse_events
    from tahrix_lab.jobs.runner import JobRunner
    from tahrix_lab.jobs.server import Settings
    from tahrix_lab.jobs.stores.memory import MemoryJobStore
    from tahrix_lab.jobs.stores.redis import RedisJobStore

_WHERE = {  # module: the names it gives, as imported above
    "contract": ("JobRejected", "JobRequest", "JobStore", "StoreUnavailable"),
    "domain": ("ChatIntegration", "JobIntegration"),
    "http.api": ("Service", "create_app", "sse_events"),
    "runner": ("JobRunner",),
    "server": ("Settings",),
    "stores.memory": ("MemoryJobStore",),
    "stores.redis": ("RedisJobStore",),
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
    module = next((m for m, names in _WHERE.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module 'tahrix_lab.jobs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tahrix_lab.jobs.{module}"), name)
