"""``opgate.mcp._tools``: the three gateway tools' specs and their argument checks.

The checks are pure functions over the arguments a client sent; what they let through
(lengths, cursors, names, an operation's own schema) is the registry's to check. The
tool list is the same whatever the catalog holds. The same failures through a real
client are in ``test_mcp_server.py`` (``test_search_failures_are_tool_errors``,
``test_every_failure_path_is_an_error_result``).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from tests.mcp_catalog import ScopePolicy, build_registry

from opgate import Operation, Ranking, Registry
from opgate.mcp import GatewayServer
from opgate.mcp._tools import (
    GATEWAY_TOOLS,
    RELEVANCE_GATEWAY_TOOLS,
    InspectArguments,
    InvokeArguments,
    SearchArguments,
    ToolArgumentError,
    empty_search_hint,
    inspect_arguments,
    invoke_arguments,
    search_arguments,
)

from mcp_client import ERAS, connect

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- tools/list -----------------------------------------------------------------


async def test_three_tools_with_schemas(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"search", "inspect", "invoke"}
    assert tools["search"].output_schema is not None
    assert tools["inspect"].output_schema is not None
    assert tools["invoke"].input_schema["required"] == ["name"]
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert "search" in (tool.description or "")  # each teaches the loop


def _listing_size(server: GatewayServer) -> int:
    async def size() -> int:
        async with connect(server, "legacy") as client:
            listing = await client.list_tools()
        return len(listing.model_dump_json(by_alias=True, exclude_none=True))

    return anyio.run(size)


def test_tool_list_has_the_same_size_at_10_and_100000_operations() -> None:
    def many(count: int) -> Registry:
        def handler(inv: Any) -> Any:
            return None

        return Registry(
            [Operation(f"op.n{index:06d}", "An operation", handler) for index in range(count)],
            ScopePolicy(),
        )

    small = _listing_size(GatewayServer(many(10)))
    large = _listing_size(GatewayServer(many(100_000)))
    assert small == large


def test_every_spec_is_a_strict_object_schema_and_relevance_changes_only_search() -> None:
    for spec in (*GATEWAY_TOOLS, *RELEVANCE_GATEWAY_TOOLS):
        assert spec.input_schema["type"] == "object"
        assert spec.input_schema["additionalProperties"] is False
    rule, relevance = GATEWAY_TOOLS[0], RELEVANCE_GATEWAY_TOOLS[0]
    assert (rule.name, relevance.name) == ("search", "search")
    assert "all must match" in rule.description
    assert "not every keyword has to match" in relevance.description
    assert "all must match" not in relevance.description
    assert rule.input_schema["properties"].keys() == relevance.input_schema["properties"].keys()
    assert GATEWAY_TOOLS[1:] == RELEVANCE_GATEWAY_TOOLS[1:]


async def test_a_relevance_registry_lists_the_relevance_search_tool() -> None:
    registry = Registry(
        [Operation("notes.list", "List notes", lambda inv: None)],
        ScopePolicy(),
        ranking=Ranking.RELEVANCE,
    )
    async with connect(GatewayServer(registry), "legacy") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tools["search"].description == RELEVANCE_GATEWAY_TOOLS[0].description


# -- argument checks -------------------------------------------------------------


def test_absent_arguments_are_the_defaults() -> None:
    assert search_arguments(None) == SearchArguments("", "", None, None)
    assert search_arguments({}) == SearchArguments("", "", None, None)
    assert search_arguments({"query": None, "cursor": None}) == SearchArguments()
    assert invoke_arguments({"name": "a.b"}) == InvokeArguments("a.b", {})
    assert invoke_arguments({"name": "a.b", "arguments": None}) == InvokeArguments("a.b", {})


def test_arguments_of_the_right_shape_are_taken_as_they_are() -> None:
    given = {"query": "refund order", "group": "orders", "limit": 20, "cursor": "c"}
    assert search_arguments(given) == SearchArguments("refund order", "orders", 20, "c")
    assert search_arguments({"limit": 500}).limit == 500  # the registry checks its range
    assert inspect_arguments({"name": "orders.refund"}) == InspectArguments("orders.refund")
    values = {"order": 7, "note": None}
    assert invoke_arguments({"name": "orders.refund", "arguments": values}).arguments is values


@pytest.mark.parametrize(
    ("check", "arguments", "message"),
    [
        (search_arguments, {"color": "red"}, "unknown argument 'color'; allowed: cursor, group"),
        (inspect_arguments, {"name": "a", "x": 1}, "unknown argument 'x'; allowed: name"),
        (invoke_arguments, {"name": "a", "args": {}}, "allowed: arguments, name"),
        (search_arguments, {"limit": "5"}, "limit must be an integer from 1 to 20"),
        (search_arguments, {"limit": True}, "limit must be an integer from 1 to 20"),
        (search_arguments, {"limit": 5.0}, "limit must be an integer from 1 to 20"),
        (search_arguments, {"query": 3}, "query must be a string"),
        (search_arguments, {"group": ["orders"]}, "group must be a string"),
        (search_arguments, {"cursor": 1}, "cursor must be a string"),
        (inspect_arguments, {}, "name is required (a string)"),
        (inspect_arguments, None, "name is required (a string)"),
        (inspect_arguments, {"name": 5}, "name must be a string"),
        (invoke_arguments, {"arguments": {}}, "name is required (a string)"),
        (invoke_arguments, {"name": "a", "arguments": 3}, "arguments must be a JSON object"),
        (invoke_arguments, {"name": "a", "arguments": [1]}, "arguments must be a JSON object"),
    ],
)
def test_arguments_of_another_shape_are_refused_saying_why(
    check: Any, arguments: Any, message: str
) -> None:
    with pytest.raises(ToolArgumentError) as raised:
        check(arguments)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_unknown_argument_names_are_at_most_three_each_bounded() -> None:
    with pytest.raises(ToolArgumentError) as many:
        search_arguments({f"n{index}": 1 for index in range(6)})
    assert str(many.value).startswith("unknown argument 'n0', 'n1', 'n2'; allowed: ")
    assert "n3" not in str(many.value)
    with pytest.raises(ToolArgumentError) as long:
        inspect_arguments({"x" * 500: 1})
    assert str(long.value) == "unknown argument '" + "x" * 79 + "; allowed: name"


def test_empty_search_hint_names_fewer_keywords_and_the_groups_given() -> None:
    assert empty_search_hint("one", ("a",)) is None
    assert empty_search_hint("", ()) is None
    bare = empty_search_hint("two words", ())
    assert bare is not None
    assert bare.endswith("one or two keywords.")
    listed = empty_search_hint("two words", ("billing", 'odd "group"'))
    assert listed is not None
    assert listed.endswith('one of: "billing", "odd \\"group\\"".')
