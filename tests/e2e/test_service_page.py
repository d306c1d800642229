"""The standalone chat page of `tahrix serve`, in real headless Chromium."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.store import TranscriptStore

pytestmark = pytest.mark.e2e

_spec = importlib.util.spec_from_file_location(
    "_svc_helpers", Path(__file__).parent / "test_service_processes.py"
)
assert _spec is not None and _spec.loader is not None
_svc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_svc)

TOKEN = "page-token-abcdef"
FILLER = " ".join(f"f{i}" for i in range(120))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay": 0.03, "turns": [[
        {"kind": "reasoning", "text": "Thinking about it."},
        {"kind": "text", "text": "You asked: {message}. " + FILLER}]]}))  # fmt: skip
    srv = _svc.Serve("--tokens-file", str(tokens), "--fake-script", str(script),
                     db=tmp_path / "t.duckdb", cwd=tmp_path).wait_listening()  # fmt: skip
    srv.db = tmp_path / "t.duckdb"
    try:
        yield srv
    finally:
        srv.stop()


def ask(page: Any, text: str) -> None:
    box = page.locator("textarea.tx-text")
    box.click()
    box.type(text)
    box.press("Enter")


def test_page_asks_and_shows_the_answer(page: Any, server: Any) -> None:
    page.goto(server.url + "/")
    page.locator("#token").fill(TOKEN)
    page.locator("#login button[type=submit]").click()
    ask(page, "Which exchange owns 0xabc?")
    page.get_by_text("You asked: Which exchange owns 0xabc?").wait_for(timeout=20_000)
    page.get_by_text("f119").wait_for(timeout=20_000)
    assert page.evaluate("sessionStorage.getItem('tahrix-token')") == TOKEN
    # the last words can arrive before the job's terminal status (a loaded machine)
    page.wait_for_function("() => !document.querySelector('.tx-flow-root').classList.contains('tx-busy')")

    # the conversation continues in the same session
    ask(page, "And the second hop?")
    page.get_by_text("You asked: And the second hop?").wait_for(timeout=20_000)
    page.wait_for_function("() => !document.querySelector('.tx-flow-root').classList.contains('tx-busy')")
    session_id = page.evaluate("window.tahrixChat.sessionId")

    # Stop cancels the running job; the page says so
    ask(page, "A long one")
    page.get_by_text("You asked: A long one").wait_for(timeout=20_000)
    page.locator("button.tx-stop").dispatch_event("click")  # it moves while text streams in
    page.get_by_text("Stopped.").wait_for(timeout=20_000)
    assert page.console_errors == []

    # a reload keeps the token (sessionStorage) and shows the chat, not the login
    page.reload()
    page.locator("textarea.tx-text").wait_for(timeout=10_000)
    assert page.locator("#login").is_hidden()

    server.stop()
    with TranscriptStore(str(server.db)) as store:
        msgs = store.load_messages(session_id)
    texts = [m.text for m in msgs]
    assert texts[0] == "Which exchange owns 0xabc?"
    assert texts[2] == "And the second hop?"
    assert msgs[-1].stop_reason == "cancelled"


def test_page_with_a_wrong_token_asks_again(page: Any, server: Any) -> None:
    page.goto(server.url + "/")
    page.locator("#token").fill("not-the-token")
    page.locator("#login button[type=submit]").click()
    ask(page, "hello")
    page.get_by_text("That token was not accepted").wait_for(timeout=10_000)
    assert page.evaluate("sessionStorage.getItem('tahrix-token')") is None
