"""The MCP test catalog plus one handler bug, for ``tests/test_http_serving.py``.

``opgate serve tests.serving_catalog:build_registry`` serves ``tests.mcp_catalog``'s
operations and ``orders.checkout``, whose handler builds a ``URLInput`` with a plain
``http://`` URL: ``URLInput`` refuses it, so every call fails ``internal``, and the
private cause is what a developer needs to see.
"""

from __future__ import annotations

from typing import Any

from tests.mcp_catalog import ScopePolicy, operations

from opgate import Invocation, Operation, Registry, URLInput, await_input

INSECURE_URL = "http://pay.example.com/checkout/42"


async def checkout(inv: Invocation) -> Any:
    return await_input(URLInput("Pay here", INSECURE_URL))


def build_registry() -> Registry:
    found = [*operations(), Operation("orders.checkout", "Check out an order", checkout)]
    return Registry(found, ScopePolicy())
