"""``GatewayServer.swap`` and ``Registry.with_operations``: a served catalog replaced.

Through the official client in both eras, connected across the swap: search and inspect
see the new catalog, a cursor of the old revision fails cleanly (``invalid_cursor``), a
call in flight finishes on the registry it started with, and a prompt pending before the
swap is answered after it. The swap's refusals (a registry that does not carry on the
served one, a pinned operation or an input request key gone) change nothing.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
import pytest
from tests.mcp_catalog import ScopePolicy, build_registry, operations

from opgate import (
    ConfigurationError,
    Invocation,
    Operation,
    Ranking,
    Registry,
    Result,
    finish,
)
from opgate.mcp import GatewayServer

from mcp_client import ERAS, connect, error_of, manual_client

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def added(name: str = "util.added") -> Operation:
    return Operation(
        name,
        "Added after the swap",
        lambda inv: finish(Result(structured={"added": True})),
        group="util",
    )


async def test_a_client_connected_across_the_swap_sees_the_new_catalog(era: str) -> None:
    registry = build_registry()
    server = GatewayServer(registry)
    async with connect(server, era) as client:
        first = await client.call_tool("search", {"query": "item", "limit": 2})
        assert first.structured_content is not None
        cursor = first.structured_content["next_cursor"]
        assert cursor
        missing = await client.call_tool("inspect", {"name": "util.added"})
        assert error_of(missing)[0] == "unavailable"
        successor = registry.with_operations([*operations(), added()])
        assert successor.revision != registry.revision
        server.swap(successor)
        assert server.registry is successor
        found = await client.call_tool("search", {"query": "added"})
        assert found.structured_content is not None
        assert [item["name"] for item in found.structured_content["items"]] == ["util.added"]
        spec = await client.call_tool("inspect", {"name": "util.added"})
        assert not spec.is_error
        called = await client.call_tool("invoke", {"name": "util.added", "arguments": {}})
        assert called.structured_content == {"added": True}
        # The old revision's cursor fails cleanly, as the seed binds cursors.
        stale = await client.call_tool("search", {"query": "item", "cursor": cursor})
        assert error_of(stale)[0] == "invalid_cursor"


async def test_a_call_in_flight_finishes_on_the_registry_it_started_with() -> None:
    started, release = anyio.Event(), anyio.Event()

    async def wait(inv: Invocation) -> Any:
        started.set()
        await release.wait()
        return finish(Result(structured={"era": "old"}))

    old = Registry([Operation("w.wait", "Waits", wait, group="w")], ScopePolicy())
    server = GatewayServer(old)
    results: list[Any] = []
    async with connect(server, "2026-07-28") as client:

        async def call() -> None:
            results.append(await client.call_tool("invoke", {"name": "w.wait", "arguments": {}}))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await started.wait()
            server.swap(old.with_operations([Operation("w.other", "Other", lambda inv: None)]))
            release.set()
        assert results[0].structured_content == {"era": "old"}
        gone = await client.call_tool("invoke", {"name": "w.wait", "arguments": {}})
        assert error_of(gone)[0] == "unavailable"


async def test_a_prompt_pending_before_the_swap_is_answered_after_it() -> None:
    registry = build_registry()
    server = GatewayServer(registry)
    async with manual_client(server) as client:
        pending = await client.session.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 4}}, allow_input_required=True
        )
        assert isinstance(pending, types.InputRequiredResult)
        server.swap(registry.with_operations([*operations(), added()]))
        done = await client.session.call_tool(
            "invoke",
            {"name": "orders.confirm", "arguments": {"id": 4}},
            request_state=pending.request_state,
            input_responses={"opgate": types.ElicitResult(action="accept", content={"ok": True})},
        )
        assert isinstance(done, types.CallToolResult)
        assert done.structured_content == {"id": 4}


def test_with_operations_carries_on_the_service() -> None:
    registry = Registry(operations(), ScopePolicy(), ranking=Ranking.RELEVANCE)
    successor = registry.with_operations([*operations(), added()])
    assert successor.policy is registry.policy
    assert successor.limits is registry.limits
    assert successor.ranking is Ranking.RELEVANCE
    assert successor.ledger is registry.ledger
    assert successor.continues(registry)
    assert registry.continues(successor)
    assert "util.added" in successor
    assert "util.added" not in registry
    assert not Registry(operations(), ScopePolicy()).continues(registry)
    same = registry.with_operations(operations())
    assert same.revision == registry.revision  # a revision is a hash of definitions
    with pytest.raises(ConfigurationError):
        registry.with_operations([added(), added()])


async def test_the_swap_refuses_a_registry_that_does_not_carry_on(era: str) -> None:
    registry = build_registry()
    server = GatewayServer(
        registry, pinned=["util.echo"], input_request_keys={"orders.confirm": "confirm"}
    )
    fresh = Registry([*operations(), added()], ScopePolicy())
    with pytest.raises(ConfigurationError, match="does not carry on"):
        server.swap(fresh)
    without_pin = [op for op in operations() if op.name != "util.echo"]
    with pytest.raises(ConfigurationError, match=r"pinned operation 'util\.echo'"):
        server.swap(registry.with_operations(without_pin))
    without_key = [op for op in operations() if op.name != "orders.confirm"]
    with pytest.raises(ConfigurationError, match="input_request_keys names unknown"):
        server.swap(registry.with_operations(without_key))
    with pytest.raises(TypeError):
        server.swap(object())  # type: ignore[arg-type]
    assert server.registry is registry  # every refusal changed nothing
    async with connect(server, era) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"search", "inspect", "invoke", "util.echo"}


async def test_the_listed_schemas_follow_the_new_ranking() -> None:
    registry = build_registry()
    server = GatewayServer(registry)
    relevance = registry.replace(ranking=Ranking.RELEVANCE)
    server.swap(relevance.with_operations(operations()))
    async with connect(server, "2026-07-28") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    lookup = server.sdk_server.get_tool_input_schema
    assert lookup is not None
    assert lookup("search") == listed["search"].input_schema
