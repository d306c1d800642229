"""Tools: the registry, the catalog per purpose, and the runner.

A ``Tool`` is data, not a callable: call ``tool.fn(args, ctx)``. ``fn`` may be
sync or async. ``run_tool`` is the one boundary between a model's tool call
and the tool: it validates, runs with a timeout, and turns every failure into
a structured ``{"error": {...}}`` result the model can read — it never raises.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from tahrix_lab.agent.backends.base import ToolSpec
from tahrix_lab.agent.bounds import bound
from tahrix_lab.agent.errors import NeedsApproval, ToolDenied, ToolRetry, UserFacingError
from tahrix_lab.agent.transcript import Part, Session, ToolStatus, utcnow

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RESULT_BYTES = 32_000
AWAITING = "awaiting_approval"  # the error type of a call that waits for the analyst (agent.approvals)

ToolFn = Callable[[dict[str, Any], Any], Any]
F = TypeVar("F", bound=ToolFn)


@dataclass(frozen=True)
class Tool:
    """A tool a model may call.

    ``purposes`` names the kinds of session that may be offered it
    (``"chat"``, ``"investigation"``…); ``writes`` marks tools that change
    data, so a grant can withhold them; ``examples`` are argument objects
    that must validate against ``parameters`` (tests check this);
    ``source`` says where a tool comes from when it is not local (e.g.
    ``"mcp:explorer/get_balance"``); the transcript records it on the result.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFn = field(repr=False)
    purposes: frozenset[str] = frozenset({"chat"})
    timeout: float = DEFAULT_TIMEOUT_S
    writes: bool = False
    examples: tuple[dict[str, Any], ...] = ()
    source: str | None = None

    def spec(self) -> ToolSpec:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolRegistry:
    """Name → Tool. Registering a name again replaces the tool (hot reload in notebooks)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Validator] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        # Imported on first use: importing jsonschema builds its format checker's IRI grammar
        # (rfc3987_syntax, a lark parser: over a second), which a CLI that registers no tool
        # never needs. The validators check no "format" either way (no format_checker).
        from jsonschema.validators import validator_for

        validator_cls = validator_for(tool.parameters)
        validator_cls.check_schema(tool.parameters)
        self._tools[tool.name] = tool
        self._validators[tool.name] = validator_cls(tool.parameters)
        return tool

    def register(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
        purposes: Iterable[str] = ("chat",),
        timeout: float = DEFAULT_TIMEOUT_S,
        writes: bool = False,
        examples: Sequence[dict[str, Any]] = (),
    ) -> Callable[[F], F]:
        """Decorator: register ``fn(args, ctx)`` as a tool; the function is returned unchanged."""

        def decorate(fn: F) -> F:
            self.add(
                Tool(
                    name=name or fn.__name__,
                    description=description or inspect.cleandoc(fn.__doc__ or ""),
                    parameters=parameters or {"type": "object", "properties": {}},
                    fn=fn,
                    purposes=frozenset(purposes),
                    timeout=timeout,
                    writes=writes,
                    examples=tuple(examples),
                )
            )
            return fn

        return decorate

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)
        self._validators.pop(name, None)

    def validator(self, name: str) -> Validator:
        return self._validators[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Any:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def tools_for(self, purpose: str) -> list[Tool]:
        return [t for t in self._tools.values() if purpose in t.purposes]

    def catalog_for(self, purpose: str) -> list[ToolSpec]:
        """The tool specs a session of this purpose may be offered, in registration order."""
        return [t.spec() for t in self.tools_for(purpose)]


REGISTRY = ToolRegistry()


def register(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    purposes: Iterable[str] = ("chat",),
    timeout: float = DEFAULT_TIMEOUT_S,
    writes: bool = False,
    examples: Sequence[dict[str, Any]] = (),
) -> Callable[[F], F]:
    """Register a tool in the global ``REGISTRY`` (decorator)."""
    return REGISTRY.register(
        name=name,
        description=description,
        parameters=parameters,
        purposes=purposes,
        timeout=timeout,
        writes=writes,
        examples=examples,
    )


def catalog_for(purpose: str, registry: ToolRegistry | None = None) -> list[ToolSpec]:
    return (registry or REGISTRY).catalog_for(purpose)


@dataclass(frozen=True)
class Approval:
    """The analyst's yes to one call that waited (``agent.approvals``): who, when, and why."""

    by: str
    reason: str | None = None
    at: datetime = field(default_factory=utcnow)


@runtime_checkable
class ContextProvider(Protocol):
    """Resolves the context a tool runs with, at the start of every call.

    Passing one as ``context`` to the loop lets a domain (the case package)
    look up per-session state and enforce a grant: raising ``ToolDenied``
    turns the call into an error result the model can read.
    """

    def for_tool_call(self, session: Session | None, tool: Tool, args: dict[str, Any]) -> Any: ...


@dataclass
class ToolOutcome:
    """What running one tool call produced.

    ``result`` is the whole result as stored in the transcript (``_effects``
    removed); ``effects`` are the side-effect notices the tool reported.
    """

    tool_use_id: str
    name: str
    status: ToolStatus
    result: dict[str, Any]
    effects: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0
    source: str | None = None

    def to_part(self) -> Part:
        part = Part.of_tool_result(
            self.tool_use_id, self.name, self.result, self.status, self.duration_ms, self.effects
        )
        part.tool_source = self.source
        return part


