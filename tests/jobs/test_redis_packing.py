"""The API's asyncio Redis connections pack commands with hiredis: the same bytes as redis-py's
own packer, for every kind of argument the store sends, and the same refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from tahrix_lab.jobs.stores.redis import _make_async_client, packing_with_hiredis

Fast = packing_with_hiredis(Connection)

arg = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",))),  # any text but lone surrogates
    st.binary(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(min_codepoint=65, max_codepoint=90), min_size=1), st.lists(arg, max_size=20))
def test_hiredis_packs_the_bytes_redis_py_packs(command: str, args: list[Any]) -> None:
    assert Fast().pack_command(command, *args) != []
    assert b"".join(Fast().pack_command(command, *args)) == b"".join(
        Connection().pack_command(command, *args)
    )
    many = [(command, *args), ("EVALSHA", "ab" * 20, 1, "key", *args)]
    assert b"".join(Fast().pack_commands(many)) == b"".join(Connection().pack_commands(many))


@pytest.mark.parametrize("bad", [None, True, ["a"], {"a": 1}])
def test_an_argument_redis_cannot_take_is_refused_as_before(bad: Any) -> None:
    with pytest.raises(redis.DataError):
        Connection().pack_command("SET", "k", bad)
    with pytest.raises(redis.DataError):
        Fast().pack_command("SET", "k", bad)


def test_a_lone_surrogate_is_refused_as_before() -> None:
    for cls in (Connection, Fast):
        with pytest.raises(UnicodeEncodeError):
            cls().pack_command("SET", "k", "\ud800")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis://127.0.0.1:6379/0", Connection),
        ("rediss://127.0.0.1:6380/0", SSLConnection),
        ("unix:///tmp/redis.sock", UnixDomainSocketConnection),
    ],
)
def test_the_urls_connection_kind_is_kept(url: str, kind: type) -> None:
    client = _make_async_client(url)
    cls = client.connection_pool.connection_class
    assert issubclass(cls, kind) and cls is not kind  # TLS stays TLS, a socket file a socket file


def test_commands_round_trip_through_a_real_redis(redis_url: str) -> None:
    async def go() -> list[Any]:
        client = _make_async_client(redis_url)
        try:
            await client.set("tahrix:test:pack", "évidence 😀")
            pipe = client.pipeline(transaction=False)
            pipe.get("tahrix:test:pack")
            pipe.eval("return {ARGV[1], ARGV[2], ARGV[3]}", 0, 1.5, -7, "x")
            return list(await pipe.execute())
        finally:
            await client.delete("tahrix:test:pack")
            await client.aclose()

    assert asyncio.run(go()) == ["évidence 😀", ["1.5", "-7", "x"]]
