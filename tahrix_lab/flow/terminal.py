"""Render the loop's ``(event, payload)`` tuples in a terminal, in order.

Shared by ``tahrix demo`` and ``tahrix show``: reasoning dimmed, each tool
call with its arguments and a one-line result summary, the answer as it
streams, a quiet usage line per model call, calm errors in yellow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console

from tahrix_lab.agent.transcript import Message
from tahrix_lab.flow import Chunk, history_chunks
from tahrix_lab.flow.textsafe import shown as escape  # stored text: control characters shown escaped
from tahrix_lab.flow.vocabulary import analyst_message


def summarise(result: dict[str, Any], name: str = "the tool", limit: int = 240) -> str:
    """One line about a tool result: the tool's own ``headline``, the analyst's sentence for an
    error, or (a tool that writes no headline, e.g. over MCP) a neutral count of its fields."""
    if isinstance(result.get("headline"), str):
        line = result["headline"]
    elif (note := analyst_message(name, result)) is not None:
        line = f"error: {note}"
    else:
        fields = [k for k in result if not k.startswith("_")]
        line = f"{len(fields)} field{'' if len(fields) == 1 else 's'}"
    return str(line) if len(line) <= limit else line[: limit - 1].rsplit(" ", 1)[0] + "…"


def format_cost(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"${cost:.4f}"


def terminal_console(**kwargs: Any) -> Console:
    """A rich console; piped (or in a notebook's ``!tahrix``) it never wraps: ids stay whole."""
    import sys

    if not sys.stdout.isatty():
        kwargs.setdefault("width", 10_000)
    return Console(highlight=False, **kwargs)


class FlowPrinter:
    """Prints loop events as they arrive; keeps totals for a closing line."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or terminal_console()
        self._mode: str | None = None
        self.total_cost: float | None = 0.0
        self.calls = 0
        self.tokens = 0

    def _start(self, mode: str) -> None:
        if self._mode in ("token", "reasoning") and mode != self._mode:
            self.console.print()
        self._mode = mode

    def __call__(self, event: str, payload: dict[str, Any]) -> None:
        c = self.console
        if event == "token":
            if self._mode != "token":
                self._start("token")
                c.print("[bold green]assistant[/] ", end="")
            c.print(escape(payload["text"]), end="", soft_wrap=True)
        elif event == "reasoning":
            if payload.get("text"):
                if self._mode != "reasoning":
                    self._start("reasoning")
                    c.print("[dim italic]thinking[/] ", end="")
                c.print(f"[dim]{escape(payload['text'])}[/]", end="", soft_wrap=True)
        elif event == "tool_use":
            self._start("tool")
            args = payload.get("raw") if payload.get("input") is None else json.dumps(payload["input"])
            c.print(f"[cyan]→ {escape(payload['name'])}[/]([dim]{escape(str(args))[:200]}[/])")
        elif event == "tool_result":
            self._start("tool")
            mark = "[green]✓[/]" if payload["status"] == "ok" else "[red]✗[/]"
            c.print(
                f"  {mark} {escape(payload['name'])}: {escape(summarise(payload['result'], str(payload['name'])))}"
            )
        elif event == "follow_up":
            self._start("follow_up")
            c.print(f"[dim]… {escape(payload['text'])}[/]")
        elif event == "effects":
            self._start("effects")
            kinds = ", ".join(str(e.get("type")) for e in payload["effects"])
            c.print(f"[magenta]✎ changed: {escape(kinds)}[/]")
        elif event == "usage":
            self._start("usage")
            usage = payload.get("usage") or {}
            self.calls += 1
            self.tokens += (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0)
            cost = payload.get("cost_usd")
            self.total_cost = None if cost is None or self.total_cost is None else self.total_cost + cost
            c.print(
                f"[dim]  {escape(payload.get('model'))} · in {usage.get('input_tokens')} / out {usage.get('output_tokens')}"
                f" tokens · {format_cost(cost)}[/]"
            )
        elif event == "citations":
            self._start("citations")
            counts = payload.get("counts") or {}
            colour = "red" if counts.get("not_found") else "yellow" if counts.get("close") else "green"
            c.print(f"[{colour}]§ {escape(payload.get('line') or '')}[/]")
            for cit in payload.get("citations") or []:
                if cit.get("status") != "verified":
                    note = f" ({cit['note']})" if cit.get("note") else ""
                    c.print(
                        f"[{colour}]  {escape(cit['status'].replace('_', ' '))}: {escape(cit['text'])}{escape(note)}[/]"
                    )
        elif event == "error":
            self._start("error")
            c.print(f"[yellow]! {escape(payload['message'])}[/]")
        elif event == "user":
            self._start("user")
            c.print(f"[bold blue]user[/] {escape(payload['text'])}")
        elif event == "done":
            self._start("done")
            if payload.get("stop_reason") == "cancelled":
                c.print("[yellow]Stopped.[/]")


def print_flow(events: Iterable[tuple[str, dict[str, Any]]], console: Console | None = None) -> FlowPrinter:
    printer = FlowPrinter(console)
    for event, payload in events:
        printer(event, payload)
    return printer


def message_events(
    messages: Iterable[Message], turn_ends: Iterable[dict[str, Any]] = ()
) -> list[tuple[str, dict[str, Any]]]:
    """A stored transcript as the loop's tuples, through the one mapping every surface uses
    (``tahrix_lab.flow.history_chunks``), so it prints like the live run did."""
    return [event for chunk in history_chunks(messages, turn_ends) if (event := chunk_event(chunk))]


def chunk_event(chunk: Chunk) -> tuple[str, dict[str, Any]] | None:
    """The loop tuple a chunk came from (``None`` for chunks the printer does not show)."""
    kind = chunk["type"]
    body = {k: v for k, v in chunk.items() if k != "type"}
    if kind == "content":
        return "token", {"kind": "text", "text": chunk.get("text") or ""}
    if kind == "reasoning":
        return "reasoning", {"kind": "reasoning", "text": chunk.get("text") or "[redacted reasoning]"}
    if kind == "tool_call":
        return "tool_use", {"kind": "tool_use", "id": chunk.get("id"), "name": chunk.get("name"),
                            "input": chunk.get("args"), "raw": chunk.get("raw")}  # fmt: skip
    if kind in ("user", "tool_result", "follow_up", "effects", "usage", "citations", "error", "done"):
        return kind, body
    return None
