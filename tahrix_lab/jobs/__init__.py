"""The hybrid streaming job service: POST a job, long-poll its chunks.

By concern: ``contract`` (what a job is, the store interface, the state a poll
answers), ``runner`` + ``steps`` + ``leases`` (running jobs), ``stores``
(``memory``; ``redis`` with its ``writer``, ``wake``-ups, Lua ``scripts`` and
the API-to-worker ``broker``), ``http`` (the FastAPI ``api``, its ``models``
and ``fastpaths``), ``server`` (``tahrix serve``: settings and wiring),
``domain`` (how a domain plugs in) and ``scripted`` (the fake model's scripts).

Names load on first use, so importing one part does not import FastAPI or
redis. The chunk vocabulary lives below this package, in ``tahrix_lab.flow``.
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

_WHERE = {
    "Service": "http.api",
    "create_app": "http.api",
    "ChatIntegration": "domain",
    "JobIntegration": "domain",
    "JobRejected": "contract",
    "JobRequest": "contract",
    "JobRunner": "runner",
    "Settings": "server",
    "sse_events": "http.api",
    "JobStore": "contract",
    "StoreUnavailable": "contract",
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
