from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, ClassVar

import pytest

from tahrix_lab.agent import Part, Session, Tool, ToolDenied, ToolRegistry, ToolRetry, run_tool
from tahrix_lab.agent.errors import CaseBusy
from tahrix_lab.agent.tools import model_facing

SCHEMA = {
    "type": "object",
    "properties": {
        "address": {"type": "string", "pattern": "^0x"},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["address"],
    "additionalProperties": False,
}


def call(name: str, args: dict[str, Any] | None, raw: str | None = None) -> Part:
    return Part.of_tool_use("tu_1", name, args, raw)


@pytest.fixture
def reg() -> ToolRegistry:
    r = ToolRegistry()

    @r.register(parameters=SCHEMA, purposes=("chat", "investigation"), examples=[{"address": "0xabc"}])
    def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """Look an address up."""
        return {
            "address": args["address"],
            "ctx": ctx,
            "_effects": [{"type": "seen", "address": args["address"]}],
        }

    @r.register(purposes=("investigation",))
    def rows(args: dict[str, Any], ctx: Any) -> list[int]:
        return [1, 2, 3]

    @r.register()
    async def slow_async(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"async": True}

    @r.register(timeout=0.2)
    def hangs(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        time.sleep(5)
        return {}

    @r.register()
    def boom(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise ValueError("the node is down")

    @r.register()
    def busy(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise CaseBusy("CASE-7")

    @r.register()
    def not_json(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"when": object()}

    @r.register()
    def retry(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise ToolRetry("Use a checksummed address.")

    @r.register()
    def big(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"rows": ["x" * 100] * 1000}

    return r


def test_catalog_is_scoped_by_purpose(reg: ToolRegistry) -> None:
    assert [s["name"] for s in reg.catalog_for("investigation")] == ["lookup", "rows"]
    assert "rows" not in [s["name"] for s in reg.catalog_for("chat")]
    spec = reg.catalog_for("chat")[0]
    assert spec == {"name": "lookup", "description": "Look an address up.", "parameters": SCHEMA}


def test_examples_validate_against_their_schema(reg: ToolRegistry) -> None:
    for tool in reg:
        for example in tool.examples:
            assert list(reg.validator(tool.name).iter_errors(example)) == []


def test_ok_result_strips_effects_and_passes_context(reg: ToolRegistry) -> None:
    out = run_tool(call("lookup", {"address": "0xabc"}), "CTX", registry=reg)
    assert out.status == "ok"
    assert out.result == {"address": "0xabc", "ctx": "CTX"}
    assert out.effects == [{"type": "seen", "address": "0xabc"}]
    assert out.to_part().tool_result == out.result


def test_list_result_is_wrapped_once(reg: ToolRegistry) -> None:
    assert run_tool(call("rows", {}), registry=reg).result == {"items": [1, 2, 3]}


def test_async_tools_run(reg: ToolRegistry) -> None:
    assert run_tool(call("slow_async", {}), registry=reg).result == {"async": True}


@pytest.mark.parametrize(
    ("args", "field", "fragment"),
    [
        ({}, "(arguments)", "'address' is a required property"),
        ({"address": 42}, "address", "is not of type 'string'"),
        ({"address": "0xa", "limit": 0}, "limit", "minimum"),
        ({"address": "abc"}, "address", "does not match"),
        ({"address": "0xa", "extra": 1}, "(arguments)", "Additional properties"),
    ],
)
def test_invalid_arguments_name_the_field(
    reg: ToolRegistry, args: dict[str, Any], field: str, fragment: str
) -> None:
    out = run_tool(call("lookup", args), registry=reg)
    assert out.status == "error"
    assert out.result["error"]["type"] == "invalid_arguments"
    assert out.result["error"]["field"] == field
    assert fragment in out.result["error"]["message"]


def test_arguments_that_were_not_json_get_a_readable_error(reg: ToolRegistry) -> None:
    out = run_tool(call("lookup", None, raw='{"address": 0x'), registry=reg)
    assert out.status == "error"
    assert out.result["error"]["type"] == "invalid_json"
    assert '{"address": 0x' in out.result["error"]["message"]


def test_unknown_tool_lists_the_tools_offered(reg: ToolRegistry) -> None:
    out = run_tool(call("transfer_funds", {}), registry=reg, offered=["lookup", "rows"])
    assert out.result["error"]["type"] == "unknown_tool"
    assert out.result["error"]["available"] == ["lookup", "rows"]
    # A registered tool that was not offered to this session is unknown too.
    assert (
        run_tool(call("boom", {}), registry=reg, offered=["lookup"]).result["error"]["type"] == "unknown_tool"
    )


def test_exception_becomes_structured_error(reg: ToolRegistry) -> None:
    out = run_tool(call("boom", {}), registry=reg)
    assert out.status == "error"
    assert out.result == {"error": {"type": "ValueError", "message": "the node is down"}}


def test_an_unexpected_exception_is_logged_with_its_traceback_a_refusal_without(
    reg: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug's traceback is the operator's; a refusal written for the user (a busy case, a file
    with a bad line) is its message, at INFO: in a notebook, Python's last-resort handler would
    print every WARNING and above as a red traceback under the cell."""
    caplog.set_level(logging.INFO, logger="tahrix_lab")
    run_tool(call("boom", {}), registry=reg)
    out = run_tool(call("busy", {}), registry=reg)
    assert out.status == "error" and out.result["error"]["type"] == "CaseBusy"
    assert out.result["error"]["message"] == CaseBusy("CASE-7").message
    boom, busy = caplog.records
    assert boom.levelno == logging.ERROR and boom.exc_info is not None
    assert busy.levelno == logging.INFO and busy.exc_info is None
    assert busy.getMessage() == f"tool busy refused: {CaseBusy('CASE-7').message}"


def test_timeout_becomes_error_without_hanging(reg: ToolRegistry) -> None:
    started = time.perf_counter()
    out = run_tool(call("hangs", {}), registry=reg)
    assert out.result["error"]["type"] == "timeout"
    assert time.perf_counter() - started < 4  # did not wait for the 5 s sleep


def test_unserialisable_result_is_refused(reg: ToolRegistry) -> None:
    out = run_tool(call("not_json", {}), registry=reg)
    assert out.status == "error"
    assert out.result["error"]["type"] == "unserialisable_result"


def test_tool_retry_signal_reaches_the_model(reg: ToolRegistry) -> None:
    out = run_tool(call("retry", {}), registry=reg)
    assert out.result == {"error": {"type": "retry", "message": "Use a checksummed address."}}


def test_context_provider_resolves_per_call_and_can_deny(reg: ToolRegistry) -> None:
    seen: list[tuple[str | None, str]] = []

    class Provider:
        allowed: ClassVar[set[str]] = {"lookup"}

        def for_tool_call(self, session: Session | None, tool: Tool, args: dict[str, Any]) -> str:
            seen.append((session.id if session else None, tool.name))
            if tool.name not in self.allowed:
                raise ToolDenied(f"{tool.name} is not in this session's grant.")
            return f"ctx-for-{session.id if session else None}"

    session = Session(id="s1")
    provider = Provider()
    assert (
        run_tool(call("lookup", {"address": "0x1"}), provider, registry=reg, session=session).result["ctx"]
        == "ctx-for-s1"
    )
    denied = run_tool(call("rows", {}), provider, registry=reg, session=session)
    assert denied.result == {"error": {"type": "denied", "message": "rows is not in this session's grant."}}
    assert seen == [("s1", "lookup"), ("s1", "rows")]


def test_model_facing_result_is_capped_with_a_marker(reg: ToolRegistry) -> None:
    out = run_tool(call("big", {}), registry=reg)
    stored = json.dumps(out.result, ensure_ascii=False).encode()
    assert len(stored) <= 32_000  # bounded before it is kept: the transcript holds what is sent
    assert out.result["truncated"] is True and "bounded to 32,000 bytes" in out.result["bounded"]
    assert model_facing(out.result) is out.result
    small = {"a": 1}
    assert model_facing(small) is small
    mixed = {"summary": {"n": 2}, "rows": ["x" * 100] * 400, "tail": 1}
    capped = model_facing(mixed, max_bytes=1000)
    assert len(json.dumps(capped, ensure_ascii=False).encode()) <= 1000
    assert capped["summary"] == {"n": 2} and capped["tail"] == 1  # what fits is kept
    assert capped["rows"][-1].endswith("more items left out]")  # says what it cut


def test_register_replaces_a_tool_of_the_same_name() -> None:
    r = ToolRegistry()
    r.register(name="t")(lambda a, c: {"v": 1})
    r.register(name="t")(lambda a, c: {"v": 2})
    assert len(r) == 1
    assert run_tool(call("t", {}), registry=r).result == {"v": 2}


def test_invalid_schema_is_refused_at_registration() -> None:
    with pytest.raises(Exception, match="is not valid"):
        ToolRegistry().register(name="bad", parameters={"type": "objekt"})(lambda a, c: {})
