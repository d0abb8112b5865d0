"""One upstream MCP server of the gateway benchmark, on the official SDK's low-level ``Server``.

``python benchmarks/gateway_upstream.py CATALOG NAME`` serves, over stdio, the tools that
the JSON file ``CATALOG`` (written by ``bench_gateway.py``) lists under ``NAME``: each a
``{"name", "description", "inputSchema"}`` object. A call of any tool answers at once with
one text block naming the tool and the number of arguments, so what a benchmark measures
is the path to and from the upstream, not the upstream's work.

Only the SDK's low-level server is imported (no pydantic models of tools per call, no
function signatures), so a process starts as fast as the SDK lets one start.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server


def serve(catalog: Path, name: str) -> None:
    """Serve the tools of upstream ``name`` of ``catalog`` over stdio until stdin closes."""
    listed = json.loads(catalog.read_text(encoding="utf-8"))[name]
    tools = [
        types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
        for t in listed
    ]
    names = frozenset(tool.name for tool in tools)
    result = types.ListToolsResult(tools=tools)

    async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        return result

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name}")
        count = len(params.arguments or {})
        text = f"{name}.{params.name}: done ({count} arguments)"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server(name, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2])
