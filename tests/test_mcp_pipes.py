"""Tests of ``opgate.mcp._pipes``: the stdio wire read and written in the event loop.

Lines come out whole however the bytes arrive, a write larger than the pipe waits for
room instead of failing, the descriptors get their blocking mode back, and only pipes
and sockets are served in the loop: a server whose stdin is a regular file still
answers, through the threaded path.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from opgate.mcp._pipes import CHUNK_BYTES, PipeReader, PipeWriter, in_loop, serving_in_loop

from conftest import ROOT, serve_environment

pytestmark = pytest.mark.anyio


async def _lines(reader: PipeReader) -> list[bytes]:
    found = []
    while line := await reader.readline():
        found.append(line)
    return found


async def test_lines_come_whole_however_the_bytes_arrive() -> None:
    read, write = os.pipe()
    big = b"x" * (3 * CHUNK_BYTES + 5) + b"\n"
    pieces = [b'{"a":', b"1}\n{", b'"b":2}\n\n', big[:70_000], big[70_000:], b"tail"]
    with serving_in_loop(read, write):
        reader, writer = PipeReader(read), PipeWriter(write)
        async with anyio.create_task_group() as group:

            async def feed() -> None:
                for piece in pieces:
                    await writer.write(piece)
                    await anyio.sleep(0.01)
                os.close(write)

            group.start_soon(feed)
            found = await _lines(reader)
    os.close(read)
    assert found == [b'{"a":1}\n', b'{"b":2}\n', b"\n", big, b"tail"]


async def test_a_write_larger_than_the_pipe_waits_for_room() -> None:
    read, write = os.pipe()
    data = os.urandom(1024 * 1024)  # far over a pipe's 64 KiB
    received = bytearray()
    with serving_in_loop(write):
        async with anyio.create_task_group() as group:

            async def drain() -> None:
                while len(received) < len(data):
                    await anyio.sleep(0.001)
                    received.extend(os.read(read, 256 * 1024))

            group.start_soon(drain)
            await PipeWriter(write).write(data)
    os.close(read)
    os.close(write)
    assert bytes(received) == data


def test_descriptors_get_their_blocking_mode_back() -> None:
    read, write = os.pipe()
    try:
        with serving_in_loop(read, write):
            assert not os.get_blocking(read)
            assert not os.get_blocking(write)
        assert os.get_blocking(read)
        assert os.get_blocking(write)
    finally:
        os.close(read)
        os.close(write)


def test_only_pipes_and_sockets_are_served_in_the_loop(tmp_path: Path) -> None:
    read, write = os.pipe()
    left, right = socket.socketpair()
    regular = (tmp_path / "file").open("wb")
    try:
        assert in_loop(read)
        assert in_loop(write)
        assert in_loop(left.fileno())
        assert not in_loop(regular.fileno())
        assert not in_loop(10_000)  # no such descriptor
    finally:
        for fd in (read, write):
            os.close(fd)
        left.close()
        right.close()
        regular.close()


def test_a_server_reading_a_regular_file_answers_through_the_threaded_path(
    tmp_path: Path,
) -> None:
    """stdin a file (``opgate serve < requests``): not a pipe, so the SDK's threaded
    reader serves it, and every request is answered."""
    requests = tmp_path / "requests.jsonl"
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "file", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    requests.write_text("".join(json.dumps(message) + "\n" for message in messages))
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry"],
            stdin=stdin,
            capture_output=True,
            cwd=ROOT,
            env=serve_environment(),
            timeout=120,
            check=False,
        )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [answer.get("id") for answer in answers] == [1, 2], done.stderr.decode()
    assert {tool["name"] for tool in answers[1]["result"]["tools"]} >= {"search", "invoke"}
