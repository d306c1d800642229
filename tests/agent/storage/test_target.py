"""Properties of telling targets apart and of hiding passwords (no server needed)."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.agent import ConfigurationError
from tahrix_lab.agent.storage import engine_of, redacted

passwords = st.text(min_size=1, max_size=40).filter(lambda p: "\x00" not in p)
schemes = st.from_regex(r"[a-z][a-z0-9+.\-]{1,12}", fullmatch=True)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # pure; a loaded machine is no failure
@given(password=passwords, user=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True))
def test_redacted_never_shows_a_password(password: str, user: str) -> None:
    secret = quote(password, safe="")
    url = f"postgresql://{user}:{secret}@db.example:5432/record?password={secret}&sslmode=require"
    shown = redacted(url)
    parts = urlsplit(shown)
    assert parts.netloc == f"{user}:***@db.example:5432"
    assert f"password={secret}" not in shown
    assert "sslmode=require" in shown


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheme=schemes, rest=st.text(max_size=30))
def test_a_url_is_postgresql_or_an_error_never_a_path(scheme: str, rest: str) -> None:
    target = f"{scheme}://{rest}"
    if scheme in ("postgresql", "postgres"):
        assert engine_of(target) == "postgresql"
    else:
        with pytest.raises(ConfigurationError):
            engine_of(target)
