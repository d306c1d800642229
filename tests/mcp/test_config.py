"""The MCP servers file and the wire-safe tool names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.mcp.client.config import SERVER_NAME, load_config, parse_config
from tahrix_lab.mcp.client.names import SEPARATOR, WIRE_NAME, wire_name


def test_the_shape_mcp_clients_use_loads(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "explorer": {"command": "uvx", "args": ["explorer-mcp"], "env": {"API_KEY": "k"}},
        "kyc": {"url": "https://kyc.internal/mcp", "headers": {"Authorization": "Bearer t"}, "allow": ["lookup_*"],
                "deny": ["lookup_secret"], "purposes": ["investigation"], "timeout": 20, "readOnly": True},
        "off": {"command": "x", "disabled": True},
    }}))  # fmt: skip
    explorer, kyc = load_config(path)
    assert (explorer.transport, explorer.command, explorer.args, explorer.env) == (
        "stdio",
        "uvx",
        ("explorer-mcp",),
        {"API_KEY": "k"},
    )
    assert (kyc.transport, kyc.url, kyc.headers["Authorization"]) == (
        "http",
        "https://kyc.internal/mcp",
        "Bearer t",
    )
    assert kyc.purposes == ("investigation",) and kyc.timeout == 20.0 and kyc.read_only is True
    assert (
        kyc.permits("lookup_address") and not kyc.permits("lookup_secret") and not kyc.permits("delete_all")
    )
    assert explorer.permits("anything")


def test_env_references_keep_secrets_out_of_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KYC_TOKEN", "t0ken")
    monkeypatch.setenv("KYC_HOST", "kyc.internal")
    [kyc] = parse_config({"mcpServers": {"kyc": {"url": "https://${env:KYC_HOST}/mcp",
                                                 "headers": {"Authorization": "Bearer ${env:KYC_TOKEN}"}}}})  # fmt: skip
    assert kyc.url == "https://kyc.internal/mcp" and kyc.headers["Authorization"] == "Bearer t0ken"
    monkeypatch.delenv("KYC_TOKEN")
    with pytest.raises(
        ConfigurationError, match=r"mcpServers\.kyc\.headers\.Authorization: .*KYC_TOKEN is not set"
    ):
        parse_config(
            {
                "mcpServers": {
                    "kyc": {"url": "https://h/mcp", "headers": {"Authorization": "${env:KYC_TOKEN}"}}
                }
            }
        )


def test_bad_json_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {\n  "a": {"command": "x",}\n}}')
    with pytest.raises(ConfigurationError, match=r"mcp\.json.*line 2, column 24"):
        load_config(path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"command": "x", "url": "http://h/mcp"}, "exactly one of 'command'"),
        ({}, "exactly one of 'command'"),
        ({"url": "ftp://h"}, r"mcpServers\.a\.url: expected an http"),
        ({"command": "x", "args": "--flag"}, r"mcpServers\.a\.args: expected a list of strings"),
        ({"command": "x", "timeout": 0}, r"mcpServers\.a\.timeout"),
        ({"command": "x", "comand": "y"}, "unknown key 'comand'"),
    ],
)
def test_each_problem_names_the_key(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_config({"mcpServers": {"a": entry}}, "mcp.json")


@pytest.mark.parametrize("name", ["a__b", "a.b", "", "-x", "x" * 33])
def test_server_names_must_be_usable_as_a_wire_prefix(name: str) -> None:
    with pytest.raises(ConfigurationError, match="server name"):
        parse_config({"mcpServers": {name: {"command": "x"}}})


def test_a_file_without_mcp_servers_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="mcpServers"):
        parse_config({"servers": {}})


servers = st.from_regex(SERVER_NAME, fullmatch=True).filter(lambda s: len(s) <= 32)
tools = st.text(st.characters(codec="ascii", categories=("L", "N", "P", "S")), min_size=1, max_size=128)


@given(server=servers, names=st.lists(tools, min_size=1, max_size=20, unique=True))
def test_wire_names_are_provider_safe_distinct_and_keep_the_server_prefix(
    server: str, names: list[str]
) -> None:
    taken: set[str] = set()
    for tool in names:
        wire = wire_name(server, tool, taken)
        assert WIRE_NAME.match(wire), wire
        assert wire not in taken
        assert wire.startswith(server + SEPARATOR)
        taken.add(wire)


@given(server=servers, tool=tools)
def test_wire_names_are_stable(server: str, tool: str) -> None:
    assert wire_name(server, tool) == wire_name(server, tool)
    if WIRE_NAME.match(f"{server}{SEPARATOR}{tool}"):
        assert wire_name(server, tool) == f"{server}{SEPARATOR}{tool}"
