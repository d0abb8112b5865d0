"""A stdio upstream's transport: the SDK's ``stdio_client`` with every line bounded.

The SDK's ``stdio_client`` keeps the bytes of a line until its newline arrives, with
no limit, joining each new chunk to all that came before (so a line of *n* bytes costs
memory *n* and time of order *n*² in the event loop: 64 MiB took 27 s here). A hostile
or broken upstream could hold the gateway's memory and loop that way with one line
that never ends. ``bounded_stdio_client(server, errlog=, max_line_bytes=,
on_oversized=)`` is the same transport with one difference, in how stdout is read:
the bytes of a line are kept as a list of chunks, newlines are searched for in each
new chunk only, and a line longer than ``max_line_bytes`` (newline excluded) is never
parsed. ``on_oversized(size)`` is told the size read so far, and the read stream ends,
which the SDK's session sees as the connection closing: the calls in flight fail, and
nothing more is read from that process, which is stopped as the SDK stops it.

Everything else (spawning in a process group of its own, stdin, the stop sequence,
the drain of stdout at the end, parsing a line) is the SDK's own, called through its
``mcp.client.stdio`` helpers, so the two transports differ only in that reader.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.lowlevel
from mcp import StdioServerParameters
from mcp.client import stdio as sdk
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

__all__ = ["bounded_stdio_client"]


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    *,
    errlog: TextIO,
    max_line_bytes: int,
    on_oversized: Callable[[int], None],
) -> AsyncIterator[TransportStreams]:
    """The SDK's ``stdio_client(server, errlog)`` with lines of at most
    ``max_line_bytes`` (see the module docstring)."""
    command = await sdk._get_executable_command(server.command)
    process = await sdk._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        0
    )
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        stdout = process.stdout
        assert stdout is not None, "the process is spawned with pipes"
        pieces: list[bytes] = []
        size = 0
        try:
            async with read_stream_writer:
                try:
                    while True:
                        try:
                            chunk = await stdout.receive()
                        except anyio.EndOfStream:
                            return
                        while chunk:
                            end = chunk.find(b"\n")
                            if end < 0:
                                pieces.append(chunk)
                                size += len(chunk)
                                chunk = b""
                            else:
                                pieces.append(chunk[:end])
                                size += end
                                chunk = chunk[end + 1 :]
                            if size > max_line_bytes:
                                on_oversized(size)
                                # The session sees the end now; the drain below then
                                # discards the rest until the process is stopped.
                                read_stream_writer.close()
                                return
                            if end < 0:
                                continue
                            raw, pieces, size = b"".join(pieces), [], 0
                            message: SessionMessage | Exception
                            try:
                                line = raw.decode(server.encoding, server.encoding_error_handler)
                                message = sdk._parse_line(line)
                            except UnicodeDecodeError as exc:  # a line, not the stream
                                message = exc
                            try:
                                await read_stream_writer.send(message)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    await sdk._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # shutdown closed the pipe under the read; the session sees the end

    async def stdin_writer() -> None:
        stdin = process.stdin
        assert stdin is not None, "the process is spawned with pipes"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send(
                        (json + "\n").encode(server.encoding, server.encoding_error_handler)
                    )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk._stop_server_process(process)
        await sdk._aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdout_reader)
        tasks.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            # As the SDK's: the stop must finish under the caller's cancellation too,
            # or the process would outlive the connection; every wait in it is bounded.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tasks.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
