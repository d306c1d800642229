"""``tahrix demo``: load the sample case, run one investigation and print it, ending with the
flags, the triage and the cost. Offline, the case's scripted investigator stands in for the model."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from tahrix_lab.agent.backends.base import Backend
from tahrix_lab.case.detectors import triage
from tahrix_lab.case.investigator import QUESTION, demo_backend
from tahrix_lab.case.workspace import Workspace
from tahrix_lab.flow.terminal import print_flow, terminal_console


def run_demo(
    workspace: Workspace | None = None,
    *,
    backend: Backend | None = None,
    model: str | None = None,
    console: Console | None = None,
    user: str = "demo",
    grant: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Load the sample case, run one investigation and print it; returns what happened."""
    console = console or terminal_console()  # piped, ids are not wrapped
    ws = workspace or Workspace()
    case_id = ws.load_sample_case()
    scripted = backend is None
    if backend is None:
        backend, model, scripted = demo_backend(ws, case_id)
    assert model is not None
    session = ws.start_investigation(
        case_id, user=user, grant=grant or {"may_write": False}, title="Demo investigation"
    )
    if scripted:
        console.print("[bold yellow]Scripted investigation[/] (offline: FakeBackend, no provider). "
                      "The tool calls run for real against the case database.")  # fmt: skip
    else:
        console.print(f"[bold]Investigation with {backend.name}[/] model {model}.")
    question = QUESTION.format(case_id=case_id)
    console.print(f"[bold]analyst[/] {question}")
    printer = print_flow(ws.ask(session, question, backend=backend, model=model), console=console)
    flags = ws.flags(case_id)
    counts: dict[str, int] = {}
    for f in flags:
        counts[f["flag_type"]] = counts.get(f["flag_type"], 0) + 1
    console.print()
    console.print(f"[bold]Flags in {case_id}[/]: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    tri = triage(ws.cases, case_id)
    console.print(f"[bold]Triage[/]: {tri['rows_total']} rows from {tri['flags_total']} flags; "
                  + ", ".join(f"{k} {v}" for k, v in tri["by_severity"].items() if v))  # fmt: skip
    cost = printer.total_cost
    console.print(
        f"[bold]Cost[/]: {printer.calls} model calls, {printer.tokens} tokens, "
        + ("cost unknown" if cost is None else f"${cost:.4f}")
        + (" (scripted: no provider was charged)" if scripted else "")
    )
    console.print(f"[dim]Transcript stored in {ws.path} (session {session.id}).[/]")
    return {"session_id": session.id, "case_id": case_id, "flags": counts, "scripted": scripted, "cost_usd": cost,
            "calls": printer.calls}  # fmt: skip
