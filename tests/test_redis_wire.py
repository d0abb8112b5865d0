"""``opgate.redis._wire``: one script over redis-py connections, on a real ``redis-server``.

The wire packs ``EVALSHA`` itself (strings, integers and bytes as bulk strings), loads
the script when the server does not know it, makes a call once more on a fresh
connection when the server closed the idle ones, keeps a connection after a whole
error reply, and never reuses a connection whose exchange was cancelled.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio as redis_client
from redis.exceptions import ConnectionError, ResponseError

from opgate.redis._wire import ScriptWire

from conftest import free_port
from redis_server import RedisServer

pytestmark = pytest.mark.anyio

#: Echoes its key and arguments; fails when the first argument is ``fail``.
ECHO = """
if ARGV[1] == 'fail' then return redis.error_reply('ERR refused by the script') end
local reply = {KEYS[1]}
for _, arg in ipairs(ARGV) do reply[#reply + 1] = arg end
return reply
"""
SHA = hashlib.sha1(ECHO.encode(), usedforsecurity=False).hexdigest()


@pytest.fixture
async def admin(redis_server: Any) -> AsyncIterator[Any]:
    client = redis_client.Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def others(admin: Any) -> int:
    """Connections to the server besides the admin's own."""
    mine = await admin.client_id()
    return sum(1 for client in await admin.client_list() if int(client["id"]) != mine)


def test_a_call_is_one_evalsha_command_of_bulk_strings() -> None:
    wire = ScriptWire("redis://127.0.0.1:1/0", ECHO)
    assert wire.pack(b"{p}:k", ("op", 42, b"\x00\xff")) == (
        b"*7\r\n$7\r\nEVALSHA\r\n$40\r\n" + SHA.encode() + b"\r\n$1\r\n1\r\n"
        b"$5\r\n{p}:k\r\n$2\r\nop\r\n$2\r\n42\r\n$2\r\n\x00\xff\r\n"
    )


async def test_the_script_is_loaded_when_the_server_does_not_know_it(
    redis_server: Any, admin: Any
) -> None:
    await admin.script_flush()
    wire = ScriptWire(redis_server.url, ECHO)
    try:
        assert await admin.script_exists(SHA) == [False]
        reply = await wire.run(b"{p}:k", ("op", -7, b"\x00\xff"))
        assert reply == [b"{p}:k", b"op", b"-7", b"\x00\xff"]
        assert await admin.script_exists(SHA) == [True]
        await admin.script_flush()  # the server forgets it again (SCRIPT FLUSH, a restart)
        assert await wire.run(b"{p}:k", ("again",)) == [b"{p}:k", b"again"]
    finally:
        await wire.aclose()


async def test_an_error_reply_keeps_its_connection(redis_server: Any, admin: Any) -> None:
    wire = ScriptWire(redis_server.url, ECHO)
    try:
        assert await wire.run(b"k", ("ok",)) == [b"k", b"ok"]
        assert await others(admin) == 1
        with pytest.raises(ResponseError, match="refused by the script"):
            await wire.run(b"k", ("fail",))
        assert await wire.run(b"k", ("ok",)) == [b"k", b"ok"]
        assert await others(admin) == 1  # the one connection, reused throughout
    finally:
        await wire.aclose()
    with anyio.fail_after(10):
        while await others(admin):  # aclose disconnects it
            await anyio.sleep(0.01)


async def test_concurrent_calls_each_take_a_connection_and_keep_it(
    redis_server: Any, admin: Any
) -> None:
    wire = ScriptWire(redis_server.url, ECHO)
    replies: list[Any] = []

    async def call(index: int) -> None:
        replies.append(await wire.run(b"k", (index,)))

    try:
        async with anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(call, index)
        assert sorted(replies) == [[b"k", b"%d" % index] for index in range(3)]
        made = await others(admin)
        assert 1 <= made <= 3
        for index in range(6):  # one at a time: the kept connections serve them
            assert await wire.run(b"k", (index,)) == [b"k", b"%d" % index]
        assert await others(admin) == made
    finally:
        await wire.aclose()


async def test_a_restarted_server_is_called_again_on_a_fresh_connection(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path)
    server.start()
    wire = ScriptWire(server.url, ECHO)
    try:
        async with anyio.create_task_group() as group:  # two idle connections
            for index in range(2):
                group.start_soon(wire.run, b"k", (index,))
        server.restart()  # every connection closed, the script cache empty
        assert await wire.run(b"k", ("after",)) == [b"k", b"after"]
        assert len(wire._idle) == 1  # the other stale connection was dropped, not tried
        admin = redis_client.Redis.from_url(server.url)
        try:
            assert await others(admin) == 1
        finally:
            await admin.aclose()
    finally:
        await wire.aclose()
        server.stop()


async def test_a_cancelled_exchange_is_never_reused(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    wire = ScriptWire(server.url, ECHO)
    try:
        assert await wire.run(b"k", ("first",)) == [b"k", b"first"]
        [connection] = wire._idle
        server.pause()  # the next reply never comes while we wait
        try:
            with anyio.move_on_after(0.3) as waited:
                await wire.run(b"k", ("lost",))
            assert waited.cancelled_caught
        finally:
            server.resume()
        assert not connection.is_connected
        assert connection not in wire._idle
        assert await wire.run(b"k", ("next",)) == [b"k", b"next"]
        assert connection not in wire._idle
    finally:
        await wire.aclose()
        server.stop()


async def test_an_unreachable_server_fails_with_a_connection_error() -> None:
    wire = ScriptWire(f"redis://127.0.0.1:{free_port()}/0", ECHO)
    with anyio.fail_after(20), pytest.raises(ConnectionError):
        await wire.run(b"k", ("x",))
    assert not wire._idle
