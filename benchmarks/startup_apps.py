"""The servers ``bench_startup.py`` starts cold: the same catalog under opgate and FastMCP.

``$OPGATE_BENCH_SOURCE`` names the catalog (``bench_real.catalog_for``: ``botocore`` or
``synthetic:N``). Nothing is built at import:

* ``opgate serve startup_apps:registry`` calls ``registry()``: the catalog's operations
  in a ``Registry`` (``bench_real.LIMITS``; ``opgate serve --ranking`` picks the ranking);
* ``fastmcp run startup_apps.py:mcp`` reads ``mcp`` (built on that first read, through
  the module's ``__getattr__``): a ``FastMCP`` server with one tool per operation (its
  input schema as the tool's parameters) behind ``BM25SearchTransform``, as
  ``bench_mcp.py`` builds it.
"""

from __future__ import annotations

import os
from typing import Any

#: The environment variable naming the catalog.
SOURCE_ENV = "OPGATE_BENCH_SOURCE"


def _catalog() -> Any:
    source = os.environ.get(SOURCE_ENV, "synthetic:100")
    if source == "botocore":  # without bench_real, which imports opgate: FastMCP needs none
        from real_catalog import real_catalog

        return real_catalog(1)
    from bench_real import catalog_for

    return catalog_for(source, 1)


def registry() -> Any:
    """The catalog as an opgate ``Registry`` (every operation allowed)."""
    from bench_real import LIMITS, to_operations
    from common import AllowAll
    from opgate import Registry

    return Registry(to_operations(_catalog()), AllowAll(), limits=LIMITS)


def _fastmcp() -> Any:
    from fastmcp import FastMCP
    from fastmcp.server.transforms.search import BM25SearchTransform
    from fastmcp.tools.base import Tool, ToolResult

    class CatalogTool(Tool):  # type: ignore[misc, unused-ignore]
        """A catalog operation with its own input schema (never called here)."""

        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            return ToolResult(content=[])

    server = FastMCP("bench")
    server.add_transform(BM25SearchTransform(max_results=5))
    provider = server._local_provider
    for operation in _catalog():
        tool = CatalogTool(
            name=operation.name,
            description=f"{operation.summary}\n\n{operation.description}",
            parameters=operation.input_schema,
        )
        # As bench_mcp.py: ``add_tool`` compares each tool with every registered one.
        provider._components[tool.key] = tool
    return server


def __getattr__(name: str) -> Any:
    if name == "mcp":
        server = _fastmcp()
        globals()["mcp"] = server
        return server
    raise AttributeError(name)
