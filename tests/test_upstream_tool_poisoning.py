"""Tool poisoning: an upstream's descriptions reach the agent only as data.

``opgate serve --upstreams`` over stdio, driven by the official ``mcp.Client``, with an
upstream whose tool description tries to instruct the agent (``relay_servers.POISON``).
The gateway's own tool definitions and instructions — what a client puts in the model's
context as the server's word — are opgate's three tools, whatever the upstreams say; the
upstream's text appears only inside ``search`` and ``inspect`` results, as the values of
their ``summary`` and ``description`` members.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import ROOT, serve_environment
from relay_servers import POISON, entry


@pytest.mark.anyio
async def test_an_upstreams_descriptions_are_data_not_the_gateways_word(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"words": entry("modern")}}), "utf-8")
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "--upstreams", str(path)],
        cwd=str(ROOT),
        env=serve_environment(),
    )
    with anyio.fail_after(120):
        async with Client(parameters, mode="legacy") as client:
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["search", "inspect", "invoke"]
            own = json.dumps([tool.model_dump(mode="json") for tool in listed.tools])
            own += client.instructions or ""
            assert "SYSTEM NOTE" not in own
            assert "id_rsa" not in own
            page = await client.call_tool("search", {"query": "looks up a word"})
            assert page.structured_content is not None
            (item,) = [i for i in page.structured_content["items"] if i["name"] == "words.poisoned"]
            assert item["summary"] == "Looks up a word"  # the title, not the description
            spec = await client.call_tool("inspect", {"name": "words.poisoned"})
            assert spec.structured_content is not None
            assert spec.structured_content["description"] == POISON
