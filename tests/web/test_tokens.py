"""The tokens file both servers read (``tahrix_lab.web.tokens``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.web.tokens import dev_token, load_tokens

ALICE = "token-of-alice-0123456789abcdefghij"


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_good_file_maps_tokens_to_users(tmp_path: Path) -> None:
    assert load_tokens(write(tmp_path, json.dumps({ALICE: "alice"}))) == {ALICE: "alice"}


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        (json.dumps({ALICE: "alice"}), 0o644, "chmod 600"),
        ("{not json", 0o600, "not valid JSON"),
        ("[]", 0o600, "must be a JSON object"),
        (json.dumps({ALICE: ""}), 0o600, "maps each token to a user name"),
    ],
)
def test_a_bad_file_is_refused_by_name(tmp_path: Path, text: str, mode: int, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as refused:
        load_tokens(write(tmp_path, text, mode))
    assert ALICE not in str(refused.value)  # the refusal does not print the secret


def test_dev_tokens_are_strong_and_fresh() -> None:
    tokens = {dev_token() for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) >= 32 for t in tokens)