def error_result(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, **extra}}


def _call_with_timeout(fn: ToolFn, args: dict[str, Any], ctx: Any, timeout: float) -> Any:
    """Run ``fn`` in a daemon thread so a hung tool cannot hang the stream."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            value = fn(args, ctx)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value))
            box["value"] = value
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="tahrix-tool", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"the tool did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


async def _await(value: Any) -> Any:
    return await value


def run_tool(
    tool_use: Part,
    ctx: Any = None,
    *,
    registry: ToolRegistry | None = None,
    offered: Sequence[str] | None = None,
    session: Session | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    approval: Approval | None = None,
) -> ToolOutcome:
    """Run one tool call; never raises. See the module docstring.

    The result is bounded to ``max_result_bytes`` of JSON (``agent.bounds``) before it is
    returned, so neither the transcript nor the caller ever holds an unbounded result.
    A tool that raises ``NeedsApproval`` is answered with a pending ``awaiting_approval``
    result (``agent.approvals``); ``approval`` is the analyst's yes to such a call: a
    context provider gets it through ``for_approved_call`` (one without it cannot run it).
    """
    reg = registry or REGISTRY
    call_id = tool_use.tool_use_id or ""
    name = tool_use.tool_name or ""
    started = time.perf_counter()

    tool = reg.get(name)

    def outcome(
        status: ToolStatus, result: dict[str, Any], effects: list[dict[str, Any]] | None = None
    ) -> ToolOutcome:
        elapsed = (time.perf_counter() - started) * 1000
        source = tool.source if tool is not None else None
        return ToolOutcome(call_id, name, status, result, effects or [], elapsed, source)

    if tool is None or (offered is not None and name not in offered):
        names = list(offered) if offered is not None else [t.name for t in reg]
        return outcome(
            "error", error_result("unknown_tool", f"There is no tool named {name!r}.", available=names)
        )

    args = tool_use.tool_input
    if args is None:
        raw = (tool_use.text or "")[:500]
        return outcome(
            "error",
            error_result(
                "invalid_json",
                f"The arguments were not valid JSON: {raw!r}. Send one JSON object that matches the tool's schema.",
            ),
        )

    error = next(iter(sorted(reg.validator(name).iter_errors(args), key=lambda e: list(e.path))), None)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
        return outcome(
            "error",
            error_result("invalid_arguments", f"Invalid argument {where}: {error.message}", field=where),
        )

    try:
        if isinstance(ctx, ContextProvider) and approval is not None:
            approved = getattr(ctx, "for_approved_call", None)
            if approved is None:
                raise ToolDenied("This surface cannot run a call on an analyst's approval.")
            ctx = approved(session, tool, args, approval)
        elif isinstance(ctx, ContextProvider):
            ctx = ctx.for_tool_call(session, tool, args)
        value = _call_with_timeout(tool.fn, args, ctx, tool.timeout)
    except NeedsApproval as exc:
        if approval is not None:  # approved, and still asking: never a loop of approvals
            log.error("tool %s asked for approval again after %s approved it", name, approval.by)
            return outcome(
                "error", error_result("denied", f"{name} refused the approved call: {exc.summary}")
            )
        return outcome("error", error_result(
            AWAITING,
            "This call waits for the analyst's approval and has not run. The analyst sees it with Approve "
            "and Deny; you get the result or the denial when they decide.",
            summary=exc.summary, why=exc.why, analyst_message=f"Waiting for your approval: {exc.summary}",
        ))  # fmt: skip
    except ToolDenied as exc:
        return outcome("error", error_result("denied", exc.message))
    except ToolRetry as exc:
        return outcome("error", error_result("retry", exc.message))
    except TimeoutError as exc:
        log.warning("tool %s timed out after %ss", name, tool.timeout)
        return outcome("error", error_result("timeout", f"The tool {name} timed out: {exc}."))
    except UserFacingError as exc:  # a refusal written for the user (a busy case, a bad file): no traceback
        log.info("tool %s refused: %s", name, exc.message)
        return outcome("error", error_result(type(exc).__name__, exc.message))
    except Exception as exc:
        log.exception("tool %s failed", name)
        return outcome("error", error_result(type(exc).__name__, str(exc) or type(exc).__name__))

    if isinstance(value, list | tuple):
        value = {"items": list(value)}
    elif value is None:
        value = {}
    elif not isinstance(value, dict):
        value = {"value": value}
    effects = value.pop("_effects", None) if "_effects" in value else None
    try:
        # Bounded here, once, before anything keeps it: the record holds what the model is sent.
        value = bound(value, max_result_bytes)
    except (TypeError, ValueError) as exc:
        log.error("tool %s returned a result that is not JSON: %s", name, exc)
        return outcome(
            "error",
            error_result(
                "unserialisable_result", f"The tool {name} returned a result that is not JSON: {exc}"
            ),
        )
    status: ToolStatus = "error" if set(value) == {"error"} else "ok"
    return outcome(status, value, list(effects) if isinstance(effects, list) else [])


def model_facing(result: dict[str, Any], max_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> dict[str, Any]:
    """The result as the model sees it: bounded to ``max_bytes`` (``agent.bounds.bound``).

    ``run_tool`` already bounds every result to the default cap; this applies a smaller cap
    when a caller asks for one. Deterministic, so a replay sends the same bytes.
    """
    return bound(result, max_bytes)
