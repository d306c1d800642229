"""A terminal that can't be forged: stored text is shown escaped in every CLI output;
tracebacks only with -v; piped output keeps ids whole; --json for scripts; calm import errors.

The commands run as real processes with their output piped, as a user's shell or a
notebook's ``!tahrix`` runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tahrix_lab.agent import TranscriptStore
from tahrix_lab.agent.transcript import Message, Part, Usage
from tahrix_lab.flow.textsafe import json_safe, safe

FORGERY = "clear\x1b[2Jtitle\x1b]0;pwned\x07bell\x9b31mcsi\u202eevil\r"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def run(env: dict[str, str], *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tahrix_lab.cli", *args], env=env, input=stdin.decode() if stdin else None,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def forged(tmp_path: Path) -> tuple[dict[str, str], str]:
    """A workspace whose stored text tries to drive the operator's terminal."""
    db = tmp_path / "t.duckdb"
    store = TranscriptStore(db)
    s = store.create_session(user=f"mallory{FORGERY}", title=f"Case {FORGERY} " + "very long title " * 12)
    store.append_message(s.id, Message.user(f"question {FORGERY}"))
    store.append_message(
        s.id,
        Message(
            role="assistant",
            parts=[Part.of_reasoning(f"think {FORGERY}"), Part.of_text(f"answer {FORGERY}"),
                   Part.of_tool_use("c1", f"tool{FORGERY}", {"q": FORGERY})],
            backend="openai", model_id="gpt-4o-mini", stop_reason="tool_use", usage=Usage(10, 5),
        ),
    )  # fmt: skip
    store.append_message(
        s.id, Message(role="tool", parts=[Part.of_tool_result("c1", "tool", {"note": FORGERY})])
    )
    store.close()
    env = {**os.environ, "TAHRIX_DB": str(db), "TAHRIX_LOG": str(tmp_path / "tahrix.log")}
    env.pop("COLUMNS", None)
    return env, s.id


@pytest.mark.parametrize(
    "args",
    [("show", "{sid}"), ("sessions",), ("sessions", "--json"), ("costs", "--by", "user"),
     ("costs", "--by", "user", "--csv"), ("costs", "--by", "user", "--json"), ("diff", "{sid}", "{sid}", "--tools"),
     ("export",)],
)  # fmt: skip
def test_stored_control_characters_never_reach_the_terminal(
    forged: tuple[dict[str, str], str], args: tuple[str, ...]
) -> None:
    env, sid = forged
    r = run(env, *(a.format(sid=sid) for a in args))
    assert r.returncode == 0, r.stderr
    for ch in RAW:
        assert ch not in r.stdout and ch not in r.stderr, (args, ch)
    if args[0] in ("show", "sessions") and "--json" not in args:
        assert "\\x1b[2J" in r.stdout  # shown, escaped, not executed


def test_show_keeps_every_part_visible(forged: tuple[dict[str, str], str]) -> None:
    env, sid = forged
    out = run(env, "show", sid).stdout
    for word in ("question", "think", "answer", "toolclear\\x1b[2J"):
        assert word in out


def test_export_stays_lossless(forged: tuple[dict[str, str], str], tmp_path: Path) -> None:
    env, sid = forged
    exported = run(env, "export").stdout
    other = {**env, "TAHRIX_DB": str(tmp_path / "other.duckdb")}
    r = run(other, "import", "-", stdin=exported.encode())
    assert r.returncode == 0, r.stderr
    moved = TranscriptStore(tmp_path / "other.duckdb")
    assert moved.get_session(sid).user == f"mallory{FORGERY}"
    assert moved.load_messages(sid)[0].text == f"question {FORGERY}"
    moved.close()


def test_piped_output_does_not_wrap_ids(forged: tuple[dict[str, str], str]) -> None:
    env, sid = forged
    out = run(env, "sessions").stdout
    assert sid in out  # whole, on one line, although the title is long
    assert all(len(line) > 80 for line in out.splitlines() if sid in line)


def test_json_listings_parse(forged: tuple[dict[str, str], str]) -> None:
    env, sid = forged
    rows = [json.loads(x) for x in run(env, "sessions", "--json").stdout.splitlines()]
    assert [r["id"] for r in rows] == [sid] and rows[0]["calls"] == 1 and rows[0]["user"].endswith("\r")
    costs = [json.loads(x) for x in run(env, "costs", "--by", "user", "--json").stdout.splitlines()]
    assert costs[0]["calls"] == 1 and costs[0]["cost_usd"] > 0 and costs[0]["user"] == f"mallory{FORGERY}"


def test_a_provider_failure_is_one_calm_line_and_the_log_has_the_details(
    forged: tuple[dict[str, str], str], tmp_path: Path
) -> None:
    env, sid = forged
    args = ("replay", sid, "--backend", "http://127.0.0.1:9/v1", "--model", "gpt-4o-mini", "--recorded-tools")
    quiet = run({**env, "OPENAI_API_KEY": "sk-test"}, *args)
    assert "Traceback" not in quiet.stderr and "Traceback" not in quiet.stdout
    assert len(quiet.stderr.strip().splitlines()) <= 2
    log = Path(env["TAHRIX_LOG"])
    assert str(log) in quiet.stderr and "Traceback" in log.read_text()
    loud = run({**env, "OPENAI_API_KEY": "sk-test"}, "-v", *args)
    assert "Traceback" in loud.stderr


def test_an_unexpected_error_is_one_line_without_v(forged: tuple[dict[str, str], str]) -> None:
    env, _ = forged
    broken = {**env, "TAHRIX_DB": "/proc/forbidden/tahrix.duckdb"}
    r = run(broken, "sessions")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "is empty"), (b"\n\n", "is empty"), (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "binary file"),
     (b'{"format": "tahrix-session/1", "session": {"id": "s"}, "messages": [{"role": "user", "parts": "hi"}]}\n',
      "line 1: messages[0].parts: must be a list, not str")],
)  # fmt: skip
def test_import_refusals_are_calm(
    forged: tuple[dict[str, str], str], tmp_path: Path, content: bytes, message: str
) -> None:
    env, _ = forged
    f = tmp_path / "in.jsonl"
    f.write_bytes(content)
    r = run(env, "import", str(f))
    assert r.returncode == 1
    assert message in r.stderr and "Traceback" not in r.stderr
    assert "Imported" not in r.stdout


@given(st.text())
def test_safe_text_has_no_control_characters(text: str) -> None:
    for multiline in (True, False):
        shown = safe(text, multiline=multiline)
        allowed = "\n\t" if multiline else ""
        assert not any(
            (ord(c) < 32 and c not in allowed) or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in shown
        )
    assert safe(text) == text or any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or ord(c) >= 0x2000 for c in text)


@given(st.dictionaries(st.text(), st.text()))
def test_json_safe_is_lossless(value: dict[str, str]) -> None:
    line = json_safe(json.dumps(value, ensure_ascii=False))
    assert json.loads(line) == value
    assert not any(0x7F <= ord(c) <= 0x9F for c in line)
