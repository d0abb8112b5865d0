"""Small MCP servers on the official SDK, run as upstreams by the tests (a subprocess each).

``python tests/upstream_servers.py kit`` serves ``KIT`` (an ``MCPServer``, the SDK's
high-level server with typed tools) over stdio; ``... kit http PORT`` over
streamable HTTP on 127.0.0.1 (``... kit http PORT json``: JSON bodies, no event
streams). ``... raw`` serves ``RAW`` (the SDK's low-level
``Server`` with hand-written tool definitions: names, schemas and answers no typed
function would produce).

``... shifty PATH`` serves ``SHIFTY``, whose tools are the ones the JSON file ``PATH``
lists (``[{"name": ..., "description": ..., "inputSchema": ...}]``, read at start), each
answering ``"called NAME"``: a test writes another file between two runs to change a
tool's definition under the gateway's lock file.

``stdio_entry(which, **members)`` is the ``mcpServers`` entry that runs one of them;
``serve_kit_http()`` runs ``KIT`` over HTTP for a ``with`` block and yields its URL.

``KIT``'s tools:

* ``echo(text)``: the text (its title is "Echo a text back"); ``add(a, b)``: the sum,
  as structured content (annotated read-only and idempotent);
* ``environment()``: the names of every variable in the process's environment, and
  ``variable(name)``: one value (``""`` when unset) — env isolation seen from inside;
* ``refuse(reason)``: an ``isError`` result with the reason;
* ``blob(mib)``: ``mib`` MiB of text (over HTTP only);
* ``slow(seconds, marker)``: sleeps, then answers ``"done"`` (cancelled first, it writes
  ``cancelled`` to the file ``marker``); ``crash()``: the process exits
  mid-call; ``pixel()``: a one-pixel PNG image;
* ``request_headers()``: the HTTP headers of the request (``{}`` on stdio);
* ``parent_environment()``: the variable names of the gateway's (its parent's)
  ``/proc/PPID/environ``, or an ``isError`` result when reading it is refused.

``RAW``'s tools (see ``RAW_TOOLS``): one whose input schema has a lookbehind pattern
(outside opgate's compiler profile), names with characters outside opgate's rule,
two names that clean to the same operation name, an over-long name, a tool listed
twice, and answers opgate must refuse: nesting deeper than opgate's JSON profile (and
so deep that the SDK's parser refuses the message),
image data that is not base64, a text far over the result budget, a line on stdout
that never ends (``endless``, ``mib`` MiB of it with ``mib``), structured
content that breaks the tool's own output schema, and a 2026-07-28
``InputRequiredResult``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.server.stdio import stdio_server

#: This file, run as the upstream's program.
HERE = Path(__file__).resolve()

#: A 1x1 transparent PNG.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

KIT = MCPServer("kit", version="1.0")


@KIT.tool(title="Echo a text back")
def echo(text: str) -> str:
    """Returns the text it was given. Nothing else."""
    return text


@KIT.tool(annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers. The sum comes back as structured content."""
    return a + b


@KIT.tool()
def environment() -> list[str]:
    """The names of the variables in this process's environment."""
    return sorted(os.environ)


@KIT.tool()
def variable(name: str) -> str:
    """The value of one environment variable, empty when unset."""
    return os.environ.get(name, "")


@KIT.tool()
def refuse(reason: str) -> str:
    """Always fails with the reason given."""
    raise ToolError(f"refused: {reason}")


@KIT.tool()
async def slow(seconds: float, marker: str = "") -> str:
    """Sleeps, then answers; if cancelled first, writes "cancelled" to the file ``marker``."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if marker:
            Path(marker).write_text("cancelled")
        raise
    return "done"


def blob(mib: int) -> str:
    """``mib`` MiB of text (served over HTTP only: stdio tests count ``KIT``'s tools)."""
    return "x" * (mib << 20)


@KIT.tool()
def crash() -> str:
    """The server process exits in the middle of the call."""
    os._exit(3)


@KIT.tool()
def pixel() -> Image:
    """A one-pixel image."""
    return Image(data=PIXEL, format="png")


@KIT.tool()
def request_headers(ctx: Context) -> dict[str, str]:
    """The HTTP headers of this request (empty over stdio)."""
    return dict(ctx.headers or {})


@KIT.tool()
def parent_environment() -> list[str]:
    """The names of the variables in the parent process's ``/proc/PPID/environ``."""
    try:
        raw = Path(f"/proc/{os.getppid()}/environ").read_bytes()
    except OSError as exc:
        raise ToolError(f"refused: {exc.strerror}") from None
    return sorted(item.partition(b"=")[0].decode() for item in raw.split(b"\0") if item)


_OBJECT: dict[str, Any] = {"type": "object"}

RAW_TOOLS = [
    types.Tool(
        name="lookbehind",
        description="Has a pattern opgate cannot compile.",
        input_schema={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "(?<=a)b"}},
        },
    ),
    types.Tool(name="read file", description="A name with a space.", input_schema=_OBJECT),
    types.Tool(name="read?file", description="Cleans to the same name.", input_schema=_OBJECT),
    types.Tool(
        name="read_file_2",
        description="A plain name a renamed one could take.",
        input_schema=_OBJECT,
    ),
    types.Tool(name="t" * 200, description="A very long name.", input_schema=_OBJECT),
    types.Tool(name="twice", description="Listed two times.", input_schema=_OBJECT),
    types.Tool(name="twice", description="Listed two times (again).", input_schema=_OBJECT),
    types.Tool(
        name="deep", description="Structured content 140 levels deep.", input_schema=_OBJECT
    ),
    types.Tool(name="deeper", description="An answer the SDK cannot parse.", input_schema=_OBJECT),
    types.Tool(
        name="bad_image", description="Image data that is not base64.", input_schema=_OBJECT
    ),
    types.Tool(name="huge", description="A text of 4 MiB.", input_schema=_OBJECT),
    types.Tool(
        name="wrong_shape",
        description="Breaks its own output schema.",
        input_schema=_OBJECT,
        output_schema={
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
        },
    ),
    types.Tool(name="ask", description="Asks for input (2026-07-28).", input_schema=_OBJECT),
    types.Tool(
        name="endless",
        description="Writes a line that never ends to stdout.",
        input_schema={"type": "object", "properties": {"mib": {"type": "integer"}}},
    ),
    types.Tool(name="protocol_error", description="A JSON-RPC error.", input_schema=_OBJECT),
]


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


