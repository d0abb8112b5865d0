"""The gateway against a server no one here wrote: ``@modelcontextprotocol/server-filesystem``.

The reference filesystem server from the npm registry (pinned in ``tests/node_tools.py``,
fetched once into the node tools' cache and announced) runs as a stdio upstream on a
temporary directory, beside ``kit`` (``tests/upstream_servers.py``), behind
``opgate serve --upstreams``. Through the official ``mcp.Client``, both client eras:
search finds the tools of both upstreams, inspect shows the filesystem tool's schema,
invoke reads a file and lists the directory, and a path outside the allowed directory
comes back as the upstream's own error, a tool error of that call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import ROOT, serve_environment
from node_tools import Filesystem, ensure_filesystem
from upstream_servers import stdio_entry

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def filesystem() -> Filesystem:
    return ensure_filesystem()


def texts(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_filesystem_server_through_the_gateway(
    filesystem: Filesystem, tmp_path: Path, mode: str
) -> None:
    allowed = (tmp_path / "allowed").resolve()
    (allowed / "notes").mkdir(parents=True)
    (allowed / "hello.txt").write_text("hello from the filesystem server\n", "utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the agent\n", "utf-8")
    node, *args = filesystem.command(allowed)
    servers = {"files": {"command": node, "args": args}, "kit": stdio_entry("kit")}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), "utf-8")
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "--upstreams", str(path)],
        cwd=str(ROOT),
        env=serve_environment(),
    )
    with anyio.fail_after(120):
        async with Client(parameters, mode=mode) as client:  # type: ignore[arg-type]
            page = await client.call_tool("search", {"query": "read", "limit": 20})
            assert page.structured_content is not None, page
            found = {item["name"] for item in page.structured_content["items"]}
            assert {"files.read_text_file", "files.read_multiple_files"} <= found, found
            page = await client.call_tool("search", {"query": "text", "limit": 20})
            assert page.structured_content is not None, page
            found = {item["name"] for item in page.structured_content["items"]}
            assert {"files.read_text_file", "kit.echo"} <= found, found

            inspected = await client.call_tool("inspect", {"name": "files.read_text_file"})
            assert not inspected.is_error, inspected
            assert inspected.structured_content is not None
            schema = inspected.structured_content["input_schema"]
            assert "path" in schema["properties"]
            assert "path" in schema["required"]

            read = await client.call_tool(
                "invoke",
                {"name": "files.read_text_file", "arguments": {"path": str(allowed / "hello.txt")}},
            )
            assert not read.is_error, read
            assert "hello from the filesystem server" in texts(read)

            listed = await client.call_tool(
                "invoke", {"name": "files.list_directory", "arguments": {"path": str(allowed)}}
            )
            assert not listed.is_error, listed
            assert "[FILE] hello.txt" in texts(listed)
            assert "[DIR] notes" in texts(listed)

            outside = await client.call_tool(
                "invoke", {"name": "files.read_text_file", "arguments": {"path": str(secret)}}
            )
            assert outside.is_error, outside
            assert "outside allowed directories" in texts(outside)
            assert "not for the agent" not in texts(outside)
