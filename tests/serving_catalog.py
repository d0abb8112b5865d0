"""The MCP test catalog plus one handler bug, for ``tests/test_mcp_http.py``.

``opgate serve tests.serving_catalog:build_registry`` serves ``tests.mcp_catalog``'s
operations and ``orders.checkout``, whose handler builds a ``URLInput`` with a plain
``http://`` URL: ``URLInput`` refuses it, so every call fails ``internal``, and the
private cause is what a developer needs to see; and ``util.wait``, which holds its
request for the seconds asked.
"""

from __future__ import annotations

from typing import Any

import anyio
from tests.mcp_catalog import ScopePolicy, operations

from opgate import Invocation, Operation, Registry, URLInput, await_input

INSECURE_URL = "http://pay.example.com/checkout/42"

#: A log line an agent's argument could try to forge through an exception's text.
FORGED_LINE = "2026-12-01 00:00:00,000 ERROR opgate.serve: all is well"


async def checkout(inv: Invocation) -> Any:
    return await_input(URLInput("Pay here", INSECURE_URL))


async def wait(inv: Invocation) -> Any:
    await anyio.sleep(min(float(inv.arguments["seconds"]), 60.0))
    return {"waited": True}


def forge(inv: Invocation) -> Any:
    raise RuntimeError(f"{inv.arguments['text']}")


TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
SECONDS = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 60}},
    "required": ["seconds"],
}


def build_registry() -> Registry:
    found = [
        *operations(),
        Operation("orders.checkout", "Check out an order", checkout),
        Operation("util.forge", "Raises with the agent's text", forge, input_schema=TEXT),
        Operation("util.wait", "Waits the given seconds", wait, input_schema=SECONDS),
    ]
    return Registry(found, ScopePolicy())
