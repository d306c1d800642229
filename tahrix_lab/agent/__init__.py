"""The provider-neutral chat-and-tools engine.

Imports nothing else from tahrix_lab; could be lifted into another product
unchanged. See DESIGN.md §2–6.
"""

from tahrix_lab.agent.backends import Backend, FakeBackend, ToolSpec, get_backend
from tahrix_lab.agent.budget import Budget
from tahrix_lab.agent.errors import (
    BackendError,
    BudgetExceeded,
    ConfigurationError,
    StoreLockedError,
    TahrixError,
    ToolDenied,
    ToolRetry,
    UserFacingError,
)
from tahrix_lab.agent.history import build_messages
from tahrix_lab.agent.loop import MAX_TOOL_CYCLES, ask, run_agent
from tahrix_lab.agent.pricing import Pricer, price
from tahrix_lab.agent.retry import RetryPolicy
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import (
    REGISTRY,
    ContextProvider,
    Tool,
    ToolOutcome,
    ToolRegistry,
    catalog_for,
    register,
    run_tool,
)
from tahrix_lab.agent.transcript import Message, Part, Session, Usage

__all__ = [
    "MAX_TOOL_CYCLES",
    "REGISTRY",
    "Backend",
    "BackendError",
    "Budget",
    "BudgetExceeded",
    "ConfigurationError",
    "ContextProvider",
    "FakeBackend",
    "Message",
    "Part",
    "Pricer",
    "RetryPolicy",
    "Session",
    "StoreLockedError",
    "TahrixError",
    "Tool",
    "ToolDenied",
    "ToolOutcome",
    "ToolRegistry",
    "ToolRetry",
    "ToolSpec",
    "TranscriptStore",
    "Usage",
    "UserFacingError",
    "ask",
    "build_messages",
    "catalog_for",
    "get_backend",
    "price",
    "register",
    "run_agent",
    "run_tool",
]
