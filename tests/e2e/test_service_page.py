"""The standalone chat page of `tahrix serve`, in real headless Chromium."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tahrix_lab.agent.storage import TranscriptStore

pytestmark = pytest.mark.e2e

_spec = importlib.util.spec_from_file_location(
    "_svc_helpers", Path(__file__).parent / "test_service_processes.py"
)
assert _spec is not None and _spec.loader is not None
_svc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_svc)

TOKEN = "page-token-abcdef0123456789abcdefghijk"
FILLER = " ".join(f"f{i}" for i in range(120))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    tokens.chmod(0o600)
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


def sign_in(page: Any, server: Any, token: str = TOKEN) -> None:
    page.goto(server.url + "/")
    page.locator("#token").fill(token)
    page.locator("#login button[type=submit]").click()


def idle(page: Any) -> None:
    page.wait_for_function("() => !document.querySelector('.tx-flow-root').classList.contains('tx-busy')")


def test_page_asks_and_shows_the_answer(page: Any, server: Any) -> None:
    sign_in(page, server)
    page.get_by_text("Signed in as alice").wait_for(timeout=10_000)  # the token was checked at sign-in
    ask(page, "Which exchange owns 0xabc?")
    page.get_by_text("You asked: Which exchange owns 0xabc?").wait_for(timeout=20_000)
    page.get_by_text("f119").wait_for(timeout=20_000)
    assert page.evaluate("sessionStorage.getItem('tahrix-token')") == TOKEN
    # the last words can arrive before the job's terminal status (a loaded machine)
    page.wait_for_function("() => !document.querySelector('.tx-flow-root').classList.contains('tx-busy')")

    # the conversation continues in the same session, whose id is in the URL
    idle(page)  # the turn ended (its done chunk), so Send is enabled again
    ask(page, "And the second hop?")
    page.get_by_text("You asked: And the second hop?").wait_for(timeout=20_000)
    idle(page)
    session_id = page.evaluate("window.tahrixChat.sessionId")
    assert f"session={session_id}" in page.url

    # Stop cancels the running job; the page says so and the turn ends
    ask(page, "A long one")
    page.get_by_text("You asked: A long one").wait_for(timeout=20_000)
    page.locator("button.tx-stop").dispatch_event("click")  # it moves while text streams in
    page.get_by_text("Stopped.").wait_for(timeout=20_000)
    idle(page)
    assert page.console_errors == []

    # a reload keeps the token and shows the conversation again, from the history endpoint
    page.reload()
    page.get_by_text("You asked: And the second hop?").wait_for(timeout=20_000)
    assert page.locator("#login").is_hidden()
    assert page.get_by_text("Which exchange owns 0xabc?").count() >= 1
    page.get_by_text("Signed in as alice").wait_for(timeout=10_000)
    assert page.evaluate("window.tahrixChat.sessionId") == session_id

    server.stop()
    with TranscriptStore(str(server.db)) as store:
        msgs = store.load_messages(session_id)
    texts = [m.text for m in msgs]
    assert texts[0] == "Which exchange owns 0xabc?"
    assert texts[2] == "And the second hop?"
    assert msgs[-1].stop_reason == "cancelled"


def test_a_reload_mid_answer_reattaches_to_the_running_job(page: Any, server: Any) -> None:
    sign_in(page, server)
    page.get_by_text("Signed in as alice").wait_for(timeout=10_000)
    ask(page, "First question")
    page.get_by_text("f119").wait_for(timeout=20_000)
    idle(page)
    ask(page, "Second question")
    page.get_by_text("You asked: Second question").wait_for(timeout=20_000)
    page.reload()  # mid-answer
    page.get_by_text("f119").first.wait_for(timeout=20_000)  # the first answer, from the history
    page.wait_for_function(
        "() => document.querySelectorAll('.tx-user').length === 2"
        " && document.body.innerText.split('f119').length === 3",
        timeout=30_000,
    )  # the second answer, followed to its end, once
    idle(page)
    assert page.get_by_text("Second question", exact=True).count() == 1
    assert page.console_errors == []


def test_page_with_a_wrong_token_asks_again(page: Any, server: Any) -> None:
    sign_in(page, server, "not-the-token")
    page.get_by_text("That token was not accepted").wait_for(timeout=10_000)  # before any question
    assert page.locator("#chat").is_hidden()
    assert page.evaluate("sessionStorage.getItem('tahrix-token')") is None
