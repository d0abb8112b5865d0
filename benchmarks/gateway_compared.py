"""The comparison gateways of ``bench_gateway.py``, each served over stdio.

``python benchmarks/gateway_compared.py fastmcp CONFIG [--no-search]`` serves FastMCP's
proxy of the ``mcpServers`` file ``CONFIG`` (``fastmcp.server.create_proxy``: one
mounted client per entry, tools named ``NAME_TOOL``) behind its ``BM25SearchTransform``
(``search_tools``, five results, and ``call_tool``); ``--no-search`` leaves the
transform out, so ``tools/list`` lists every upstream tool.

``python benchmarks/gateway_compared.py fastmcp-gateway CONFIG`` serves fastmcp-gateway's
``GatewayServer`` over the same entries, each given to it as a one-server
``{"mcpServers": {...}}`` value (which it passes to ``fastmcp.Client``, a stdio
client of that command) and ``max_schema_depth=50`` (its largest: its default of 5
refuses most of the benchmark's schemas); it lists every upstream (``populate()``, one
after another) before serving its meta-tools (``discover_tools``, ``get_tool_schema``,
``execute_tool``, ...).

Both come from the ``bench`` extra; logging goes to stderr, which the benchmark drops.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any


def _fastmcp(config: dict[str, Any], search: bool) -> None:
    from fastmcp.server import create_proxy
    from fastmcp.server.transforms.search import BM25SearchTransform

    proxy = create_proxy(config, name="fastmcp-proxy")
    if search:
        proxy.add_transform(BM25SearchTransform(max_results=5))
    proxy.run(transport="stdio", show_banner=False)


def _fastmcp_connected(config: dict[str, Any]) -> None:
    from fastmcp import Client
    from fastmcp.server import create_proxy
    from fastmcp.server.transforms.search import BM25SearchTransform

    async def run() -> None:
        async with Client(config) as client:
            proxy = create_proxy(client, name="fastmcp-proxy")
            proxy.add_transform(BM25SearchTransform(max_results=5))
            await proxy.run_async(transport="stdio", show_banner=False)

    asyncio.run(run())


def _fastmcp_gateway(config: dict[str, Any]) -> None:
    from fastmcp_gateway import GatewayServer

    servers = config["mcpServers"]
    gateway = GatewayServer(
        {name: {"mcpServers": {name: entry}} for name, entry in servers.items()},
        max_schema_depth=50,  # its largest; the default 5 refuses most real schemas
    )

    async def run() -> None:
        await gateway.populate()
        await gateway.mcp.run_async(transport="stdio", show_banner=False)

    asyncio.run(run())


def main(argv: list[str]) -> None:
    which, path = argv[1], Path(argv[2])
    config = json.loads(path.read_text(encoding="utf-8"))
    if which == "fastmcp":
        _fastmcp(config, "--no-search" not in argv)
    elif which == "fastmcp-connected":
        _fastmcp_connected(config)
    elif which == "fastmcp-gateway":
        _fastmcp_gateway(config)
    else:
        raise SystemExit(f"unknown gateway {which!r}")


if __name__ == "__main__":
    main(sys.argv)
