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

from opgate import Operation, Registry
from opgate.mcp import GatewayServer

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
