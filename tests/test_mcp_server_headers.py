"""The SDK's ``Mcp-Param-*`` header check against ``GatewayServer``'s input-schema lookup.

Over streamable HTTP in the 2026-07-28 era the SDK checks a ``tools/call``'s
``Mcp-Param-*`` headers against the called tool's input schema before dispatch. The
server gives it the schema through ``get_tool_input_schema`` instead of a run of its
``tools/list`` per call; the answers must be the listing's. The app runs in process
behind httpx's ASGI transport (no socket).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import validate_mcp_param_headers

from opgate import (
    Failure,
    FailureCode,
    Operation,
    Ranking,
    Registry,
    Result,
    Text,
    finish,
)
from opgate.mcp import GatewayServer

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:8000/mcp"
MODERN = "2026-07-28"

#: An input schema mirroring ``region`` in the ``Mcp-Param-Region`` header.
REGION = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    "required": ["region"],
}
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def echo(inv: Any) -> Any:
    return finish(Result([Text(json.dumps(inv.arguments))], structured=dict(inv.arguments)))


def catalog() -> list[Operation]:
    return [
        Operation("geo.where", "Echo a region", echo, group="geo", input_schema=REGION),
        Operation("util.echo", "Echo text", echo, group="util", input_schema=TEXT),
    ]


class Hiding:
    """Everyone may use everything but the operations named in ``hidden``."""

    def __init__(self, *hidden: str) -> None:
        self.hidden = hidden

    def scope_key(self, ctx: Any) -> str:
        return "everyone"

    def authorize(self, ctx: Any, request: Any) -> None:
        if request.name in self.hidden:
            raise Failure(FailureCode.UNAVAILABLE)


def counted_list(server: GatewayServer) -> list[int]:
    """Count the runs of the server's ``tools/list`` handler (the list holds the count)."""
    sdk = server.sdk_server
    entry = sdk.get_request_handler("tools/list")
    assert entry is not None
    runs = [0]

    async def counted(ctx: Any, params: Any) -> Any:
        runs[0] += 1
        return await entry.handler(ctx, params)

    sdk.add_request_handler("tools/list", entry.params_type, counted)
    return runs


@asynccontextmanager
async def served(server: GatewayServer) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client of ``server.http_app()``, its lifespan running."""
    app = server.http_app()
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app)
        async with httpx2.AsyncClient(transport=transport, base_url=URL, timeout=30) as http:
            yield http


async def raw_call(
    http: httpx2.AsyncClient, tool: str, arguments: dict[str, Any], **headers: str
) -> httpx2.Response:
    """A 2026-07-28 ``tools/call`` as raw JSON-RPC, with extra headers."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    return await http.post(
        URL,
        content=json.dumps(body),
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Mcp-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
            **headers,
        },
    )


def tool_result(response: httpx2.Response) -> dict[str, Any]:
    """The ``CallToolResult`` of a 200 reply (JSON or one SSE event)."""
    assert response.status_code == 200, response.text
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result: dict[str, Any] = json.loads(text)["result"]
    return result


@pytest.mark.parametrize("ranking", [Ranking.RULE, Ranking.RELEVANCE])
async def test_the_lookup_answers_as_the_listing_does(ranking: Ranking) -> None:
    registry = Registry(catalog(), Hiding(), ranking=ranking)
    server = GatewayServer(registry, pinned=["util.echo"])
    lookup = server.sdk_server.get_tool_input_schema
    assert lookup is not None
    async with Client(server.sdk_server, mode=MODERN) as client:
        listed = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
    assert set(listed) == {"search", "inspect", "invoke", "util.echo"}
    for name in ("search", "inspect", "invoke"):
        assert lookup(name) == listed[name]
    # A pin without header parameters: None, which validates what its schema would
    # validate (nothing), and is the listing's answer for a principal who may not see it.
    assert lookup("util.echo") is None
    stray = {"mcp-param-text": "other"}
    assert validate_mcp_param_headers(listed["util.echo"], {"text": "x"}, stray) is None
    assert lookup("geo.where") is None  # not a tool of this server
    assert lookup("nothing") is None


def test_a_pin_declaring_a_header_parameter_leaves_the_sdk_listing() -> None:
    registry = Registry(catalog(), Hiding())
    assert GatewayServer(registry, pinned=["geo.where"]).sdk_server.get_tool_input_schema is None
    assert GatewayServer(registry, pinned=["util.echo"]).sdk_server.get_tool_input_schema
    nested = {"type": "object", "properties": {"a": {"allOf": [{"x-mcp-header": "A"}]}}}
    declaring = Registry([Operation("n.a", "Nested", echo, input_schema=nested)], Hiding())
    assert GatewayServer(declaring, pinned=["n.a"]).sdk_server.get_tool_input_schema is None


async def test_tools_call_over_http_runs_no_tools_list() -> None:
    server = GatewayServer(Registry(catalog(), Hiding()), pinned=["util.echo"])
    runs = counted_list(server)
    async with served(server) as http:
        transport = streamable_http_client(URL, http_client=http)
        async with Client(transport, mode=MODERN) as client:
            await client.list_tools()
            assert runs == [1]
            for _ in range(3):
                page = await client.call_tool("search", {"query": "echo"})
                assert page.structured_content["items"][0]["name"] == "util.echo"
                invoked = await client.call_tool(
                    "invoke", {"name": "util.echo", "arguments": {"text": "hi"}}
                )
                assert invoked.structured_content == {"text": "hi"}
                pinned = await client.call_tool("util.echo", {"text": "yo"})
                assert pinned.structured_content == {"text": "yo"}
        assert runs == [1]  # the client's own listing only
        # A stray Mcp-Param header on a pin that declares none changes nothing.
        reply = await raw_call(http, "util.echo", {"text": "x"}, **{"Mcp-Param-Text": "y"})
        assert tool_result(reply)["structuredContent"] == {"text": "x"}
    assert runs == [1]


async def test_a_mismatching_header_on_a_pin_that_declares_one_is_refused() -> None:
    server = GatewayServer(Registry(catalog(), Hiding()), pinned=["geo.where", "util.echo"])
    async with served(server) as http:
        matching = await raw_call(http, "geo.where", {"region": "eu"}, **{"Mcp-Param-Region": "eu"})
        assert tool_result(matching)["structuredContent"] == {"region": "eu"}
        for headers in ({"Mcp-Param-Region": "us"}, {}):
            refused = await raw_call(http, "geo.where", {"region": "eu"}, **headers)
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["code"] == types.HEADER_MISMATCH
            assert "Mcp-Param-Region" in error["message"]


async def test_a_pin_the_principal_may_not_see_gets_no_header_check() -> None:
    # As before the lookup: the listing omits the pin, so the SDK checks no header and
    # the call answers as for any operation the principal may not discover.
    server = GatewayServer(Registry(catalog(), Hiding("geo.where")), pinned=["geo.where"])
    runs = counted_list(server)
    async with served(server) as http:
        reply = await raw_call(http, "geo.where", {"region": "eu"}, **{"Mcp-Param-Region": "us"})
        result = tool_result(reply)
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "unavailable"
    assert runs == [1]  # the SDK listed to look for the schema
