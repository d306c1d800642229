"""The hybrid streaming job service: POST a job, long-poll its chunks.

By concern: ``contract`` (what a job is, the store interface, the state a poll
answers, leases), ``runner`` + ``steps`` (running jobs), ``stores`` (``memory``;
``redis`` with its ``writer``, ``wake``-ups and Lua ``scripts``), ``http`` (the
FastAPI ``api`` and its outer ``fastpaths``), ``server`` (``tahrix serve``:
settings and wiring) and ``domain`` (how a domain plugs in; the fake model's
scripts). The chunk vocabulary is ``tahrix_lab.flow``; the guards around every
HTTP server and the tokens file are ``tahrix_lab.web``. Imports go to ``agent``,
``flow`` and ``web`` only: the service page, which shows cases, lives at the
composition root (``tahrix_lab.app.workplace``) and joins the API through
``Service.extend``.

Names load on first use, so importing one part does not import FastAPI or redis.
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
    "ChatIntegration": "domain",
    "JobIntegration": "domain",
    "JobRejected": "contract",
    "JobRequest": "contract",
    "JobRunner": "runner",
    "JobStore": "contract",
    "MemoryJobStore": "stores.memory",
    "RedisJobStore": "stores.redis",
    "Service": "http.api",
    "Settings": "server",
    "StoreUnavailable": "contract",
    "create_app": "http.api",
    "sse_events": "http.api",
}
__all__ = [  # the names of _WHERE, spelled out for type checkers
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
