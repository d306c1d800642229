"""`tahrix` commands contributed by tahrix_lab.case (demo until the case lands: the engine on a script)."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the offline demo investigation")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from tahrix_lab.agent import FakeBackend, ToolRegistry, TranscriptStore, ask
    from tahrix_lab.agent.backends.fake import reasoning, text, tool_call
    from tahrix_lab.terminal import print_flow

    reg = ToolRegistry()

    @reg.register(parameters={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
    def double(a: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Double a number."""
        return {"value": a["x"] * 2}

    store = TranscriptStore()
    session = store.create_session(user="demo", purpose="chat", title="engine demo")
    backend = FakeBackend(
        [[reasoning("I should use the tool."), tool_call("double", {"x": 21})], [text("Twice 21 is 42.")]]
    )
    print("Scripted demo (fake backend, no network).")
    print_flow(ask(store, session, "What is twice 21?", backend=backend, model="fake", registry=reg))
    print(f"\nTranscript stored in {store.path} (session {session.id}).")
    return 0
