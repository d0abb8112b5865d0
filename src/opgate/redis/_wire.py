"""``ScriptWire``: runs one Lua script over redis-py connections with little client work.

A ledger transition is one ``EVALSHA`` of one script; everything a replica adds to
it beyond the round trip is client time. ``redis.asyncio.Redis`` spends most of a
small command's client time outside the wire: its pool (a lock, a readiness probe
of the socket), the encoder (every argument through ``isinstance`` checks), the
``Script`` wrapper, and a ``wait_for`` task per write for the socket timeout. The
wire keeps the official client's connection, URL parsing (``redis://``,
``rediss://``, ``unix://``, credentials, database), handshake and reply parser, and
does the rest itself:

* the command is packed once into one ``bytes`` (RESP arrays of bulk strings: the
  script's SHA, its one key and its arguments) and written with one call;
* idle connections are a plain list (a replica's concurrent calls each take one;
  connections are made on demand and kept);
* the script is run by ``EVALSHA``; a server that does not know it (``NOSCRIPT``:
  it restarted or flushed its script cache) gets ``SCRIPT LOAD`` and the call once
  more;
* a connection the server closed (a Redis restart) fails with ``ConnectionError``:
  every idle connection is dropped and the call is made once more on a fresh one.
  The ledger's script makes that retry exact: every operation recognizes its own
  earlier run by the ids it was given (see ``_script.py``).

There is no socket timeout here: the caller bounds the whole call (the ledger's
``CALL_TIMEOUT``), and a cancelled or failed exchange disconnects its connection,
which is then never reused.
"""

from __future__ import annotations

import hashlib
from typing import Any

from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

__all__ = ["ScriptWire"]

#: Longest a replica waits to open a connection to Redis.
CONNECT_TIMEOUT = 5.0


class ScriptWire:
    """One script on one Redis: ``await wire.run(key, args)`` is its reply."""

    __slots__ = ("_head", "_idle", "_pool", "_script")

    def __init__(self, url: str, script: str, *, password: str | None = None) -> None:
        # The pool only parses the URL and makes connections; it never lends them.
        # (A password in the URL wins over ``password``; RedisLedger refuses both at once.)
        self._pool = ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=CONNECT_TIMEOUT, password=password
        )
        self._script = script.encode("utf-8")
        sha = hashlib.sha1(self._script, usedforsecurity=False).hexdigest().encode("ascii")
        self._head = b"$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n$1\r\n1\r\n"
        self._idle: list[AbstractConnection] = []

    def pack(self, key: bytes, args: tuple[bytes | str | int, ...]) -> bytes:
        """``EVALSHA sha 1 key args...`` as one RESP command."""
        parts = [b"*%d\r\n" % (4 + len(args)), self._head, b"$%d\r\n%b\r\n" % (len(key), key)]
        for arg in args:
            if isinstance(arg, str):
                arg = arg.encode("ascii")
            elif isinstance(arg, int):
                arg = b"%d" % arg
            parts.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
        return b"".join(parts)

    async def run(self, key: bytes, args: tuple[bytes | str | int, ...]) -> Any:
        """Run the script with ``key`` and ``args``; the reply, or a ``RedisError``."""
        command = self.pack(key, args)
        try:
            return await self._call(command)
        except NoScriptError:
            await self._call(_pack_plain(b"SCRIPT", b"LOAD", self._script))
            return await self._call(command)

    async def _call(self, command: bytes) -> Any:
        try:
            return await self._exchange(self._idle.pop() if self._idle else None, command)
        except ConnectionError:
            # The server closed its connections (a restart): the others are stale too.
            await self.aclose()
            return await self._exchange(None, command)

    async def _exchange(self, connection: AbstractConnection | None, command: bytes) -> Any:
        if connection is None:
            connection = self._pool.make_connection()  # type: ignore[no-untyped-call]
        try:
            if not connection.is_connected:
                await connection.connect()
            await connection.send_packed_command(command, check_health=False)
            reply = await connection.read_response()
        except ResponseError:
            self._idle.append(connection)  # a whole error reply: the connection is sound
            raise
        except BaseException:
            await connection.disconnect(nowait=True)
            raise
        self._idle.append(connection)
        return reply

    async def aclose(self) -> None:
        """Disconnect every idle connection (calls in progress close theirs when done)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.disconnect(nowait=True)


def _pack_plain(*args: bytes) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    parts.extend(b"$%d\r\n%b\r\n" % (len(arg), arg) for arg in args)
    return b"".join(parts)
