"""``opgate.upstream._stdio``: the stdio transport reads lines of a bounded size.

Against real processes (``python -c``): messages split across chunks and several in
one chunk arrive whole and in order; a line that is not UTF-8 is an error value and the
next line still arrives; a line over the bound is never kept: ``on_oversized`` is told,
the read stream ends, and the process that keeps writing is stopped on exit. Through a
catalog, ``raw.endless`` (a line that never ends) fails that call at once, naming the
bound, the upstream is no longer connected and says why, and another upstream goes on.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

from opgate import Completed, Failed, FailureCode, Limits, LocalPolicy
from opgate.upstream import load_config, open_catalog
from opgate.upstream._session import MIN_MESSAGE_BYTES, max_message_bytes
from opgate.upstream._stdio import bounded_stdio_client

from upstream_servers import stdio_entry

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


NL = b"\n"
NOT_UTF8 = bytes([0xFF, 0xFE])


def ping(ident: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % ident


@asynccontextmanager
async def transport(script: str, limit: int, oversized: list[int]) -> AsyncIterator[Any]:
    server = StdioServerParameters(command=sys.executable, args=["-c", script])
    async with bounded_stdio_client(
        server, errlog=sys.stderr, max_line_bytes=limit, on_oversized=oversized.append
    ) as (read, _write):
        yield read


async def received(read: Any) -> list[Any]:
    got = []
    with anyio.fail_after(20):
        async for message in read:
            got.append(message)
    return got


async def test_split_and_joined_lines_arrive_whole_and_in_order() -> None:
    first, second, third = ping(1), ping(2), ping(3)
    script = (
        "import os, time\n"
        f"os.write(1, {first[:10]!r}); time.sleep(0.2)\n"
        f"os.write(1, {first[10:] + NL + second + NL + third[:5]!r}); time.sleep(0.2)\n"
        f"os.write(1, {third[5:] + NL!r})\n"
    )
    oversized: list[int] = []
    async with transport(script, 1 << 20, oversized) as read:
        got = await received(read)
    assert all(isinstance(message, SessionMessage) for message in got), got
    requests = [message.message for message in got]
    assert [request.id for request in requests if isinstance(request, types.JSONRPCRequest)] == [
        1,
        2,
        3,
    ]
    assert oversized == []


async def test_a_line_that_is_not_utf8_is_an_error_and_the_next_line_arrives() -> None:
    script = f"import os\nos.write(1, {NOT_UTF8 + NL + ping(7) + NL!r})\n"
    async with transport(script, 1 << 20, []) as read:
        bad, good = await received(read)
    assert isinstance(bad, UnicodeDecodeError)
    assert isinstance(good, SessionMessage)
    assert isinstance(good.message, types.JSONRPCRequest)
    assert good.message.id == 7


async def test_a_line_over_the_bound_is_never_kept_and_ends_the_stream() -> None:
    # A line without end, written as fast as the pipe takes it.
    script = "import os\nchunk = b'x' * 65536\nwhile True:\n    os.write(1, chunk)\n"
    oversized: list[int] = []
    started = time.perf_counter()
    async with transport(script, 1 << 20, oversized) as read:
        got = await received(read)
    assert got == []
    (size,) = oversized
    assert 1 << 20 < size <= (1 << 20) + 65536
    assert time.perf_counter() - started < 15  # the writer was stopped, not waited for


async def test_a_line_at_the_bound_arrives() -> None:
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
    line += b"y" * (4096 - len(line) - 3) + b'"}}'
    assert len(line) == 4096
    script = f"import os\nos.write(1, {line + NL!r})\n"
    oversized: list[int] = []
    async with transport(script, 4096, oversized) as read:
        (message,) = await received(read)
    assert isinstance(message, SessionMessage), message
    assert oversized == []


def test_the_bound_follows_the_result_budget_above_a_floor() -> None:
    assert max_message_bytes(Limits()) == MIN_MESSAGE_BYTES == 16 << 20
    assert max_message_bytes(Limits(result_bytes=4 << 20)) == 32 << 20


async def test_an_upstream_that_never_ends_its_line_fails_that_call_and_no_other() -> None:
    config = load_config({"mcpServers": {"raw": stdio_entry("raw"), "kit": stdio_entry("kit")}})
    async with open_catalog(config, start_timeout=60, call_timeout=60) as catalog:
        registry = catalog.registry(LocalPolicy())
        started = time.perf_counter()
        with anyio.fail_after(30):
            outcome = await registry.invoke(None, "raw.endless", {})
        assert isinstance(outcome, Failed), outcome
        assert outcome.failure.code is FailureCode.OPERATION_FAILED
        assert outcome.failure.message == (
            f"upstream 'raw' sent a message over {16 << 20} bytes; the gateway closed the "
            "connection"
        )
        assert time.perf_counter() - started < 30  # well before call_timeout
        status = catalog.sessions["raw"].status()
        assert not status.connected
        assert status.reason == f"it sent a message over {16 << 20} bytes"
        again = await registry.invoke(None, "raw.endless", {})
        assert isinstance(again, Failed)
        assert "is not connected (it sent a message over" in again.failure.message
        echoed = await registry.invoke(None, "kit.echo", {"text": "still here"})
        assert isinstance(echoed, Completed), echoed
