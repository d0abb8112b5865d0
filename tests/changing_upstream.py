"""A small upstream whose tools change, on the official SDK's low-level ``Server``.

``python tests/changing_upstream.py ERA TOOLS [GATE]`` serves over stdio, in the
2025-11-25 era only (``legacy``: the SDK's handshake loop) or in both (``modern``: the
SDK's ``Server.run``, which an ``auto`` client speaks as 2026-07-28, with
``subscriptions/listen`` served). ``TOOLS`` is a JSON file holding a list of tool
names, read at every ``tools/list``, so a test changes the tools by writing it. With
``GATE``, a file that does not exist yet, the process exits at once (a start that
fails until the test creates it: an upstream that comes late).

Tools, beside one per name in ``TOOLS`` (each answers ``"NAME called"``):

* ``announce(count)``: says ``count`` times that the tools changed
  (``notifications/tools/list_changed``, or ``ToolsListChanged`` on the listen streams);
* ``wait(seconds)``: sleeps, then answers ``"waited"``;
* ``pid()``: the process id (a test kills the process with it);
* ``ask()``: asks a form with ``elicitation/create`` (2025-11-25 only), then answers
  ``"asked ACTION"``.

``entry(era, tools, gate=None)`` is the ``mcpServers`` entry that runs it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

#: This file, run as the upstream's program.
HERE = Path(__file__).resolve()

_OBJECT: dict[str, Any] = {"type": "object"}
_FIXED = [
    types.Tool(
        name="announce",
        description="Says that the tools changed, count times.",
        input_schema={"type": "object", "properties": {"count": {"type": "integer"}}},
    ),
    types.Tool(
        name="wait",
        description="Sleeps, then answers.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
    ),
    types.Tool(name="pid", description="The process id.", input_schema=_OBJECT),
    types.Tool(name="ask", description="Asks a form (2025-11-25).", input_schema=_OBJECT),
]

BUS = InMemorySubscriptionBus()
_TOOLS = Path(sys.argv[2]) if len(sys.argv) > 2 else None


def _named() -> list[str]:
    if _TOOLS is None:
        return []
    names: list[str] = json.loads(_TOOLS.read_text("utf-8"))
    return names


async def _list(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    named = [
        types.Tool(name=name, description=f"Tool {name}.", input_schema=_OBJECT)
        for name in _named()
    ]
    return types.ListToolsResult(tools=[*_FIXED, *named])


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    arguments = params.arguments or {}
    if params.name == "announce":
        for _ in range(int(arguments.get("count", 1))):
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await BUS.publish(ToolsListChanged())
            else:
                await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[_text("announced")])
    if params.name == "wait":
        await anyio.sleep(float(arguments.get("seconds", 1)))
        return types.CallToolResult(content=[_text("waited")])
    if params.name == "pid":
        return types.CallToolResult(content=[_text(str(os.getpid()))])
    if params.name == "ask":
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        answer = await ctx.session.elicit_form(
            "Which one?", schema, related_request_id=ctx.request_id
        )
        return types.CallToolResult(content=[_text(f"asked {answer.action}")])
    return types.CallToolResult(content=[_text(f"{params.name} called")])


SHIFTY = Server(
    "shifty",
    version="1.0",
    on_list_tools=_list,
    on_call_tool=_call,
    on_subscriptions_listen=ListenHandler(BUS),
)


async def _serve(era: str) -> None:
    async with stdio_server() as (read, write):
        options = SHIFTY.create_initialization_options()
        if era == "modern":
            await SHIFTY.run(read, write, options)
            return
        async with SHIFTY.lifespan(SHIFTY) as state:
            await serve_loop(SHIFTY, read, write, lifespan_state=state, init_options=options)


def entry(era: str, tools: Path, gate: Path | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs this upstream in ``era`` with the tool names of
    the file ``tools`` (and, with ``gate``, only once that file exists)."""
    args = [str(HERE), era, str(tools), *([] if gate is None else [str(gate)])]
    return {"command": sys.executable, "args": args}


if __name__ == "__main__":
    if len(sys.argv) > 3 and not Path(sys.argv[3]).exists():
        sys.exit(1)
    anyio.run(_serve, sys.argv[1])
