"""Replay a stored session on another backend or model.

``replay`` re-sends the original session's user turns, in order, through the
engine's own loop (``ask``), into a new session whose ``replay_of`` names the
original. Tools either run again (``tools="live"``) or answer from the
original transcript (``tools="recorded"``): the same tool called with the same
arguments gets the result it got then, anything else gets a clear error result
— so a case can be re-run on another model without touching the case data.

A replay that fails half-way keeps what it produced: the new session holds
every turn that completed, and ``ReplayResult.stopped_at`` says which user
turn failed and why.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tahrix_lab.agent.approvals import fold_decisions
from tahrix_lab.agent.backends.base import Backend, ToolSpec
from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.loop import ask
from tahrix_lab.agent.pricing import DEFAULT_PRICER, Pricer
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.tools import REGISTRY, Tool, ToolRegistry, error_result
from tahrix_lab.agent.transcript import Message, Part, Session, Usage

log = logging.getLogger(__name__)

ToolMode = Literal["live", "recorded"]
LoopEvent = tuple[str, dict[str, Any]]


@dataclass
class ReplayResult:
    """What a replay produced.

    ``turns`` is the number of user turns in the original; ``completed`` how
    many were answered. When the replay stopped early, ``stopped_at`` is the
    1-based user turn that failed and ``error`` the loop's calm error payload.
    """

    original_id: str
    session: Session
    backend: str
    model: str
    tools: ToolMode
    turns: int
    completed: int = 0
    stopped_at: int | None = None
    error: dict[str, Any] | None = None
    recorded_misses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.stopped_at is None

    @property
    def session_id(self) -> str:
        return self.session.id

    def summary(self) -> str:
        where = f"{self.backend}/{self.model}"
        if self.ok:
            return (
                f"Replayed {self.original_id} on {where}: {self.completed}/{self.turns} turns "
                f"into session {self.session.id}."
            )
        reason = (self.error or {}).get("message", "unknown error")
        return (
            f"Replay of {self.original_id} on {where} stopped at user turn {self.stopped_at} of "
            f"{self.turns}: {reason} The {self.completed} completed turns are kept in session {self.session.id}."
        )


def user_turns(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "user"]


def _canonical(args: dict[str, Any] | None) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def recorded_calls(messages: Sequence[Message]) -> dict[tuple[str, str], list[tuple[dict[str, Any], str]]]:
    """(tool name, canonical arguments) → the results recorded for it, in order (a call that waited
    for the analyst answers with its decided result, as the model saw it)."""
    uses: dict[str, Part] = {}
    out: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = defaultdict(list)
    for m in fold_decisions(messages):
        for p in m.parts:
            if p.type == "tool_use" and p.tool_use_id:
                uses[p.tool_use_id] = p
            elif p.type == "tool_result" and p.tool_use_id in uses:
                use = uses[p.tool_use_id]
                if use.tool_input is None:
                    continue  # the call never ran with arguments: nothing to answer with
                out[(use.tool_name or "", _canonical(use.tool_input))].append(
                    (p.tool_result or {}, p.tool_status or "ok")
                )
    return dict(out)


def offered_tools(messages: Sequence[Message]) -> list[str]:
    """Tool names offered or called in the original session, in first-seen order."""
    names: dict[str, None] = {}
    for m in messages:
        for name in m.tools_offered or ():
            names[name] = None
        for p in m.parts:
            if p.type == "tool_use" and p.tool_name:
                names[p.tool_name] = None
    return list(names)


class RecordedTools:
    """A ToolRegistry whose tools answer from an original transcript.

    Identical calls are answered with the recorded results in the order they
    were recorded (the last one repeats if asked more often). A call the
    original never made gets an ``not_recorded`` error result and is listed
    in ``misses``.
    """

    def __init__(self, messages: Sequence[Message], live: ToolRegistry | None = None) -> None:
        self.calls = recorded_calls(messages)
        self._queues: dict[tuple[str, str], deque[tuple[dict[str, Any], str]]] = {
            k: deque(v) for k, v in self.calls.items()
        }
        self._last: dict[tuple[str, str], dict[str, Any]] = {}
        self.hits: list[dict[str, Any]] = []
        self.misses: list[dict[str, Any]] = []
        self.registry = ToolRegistry()
        live = live if live is not None else REGISTRY
        for name in offered_tools(messages):
            original = live.get(name)
            self.registry.add(
                Tool(
                    name=name,
                    description=original.description if original else f"{name} (answers from the recording)",
                    parameters=original.parameters if original else {"type": "object"},
                    fn=self._answerer(name),
                    purposes=frozenset({"*"}),
                )
            )

    def specs(self) -> list[ToolSpec]:
        return [t.spec() for t in self.registry]

    def _answerer(self, name: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        def answer(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            key = (name, _canonical(args))
            queue = self._queues.get(key)
            if queue:
                result, _status = queue.popleft()
                self._last[key] = result
            elif key in self._last:
                result = self._last[key]
            else:
                self.misses.append({"tool": name, "input": args})
                return error_result(
                    "not_recorded",
                    f"Replay with recorded tools: the original session never called {name} with these "
                    "arguments, so there is no recorded result. Use the arguments of a recorded call, or "
                    "answer from what you already have.",
                    recorded_inputs=[json.loads(k[1]) for k in self.calls if k[0] == name][:10],
                )
            self.hits.append({"tool": name, "input": args})
            copy: dict[str, Any] = json.loads(json.dumps(result))  # a copy: the loop may pop keys
            return copy

        return answer


def copy_case_link(store: TranscriptStore, original_id: str, new_id: str) -> bool:
    """Link the replay to the original's case with the same grant (so the case tools see the
    same case); ``False`` when the original works on no case."""
    link = store.case_link(original_id)
    if link is None:
        return False
    store.link_case(new_id, link["case_id"], link["grant"], link["created_by"])
    return True


def replay(
    session_id: str,
    *,
    backend: Backend,
    model: str,
    tools: ToolMode = "live",
    store: TranscriptStore,
    context: Any = None,
    registry: ToolRegistry | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    **loop_kwargs: Any,
) -> ReplayResult:
    """Re-send ``session_id``'s user turns to ``backend``/``model``; see the module docstring.

    ``on_event`` sees every loop tuple as it happens (to print or render the
    flow); ``loop_kwargs`` go to the loop (``budget``, ``inference``…).
    """
    if tools not in ("live", "recorded"):
        raise ConfigurationError(f"tools must be 'live' or 'recorded', not {tools!r}.")
    original = store.get_session(session_id)
    messages = store.load_messages(session_id)
    turns = user_turns(messages)
    new = store.create_session(
        user=original.user,
        purpose=original.purpose,
        system_prompt=original.system_prompt,
        title=f"replay of {original.title or original.id} on {backend.name}/{model}",
        replay_of=original.id,
    )
    copy_case_link(store, original.id, new.id)
    recorded: RecordedTools | None = None
    if tools == "recorded":
        recorded = RecordedTools(messages, registry)
        loop_kwargs.update(registry=recorded.registry, tools=recorded.specs(), context=None)
    else:
        loop_kwargs.update(registry=registry or REGISTRY, context=context)
        if registry is None and "tools" not in loop_kwargs:
            # offer what the original was offered when the live registry still has it
            names = offered_tools(messages)
            specs = [t.spec() for t in (REGISTRY.get(n) for n in names) if t is not None]
            if specs:
                loop_kwargs["tools"] = specs
    result = ReplayResult(original.id, new, backend.name, model, tools, len(turns))
    for number, turn in enumerate(turns, start=1):
        media = [p for p in turn.parts if p.type in ("image", "document")]
        failed: dict[str, Any] | None = None
        for event, payload in ask(
            store, new, turn.text, media=media, backend=backend, model=model, **loop_kwargs
        ):
            if on_event is not None:
                on_event(event, payload)
            if event == "error":
                failed = payload
        if failed is not None:
            result.stopped_at = number
            result.error = failed
            log.warning("replay of %s stopped at user turn %d: %s", original.id, number, failed)
            break
        result.completed = number
    if recorded is not None:
        result.recorded_misses = list(recorded.misses)
    return result


def replay_many(
    session_ids: Iterable[str],
    *,
    progress: Literal["tqdm", "rich"] | None = "tqdm",
    **kwargs: Any,
) -> list[ReplayResult]:
    """Replay several sessions one after another with a progress bar
    (tqdm — a widget in notebooks — or rich in the terminal)."""
    ids = list(session_ids)
    results: list[ReplayResult] = []
    for sid in _progress(ids, progress):
        results.append(replay(sid, **kwargs))
    return results


def _progress(ids: list[str], kind: str | None) -> Iterator[str]:
    if kind == "tqdm":
        from tqdm.auto import tqdm

        yield from tqdm(ids, desc="replaying", unit="session")
    elif kind == "rich":
        from rich.progress import track

        yield from track(ids, description="replaying")
    else:
        yield from ids


@dataclass(frozen=True)
class ReplayEstimate:
    """The expected cost of a replay, from the original's stored token counts.

    Cache hits are not assumed on another model (a new provider has a cold
    cache), so cached input tokens count as plain input unless the model is
    the same. ``cost_usd`` is ``None`` when the target's price is unknown.
    """

    session_id: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    original_cost_usd: float | None


def estimate_replay_cost(
    session_id: str,
    model: str,
    *,
    store: TranscriptStore | None = None,
    backend: str | None = None,
    pricer: Pricer | None = None,
) -> ReplayEstimate:
    """Price the original's calls at ``model``'s current rates, before anything is sent
    (``store`` defaults to ``$TAHRIX_DB``; ``backend`` to each call's own)."""
    pricer = pricer or DEFAULT_PRICER
    store = store if store is not None else TranscriptStore()
    calls = [m for m in store.load_messages(session_id) if m.role == "assistant"]
    total: float | None = 0.0
    original: float | None = 0.0
    tokens_in = tokens_out = 0
    for m in calls:
        usage = m.usage or Usage()
        if not usage.known:
            continue  # a call cut off before it reported usage: nothing to go by
        tokens_in += usage.input_tokens or 0
        tokens_out += usage.output_tokens or 0
        same = m.model_id == model
        target = usage if same else Usage(usage.input_tokens, usage.output_tokens)
        cost = pricer.price(model, target, backend=backend or m.backend)
        total = None if total is None or cost is None else total + cost
        was = pricer.price(m.model_id, usage, backend=m.backend, at=m.created_at)
        original = None if original is None or was is None else original + was
    return ReplayEstimate(session_id, model, len(calls), tokens_in, tokens_out, total, original)


__all__ = [
    "RecordedTools",
    "ReplayEstimate",
    "ReplayResult",
    "estimate_replay_cost",
    "replay",
    "replay_many",
]
