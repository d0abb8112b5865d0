"""The stdio wire read and written in the event loop, not through worker threads.

The SDK's stdio server reads each line, and writes and flushes each message, through
``anyio.wrap_file``: a hand-off to a worker thread and back for every line read, every
write and every flush, three per call. When the wire is a pipe or a socket (how every
MCP client starts a stdio server), ``PipeReader`` and ``PipeWriter`` read and write its
descriptor without blocking instead, waiting on the event loop
(``anyio.wait_readable``, ``anyio.wait_writable``) only when it has nothing to give or
no room. ``in_loop(fd)`` says whether a descriptor can be served so: a FIFO or a socket,
on a system other than Windows. A regular file, a terminal or Windows keep the threaded
path (``anyio.wrap_file``), whose behaviour is the same.

Both put the descriptor in non-blocking mode for as long as they serve it
(``serving_in_loop``, which restores its mode on leaving). Neither closes it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import anyio

__all__ = ["CHUNK_BYTES", "PipeReader", "PipeWriter", "in_loop", "serving_in_loop"]

#: Bytes read from the wire at once.
CHUNK_BYTES: Final = 65_536


def in_loop(fd: int) -> bool:
    """Whether ``fd`` can be served in the event loop: a FIFO or a socket, not on Windows."""
    if os.name == "nt":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def serving_in_loop(*fds: int) -> Iterator[None]:
    """``fds`` non-blocking while the block runs, each back to its mode after it."""
    modes = [(fd, os.get_blocking(fd)) for fd in fds]
    try:
        for fd in fds:
            os.set_blocking(fd, False)
        yield
    finally:
        for fd, blocking in modes:
            with contextlib.suppress(OSError):  # a descriptor gone: nothing to restore
                os.set_blocking(fd, blocking)


class PipeReader:
    """Lines of a non-blocking descriptor, ``readline()`` as a binary file's: each line
    with its ``\\n``, the last one without it if the wire ends in the middle, then
    ``b""`` at the end of the wire."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no line feed
        self._ended = False

    async def readline(self) -> bytes:
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(buffer[: end + 1])
                del buffer[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(buffer)
            if self._ended:
                line = bytes(buffer)
                buffer.clear()
                self._scanned = 0
                return line
            try:
                data = os.read(self._fd, CHUNK_BYTES)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if data:
                buffer += data
            else:
                self._ended = True


class PipeWriter:
    """Writes to a non-blocking descriptor: ``write`` returns once every byte is
    written, waiting on the event loop while the pipe is full; ``flush`` has nothing to
    do (nothing is buffered here)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            view = view[written:]

    async def flush(self) -> None:
        return None
