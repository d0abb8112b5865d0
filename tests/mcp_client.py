"""The official ``mcp.Client`` in process on a ``GatewayServer``, for the adapter's tests
(``test_mcp_server.py``, ``test_mcp_tools.py``, ``test_mcp_wire.py``).

``connect(server, era, answer)`` opens a client of an era (``legacy`` negotiates
2025-11-25; ``2026-07-28`` answers ``InputRequiredResult`` replies through the same
elicitation callback and retries); ``manual_client`` is a 2026-07-28 client whose test
drives the retries itself; ``error_of`` and ``text_of`` read a tool result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

from opgate.mcp import GatewayServer

__all__ = ["ERAS", "Answer", "accept", "connect", "error_of", "manual_client", "text_of"]

ERAS = ("legacy", "2026-07-28")

Answer = Callable[[types.ElicitRequestParams], types.ElicitResult]


@asynccontextmanager
async def connect(
    server: GatewayServer,
    era: str,
    answer: Answer | None = None,
    *,
    seen: list[types.ElicitRequestParams] | None = None,
) -> AsyncIterator[Client]:
    callback = None
    if answer is not None:

        async def callback(
            context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult:
            if seen is not None:
                seen.append(params)
            return answer(params)

    async with Client(server.sdk_server, mode=era, elicitation_callback=callback) as client:
        yield client


def manual_client(server: GatewayServer) -> Client:
    """A 2026-07-28 client that declares elicitation but whose tests drive retries by hand."""

    async def never(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        raise AssertionError("this test answers prompts itself")

    return Client(server.sdk_server, mode="2026-07-28", elicitation_callback=never)


def accept(content: dict[str, Any] | None = None) -> Answer:
    return lambda params: types.ElicitResult(action="accept", content=content)


def error_of(result: types.CallToolResult) -> tuple[str, str]:
    assert result.is_error
    error = result.structured_content["error"]
    assert result.content[0].text == f"{error['code']}: {error['message']}"
    return error["code"], error["message"]


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text