async def _raw_list(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=RAW_TOOLS)


async def _raw_call(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> Any:
    name = params.name
    if name in ("deep", "deeper"):
        value: Any = []
        for _ in range(140 if name == "deep" else 220):
            value = [value]
        return types.CallToolResult(content=[_text(name)], structured_content={"v": value})
    if name == "bad_image":
        image = types.ImageContent(type="image", data="not base64!", mime_type="image/png")
        return types.CallToolResult(content=[image])
    if name == "huge":
        return types.CallToolResult(content=[_text("x" * (4 << 20))])
    if name == "wrong_shape":
        return types.CallToolResult(content=[_text("{}")], structured_content={"count": "many"})
    if name == "ask":
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message="Which one?",
                requested_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            )
        )
        return types.InputRequiredResult(input_requests={"n": request}, request_state="s")
    if name == "endless":
        # Past the SDK's writer, straight to the pipe: MIB MiB (default: without end) of
        # one line, then silence; the gateway must stop reading it, not keep it.
        from mcp.server import stdio as sdk_stdio

        claim = sdk_stdio._claims.get(1)  # the SDK moves the wire off fd 1 (to stderr)
        wire = claim.private_fd if claim is not None and claim.private_fd is not None else 1
        chunk = b"x" * (1 << 20)
        mib = int((params.arguments or {}).get("mib", 0))
        written = 0
        while not mib or written < mib:
            view = memoryview(chunk)
            while view:
                view = view[await anyio.to_thread.run_sync(os.write, wire, view) :]
            written += 1
        await anyio.sleep(3600)
    if name == "protocol_error":
        raise MCPError(types.INVALID_PARAMS, "no such thing\nsecond line")
    return types.CallToolResult(content=[_text(f"called {name}")])


RAW = Server("raw", version="0.1", on_list_tools=_raw_list, on_call_tool=_raw_call)


async def _serve_raw() -> None:
    async with stdio_server() as (read, write):
        await RAW.run(read, write, RAW.create_initialization_options())


def shifty_tools(path: str) -> list[types.Tool]:
    """The tools of the file ``SHIFTY`` serves."""
    return [types.Tool.model_validate(tool) for tool in json.loads(Path(path).read_text())]


async def _serve_shifty(path: str) -> None:
    tools = shifty_tools(path)

    async def listed(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def called(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> Any:
        return types.CallToolResult(content=[_text(f"called {params.name}")])

    shifty = Server("shifty", version="0.1", on_list_tools=listed, on_call_tool=called)
    async with stdio_server() as (read, write):
        await shifty.run(read, write, shifty.create_initialization_options())


def stdio_entry(which: str = "kit", *arguments: str, **members: Any) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs ``which`` (``"kit"`` or ``"raw"``; ``"shifty"``
    with its file as ``arguments``) over stdio."""
    return {"command": sys.executable, "args": [str(HERE), which, *arguments], **members}


@contextmanager
def serve_kit_http(*, json_response: bool = False) -> Iterator[str]:
    """``KIT`` over streamable HTTP in a subprocess (answering POSTs with one JSON body
    instead of an event stream with ``json_response``); yields its endpoint URL."""
    # Imported here: run as an upstream, this file gets no PYTHONPATH (env isolation).
    from conftest import await_port, free_port, stop_process

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(HERE), "kit", "http", str(port), *(["json"] if json_response else [])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await_port(process, port, lambda: "(stderr not kept)")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


def main(argv: list[str]) -> None:
    which = argv[1] if len(argv) > 1 else "kit"
    if which == "raw":
        anyio.run(_serve_raw)
    elif which == "shifty":
        anyio.run(_serve_shifty, argv[2])
    elif len(argv) > 3 and argv[2] == "http":
        json_response = argv[4:] == ["json"]
        KIT.add_tool(blob)
        KIT.run("streamable-http", host="127.0.0.1", port=int(argv[3]), json_response=json_response)
    else:
        KIT.run()


if __name__ == "__main__":
    main(sys.argv)
