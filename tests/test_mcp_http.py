"""``opgate.mcp._http``: ``opgate serve --http`` under hostile clients.

The bounds are ``HTTPLimits``, enforced by ``SessionGuard``, ``RequestGuard`` and the
guarded uvicorn protocol. What ``serve`` writes to stderr is tests/test_cli_logging.py's.

Every test runs ``opgate serve`` as a subprocess on loopback and drives it with the
official ``mcp.Client`` over real HTTP (uvicorn); the hostile clients are plain
sockets and ``httpx2`` requests, bounded in count and time.

* Sessions: one principal at its session cap is refused with a message saying how
  to free one, while another principal still initializes and calls tools; idle
  sessions are reclaimed after the configured timeout; the request that opens a
  session is bounded in size (the session keeps its parameters).
* Slow clients: connections that drip a request head or body are closed after the
  header and body timeouts, and hundreds of them, beyond the process's descriptor
  limit, do not keep an authenticated client from being served.
"""

from __future__ import annotations

import contextlib
import json
import random
import resource
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError

from cli_serving import SERVE, client, serving
from conftest import ROOT, serve_environment

pytestmark = pytest.mark.anyio

VERIFIER = ["--token-verifier", "tests.mcp_catalog:TokenVerifier"]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
RAW_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


async def refusal(url: str, token: str) -> str:
    """The message of the ``MCPError`` that opening a client raises (through its groups)."""
    try:
        async with client(url, token):
            pass
    except BaseException as exc:  # the client raises its error inside exception groups
        todo: list[BaseException] = [exc]
        while todo:
            found = todo.pop()
            if isinstance(found, MCPError):
                return str(found)
            if isinstance(found, BaseExceptionGroup):
                todo.extend(found.exceptions)
        raise
    raise AssertionError("the client opened a session")


# -- sessions -------------------------------------------------------------------------


async def test_a_principal_at_its_session_cap_is_refused_and_another_is_served(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, *VERIFIER, "--principal-sessions", "3", "--max-sessions", "8") as s:
        with anyio.fail_after(60):
            async with AsyncExitStack() as stack:
                held = [
                    await stack.enter_async_context(client(s.url, "alice-token")) for _ in range(3)
                ]
                message = await refusal(s.url, "alice-token")
                assert "too many open sessions for this principal" in message
                assert "its limit is 3" in message
                assert "DELETE" in message
                # Another principal is not affected, and the held sessions still work.
                async with client(s.url, "bob-token") as bob:
                    page = await bob.call_tool("search", {"query": "confirm"})
                    assert page.structured_content["items"][0]["name"] == "orders.confirm"
                page = await held[0].call_tool("search", {"query": "confirm"})
                assert not page.is_error
            # Closing the clients ends their sessions (DELETE): alice may open again.
            async with client(s.url, "alice-token") as again:
                assert not (await again.call_tool("search", {"query": "echo"})).is_error
        assert "refused a new session: too many open sessions" in s.stderr()


async def test_a_session_flood_is_refused_past_the_cap_with_memory_bounded(
    tmp_path: Path,
) -> None:
    """Raw initialize-only sessions, as in the report: the cap holds and memory stays flat."""
    with serving(tmp_path, *VERIFIER, "--principal-sessions", "20") as s:
        statuses: dict[int, int] = {}
        async with httpx2.AsyncClient(
            headers={**RAW_HEADERS, "Authorization": "Bearer alice-token"}, timeout=30
        ) as http:
            await http.post(s.url, content=json.dumps(INITIALIZE))  # warm up
            before = s.rss_mib()
            with anyio.fail_after(120):
                for _ in range(400):
                    response = await http.post(s.url, content=json.dumps(INITIALIZE))
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            after = s.rss_mib()
        assert statuses == {200: 19, 429: 381}  # 20 with the warm-up session
        assert after - before < 16, (before, after)
        # 381 refusals are not 381 log lines.
        assert 1 <= s.stderr().count("refused a new session") <= 3
        with anyio.fail_after(30):
            async with client(s.url, "bob-token") as bob:
                assert not (await bob.call_tool("search", {"query": "confirm"})).is_error


async def test_the_request_that_opens_a_session_is_bounded(tmp_path: Path) -> None:
    """The session keeps its initialize parameters: a large one opens nothing."""
    big = json.loads(json.dumps(INITIALIZE))
    big["params"]["capabilities"]["experimental"] = {"x": {f"k{i}": i for i in range(5000)}}
    with serving(tmp_path, *VERIFIER, "--principal-sessions", "2") as s:
        async with httpx2.AsyncClient(
            headers={**RAW_HEADERS, "Authorization": "Bearer alice-token"}, timeout=30
        ) as http:
            with anyio.fail_after(60):
                for _ in range(4):
                    response = await http.post(s.url, content=json.dumps(big))
                    assert response.status_code == 413
                    error = response.json()["error"]["message"]
                    assert error == "the request that opens a session is limited to 16384 bytes"

                async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted
                    yield json.dumps(big).encode()

                response = await http.post(s.url, content=chunks())
                assert response.status_code == 413
                # None of them holds a session: the cap of two is still free.
                for _ in range(2):
                    response = await http.post(s.url, content=json.dumps(INITIALIZE))
                    assert response.status_code == 200


async def test_a_session_opening_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    """An oversize opening, or one past the principal's session cap, is answered while the
    client has sent only its head: no body is buffered for a request the guard refuses."""

    def answer_to_head(port: int, length: int) -> int | None:
        """The status the server answers a head announcing ``length`` bytes (None: none)."""
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            b"Authorization: Bearer alice-token\r\nContent-Length: %d\r\n\r\n"
        ) % length
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(head)
            try:
                return int(sock.recv(4096).split(b" ", 2)[1])
            except TimeoutError:
                return None

    with serving(tmp_path, *VERIFIER, "--principal-sessions", "1") as s:
        with anyio.fail_after(60):
            assert answer_to_head(s.port, 4 * 1024 * 1024 - 10) == 413
            async with httpx2.AsyncClient(
                headers={**RAW_HEADERS, "Authorization": "Bearer alice-token"}, timeout=30
            ) as http:
                response = await http.post(s.url, content=json.dumps(INITIALIZE))
                assert response.status_code == 200
            assert answer_to_head(s.port, 1000) == 429


async def test_a_repeated_protocol_version_header_opens_no_uncounted_session(
    tmp_path: Path,
) -> None:
    """The SDK reads the first ``Mcp-Protocol-Version``; so does the session count."""
    with serving(tmp_path, *VERIFIER, "--principal-sessions", "1") as s:
        headers = [
            *RAW_HEADERS.items(),
            ("Authorization", "Bearer alice-token"),
            ("Mcp-Protocol-Version", "2025-11-25"),
            ("Mcp-Protocol-Version", "2026-07-28"),
        ]
        async with httpx2.AsyncClient(timeout=30) as http:
            with anyio.fail_after(60):
                first = await http.post(s.url, content=json.dumps(INITIALIZE), headers=headers)
                assert first.status_code == 200
                assert "mcp-session-id" in first.headers
                second = await http.post(s.url, content=json.dumps(INITIALIZE), headers=headers)
                assert second.status_code == 429


async def test_idle_sessions_are_reclaimed_after_the_configured_timeout(tmp_path: Path) -> None:
    """Initialize-only sessions (the flood's) are; a connected client's session is not."""
    options = (*VERIFIER, "--principal-sessions", "2", "--session-idle-timeout", "1.5")
    with serving(tmp_path, *options) as s:
        headers = {**RAW_HEADERS, "Authorization": "Bearer alice-token"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            client(s.url, "bob-token") as bob,
        ):
            with anyio.fail_after(60):
                opened = []
                for _ in range(2):
                    response = await http.post(s.url, content=json.dumps(INITIALIZE))
                    assert response.status_code == 200
                    opened.append(response.headers["mcp-session-id"])
                refused = await http.post(s.url, content=json.dumps(INITIALIZE))
                assert refused.status_code == 429
                await anyio.sleep(3)
                # Reclaimed: their ids are unknown now, and the principal may open again.
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                gone = await http.post(
                    s.url,
                    content=json.dumps(ping),
                    headers={"mcp-session-id": opened[0], "mcp-protocol-version": "2025-11-25"},
                )
                assert gone.status_code == 404
                again = await http.post(s.url, content=json.dumps(INITIALIZE))
                assert again.status_code == 200
                # A connected official client keeps its GET stream open: not idle.
                assert not (await bob.call_tool("search", {"query": "echo"})).is_error


# -- slow clients -----------------------------------------------------------------------


class Drippers:
    """``count`` connections that send a request one byte per ``interval``, and reconnect.

    ``body=False`` drips the request head; ``body=True`` sends a complete,
    authenticated head with a ``Content-Length`` and drips the body. Each reconnects
    when the server closes it (until ``stop``), as an attacker keeping the connections
    full would, after 0.5 to 1.5 ``interval`` (seeded): reconnecting in step, the
    connections the server closed at once would come back as one burst larger than
    its connection cap, which closes every connection not being served, a prompt
    client's between two requests too (docs/security.md says so).
    """

    def __init__(self, port: int, count: int, interval: float, *, body: bool = False) -> None:
        self.port = port
        self.count = count
        self.interval = interval
        self.body = body
        self.closed_after: list[float] = []  # how long each closed connection lived
        self.stopped = anyio.Event()
        self._pauses = random.Random(count)

    def _opening(self) -> bytes:
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
        if self.body:  # authenticated: a 401 would close the connection at once
            head += "Authorization: Bearer bob-token\r\n"
            head += "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        return head.encode("ascii")

    async def _one(self) -> None:
        while not self.stopped.is_set():
            try:
                stream = await anyio.connect_tcp("127.0.0.1", self.port)
            except OSError:
                await anyio.sleep(self.interval)
                continue
            started = time.monotonic()
            async with stream:
                try:
                    await stream.send(self._opening())
                    while not self.stopped.is_set():
                        with anyio.move_on_after(self.interval):
                            if await stream.receive(65536) == b"":
                                break
                            continue  # a response (408/400): wait for the close
                        await stream.send(b"a")
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass
            if not self.stopped.is_set():
                self.closed_after.append(time.monotonic() - started)
                await anyio.sleep(self.interval * self._pauses.uniform(0.5, 1.5))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Drippers]:
        async with anyio.create_task_group() as group:
            for _ in range(self.count):
                group.start_soon(self._one)
            try:
                yield self
            finally:
                self.stopped.set()
                group.cancel_scope.cancel()


async def test_a_dripped_head_or_body_is_closed_after_its_timeout(tmp_path: Path) -> None:
    options = (*VERIFIER, "--header-timeout", "1", "--body-timeout", "2")
    with serving(tmp_path, *options) as s:
        with anyio.fail_after(30):
            heads = Drippers(s.port, 3, 0.2)
            async with heads.running():
                while len(heads.closed_after) < 3:
                    await anyio.sleep(0.1)
            bodies = Drippers(s.port, 3, 0.2, body=True)
            async with bodies.running():
                while len(bodies.closed_after) < 3:
                    await anyio.sleep(0.1)
    # Each lived about its timeout (it sent a byte every 0.2 s all along).
    assert all(0.8 < seconds < 4 for seconds in heads.closed_after), heads.closed_after
    assert all(1.8 < seconds < 5 for seconds in bodies.closed_after), bodies.closed_after


#: Header and body timeouts that no dripper reaches within a test, and the bound on a
#: prompt client's calls among drippers: far below those timeouts, so only a server that
#: makes room for the client meets it, and far above a loaded machine's slowest round trip.
PATIENT = ("--header-timeout", "300", "--body-timeout", "300")
ROOM_MADE = 30.0


async def timed_calls(url: str, token: str) -> list[float]:
    """Seconds taken by: opening a session, a search, an invoke (each must succeed)."""
    taken = []
    started = time.monotonic()
    async with client(url, token, timeout=20) as session:
        taken.append(time.monotonic() - started)
        for name, arguments in (
            ("search", {"query": "confirm"}),
            ("invoke", {"name": "util.echo", "arguments": {"text": "hi"}}),
        ):
            started = time.monotonic()
            result = await session.call_tool(name, arguments)
            assert not result.is_error, result
            taken.append(time.monotonic() - started)
    return taken


async def test_slow_connections_past_the_descriptor_limit_leave_a_client_served(
    tmp_path: Path,
) -> None:
    """More dripping connections than the server has descriptors (1,024, the usual
    default), before any authentication: the authenticated client is still served,
    promptly, and the server never runs out of descriptors.

    The drippers' timeouts are far beyond the bound, so a client served only once
    they time out fails it however loaded the machine is."""
    drippers_count = 1200
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = drippers_count + 256  # this process's own descriptors besides the drippers'
    if soft != resource.RLIM_INFINITY and soft < needed:
        assert hard == resource.RLIM_INFINITY or hard >= needed, f"ulimit -Hn is {hard}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    with serving(tmp_path, *VERIFIER, *PATIENT, descriptors=1024) as s:
        baseline = await timed_calls(s.url, "alice-token")
        drippers = Drippers(s.port, drippers_count, 1.0)
        with anyio.fail_after(90):
            async with drippers.running():
                await anyio.sleep(4)  # every dripper connected (or evicted and back)
                under_attack = [await timed_calls(s.url, "bob-token") for _ in range(3)]
        stderr = s.stderr()
    assert "serving at most 576 connections instead of 2048" in stderr
    assert "out of system resource" not in stderr  # never out of descriptors
    assert drippers.closed_after, "the server closed no dripping connection"
    worst = max(max(calls) for calls in under_attack)
    print(f"baseline {baseline}, under attack {under_attack}")
    assert worst < ROOM_MADE, under_attack


@pytest.mark.parametrize("body", [False, True], ids=["head", "body"])
async def test_slow_connections_beyond_max_connections_are_evicted(
    tmp_path: Path, body: bool
) -> None:
    """Dripped heads, or complete authenticated heads with dripped bodies, are closed
    to make room for a prompt client."""
    with serving(tmp_path, *VERIFIER, *PATIENT, "--max-connections", "50") as s:
        drippers = Drippers(s.port, 120, 1.0, body=body)
        with anyio.fail_after(90):
            async with drippers.running():
                await anyio.sleep(3)
                calls = [await timed_calls(s.url, "alice-token") for _ in range(2)]
        assert max(max(round_) for round_ in calls) < ROOM_MADE, calls
        # Far sooner than the header and body timeouts: closed to make room.
        assert sum(1 for seconds in drippers.closed_after if seconds < ROOM_MADE) >= 50


def _unread_pipeline(port: int) -> socket.socket:
    """A connection that sends authenticated requests back to back and reads none of
    the answers, until the server stops taking them (every buffer between is full).
    (An unauthenticated one gets a single 401 and the connection's close.)"""
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
        "\r\nAuthorization: Bearer bob-token\r\nContent-Length: 2\r\n\r\n{}"
    ).encode("ascii")
    connection = socket.create_connection(("127.0.0.1", port))
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection.setblocking(False)
    batch = memoryview(request * 500)
    sent = 0
    blocked_since = time.monotonic()
    while time.monotonic() - blocked_since < 1.0:
        try:
            sent = (sent + connection.send(batch[sent:])) % len(batch)
            blocked_since = time.monotonic()
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:  # closed already: nothing it sent is read
            break
    return connection


def _answers_until_closed(connection: socket.socket, *, pace: float = 0.0) -> tuple[int, bool]:
    """The responses read from ``connection`` until it ends, and whether the server
    ended it (a reset, or the end while ``pace`` reads were still waiting)."""
    connection.setblocking(True)
    connection.settimeout(5)
    received = 0
    tail = b""
    try:
        while chunk := connection.recv(16384):
            received += (tail + chunk).count(b"HTTP/1.1 ")
            tail = chunk[-8:]  # a status line across two chunks is counted once
            if pace:
                time.sleep(pace)
    except (ConnectionResetError, TimeoutError):
        return received, True
    return received, False


async def _served(url: str, token: str) -> list[float]:
    """``timed_calls``, tried again each time the server, at capacity, closes the
    connection: the calls of the first attempt served."""
    while True:
        try:
            with anyio.fail_after(5):
                return await timed_calls(url, token)
        except Exception:  # closed at capacity (the SDK says so in an exception group)
            await anyio.sleep(0.2)


async def test_a_client_reading_no_answers_holds_no_connection(tmp_path: Path) -> None:
    """Clients that send requests back to back and never read the answers (a slow
    read) hold every connection only until ``--send-timeout``: then they are closed,
    the unread answers dropped, and an authenticated client is served."""
    options = ("--max-connections", "4", "--send-timeout", "2", "--log-level", "info")
    with serving(tmp_path, *VERIFIER, *options) as s:
        readers = [_unread_pipeline(s.port) for _ in range(4)]
        try:
            with anyio.fail_after(60):
                started = time.monotonic()
                calls = await _served(s.url, "alice-token")
                waited = time.monotonic() - started
                while s.stderr().count("output not read within 2 s") < 4:
                    await anyio.sleep(0.1)
            ended = [_answers_until_closed(reader) for reader in readers]
        finally:
            for reader in readers:
                reader.close()
    assert waited < ROOM_MADE, (waited, calls)
    assert all(received < 1000 for received, _ in ended), ended  # the rest was dropped


def _drip_read_pipeline(port: int, stop: threading.Event, every: float) -> None:
    """Like ``_unread_pipeline``, but reading up to 8 KiB of the answers every ``every``
    seconds, until ``stop``: a few KiB per ``--send-timeout``. Closed, it reconnects."""
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
        "\r\nContent-Length: 2\r\n\r\n{}"
    ).encode("ascii")
    while not stop.is_set():
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)) as c:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.setblocking(False)
            read_at = time.monotonic()
            while not stop.is_set():
                with contextlib.suppress(BlockingIOError):
                    c.send(request * 200)
                if time.monotonic() - read_at > every:
                    read_at = time.monotonic()
                    with contextlib.suppress(BlockingIOError):
                        if not c.recv(8192):
                            break
                time.sleep(0.01)


async def test_clients_reading_answers_in_drips_hold_no_connection_for_good(
    tmp_path: Path,
) -> None:
    """Clients that send unauthenticated requests back to back and read a few KiB of
    the answers per ``--send-timeout`` would restart the send deadline each time (four
    of them locked ``--max-connections 4`` for as long as they dripped): a 401 closes
    its connection, so each gets one answer per connection and an authenticated
    client is served."""
    options = ("--max-connections", "4", "--send-timeout", "1", "--log-level", "info")
    with serving(tmp_path, *VERIFIER, *options) as s:
        stop = threading.Event()
        drippers = [
            threading.Thread(target=_drip_read_pipeline, args=(s.port, stop, 0.5)) for _ in range(4)
        ]
        for dripper in drippers:
            dripper.start()
        try:
            await anyio.sleep(2)  # every buffer between is full
            served = False
            with anyio.move_on_after(10):
                while not served:
                    try:
                        with anyio.fail_after(3):
                            await timed_calls(s.url, "alice-token")
                        served = True
                    except Exception:  # refused: the server is at capacity
                        await anyio.sleep(0.5)
        finally:
            stop.set()
            for dripper in drippers:
                dripper.join()
    assert served


async def _answer_big(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI app answering every request with ``BIG`` bytes in one write."""
    if scope["type"] == "lifespan":
        await _answer_ok(scope, receive, send)
        return
    headers = [(b"content-length", str(BIG).encode("ascii"))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"x" * BIG})


BIG = 8 * 1024 * 1024


@asynccontextmanager
async def _in_process(app: Any, limits: Any) -> AsyncIterator[tuple[Any, int]]:
    """uvicorn serving ``app`` with ``limits`` (``uvicorn_config``) in this process,
    started: the server and its port."""
    import uvicorn

    from opgate.mcp import uvicorn_config

    from conftest import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn_config(app, port=port, limits=limits))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(30):
            while not server.started:
                await anyio.sleep(0.02)
        try:
            yield server, port
        finally:
            server.should_exit = True


@asynccontextmanager
async def _asking_for_a_big_answer() -> AsyncIterator[tuple[Any, anyio.abc.SocketStream]]:
    """An in-process server (``send_timeout`` 0.5 s) answering ``BIG`` bytes, and a
    connection with a small receive buffer that has asked for the answer."""
    from opgate.mcp import HTTPLimits

    limits = HTTPLimits(send_timeout=0.5)
    async with (
        _in_process(_answer_big, limits) as (server, port),
        await anyio.connect_tcp("127.0.0.1", port) as stream,
    ):
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        await stream.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        yield server, stream


async def test_a_client_reading_its_answer_slowly_keeps_its_connection() -> None:
    """A client that reads, if slowly, is never closed for it: each time some of the
    waiting output has been read, the client has another ``send_timeout``."""
    async with _asking_for_a_big_answer() as (_, stream):
        started = time.monotonic()
        received = 0
        with anyio.fail_after(60):
            while received < BIG:  # the head's bytes too: stops near the end
                received += len(await stream.receive(65536))
                # 2 MiB/s: 4 s for the whole answer, 1 MiB per send_timeout
                await anyio.sleep(max(0, received / (2 << 20) - time.monotonic() + started))
        taken = time.monotonic() - started
    assert taken > 3.5, taken


async def test_an_unread_answer_is_dropped_with_its_connection() -> None:
    """A connection closed for output not read is reset, so the kernel drops the output
    it holds too: closed without a reset, the socket lingered for minutes (FIN-WAIT-1)
    with megabytes of the answer, delivered to the client once it read after all."""
    async with _asking_for_a_big_answer() as (server, stream):
        with anyio.fail_after(10):  # the server has the connection, then drops it
            while not server.server_state.connections:
                await anyio.sleep(0.02)
            while server.server_state.connections:
                await anyio.sleep(0.05)
        received, reset = 0, False
        with anyio.fail_after(10):
            try:
                while True:
                    received += len(await stream.receive(65536))
            except anyio.BrokenResourceError:
                reset = True
            except anyio.EndOfStream:
                pass
    assert reset, received
    assert received < BIG // 4, received  # what the client's own buffer held, at most


async def test_unauthenticated_request_bodies_are_never_buffered(tmp_path: Path) -> None:
    """40 unauthenticated requests whose near-4 MiB bodies are sent but for 5 bytes, held
    open: the server reads no more of them than uvicorn's flow control lets in."""
    body = b"x" * (4 * 1024 * 1024 - 10)
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n"
    ) % (len(body) + 5)
    with serving(tmp_path, *VERIFIER) as s:
        await anyio.sleep(0.5)
        before = s.rss_mib()
        held = []
        try:
            for _ in range(40):
                sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
                sock.setblocking(False)
                sent = sock.send(head)
                assert sent == len(head)
                with contextlib.suppress(BlockingIOError):
                    sock.send(body)  # as much as the server's flow control lets in
                held.append(sock)
            await anyio.sleep(2)
            after = s.rss_mib()
        finally:
            for sock in held:
                sock.close()
    assert after - before < 32, (before, after)


async def test_a_newcomer_is_never_closed_for_room_before_stale_idle_connections(
    tmp_path: Path,
) -> None:
    """The server is full of kept-alive idle connections: a client that opens several
    connections in a row (the official client does) loses none of its own to make room."""
    with serving(tmp_path, *VERIFIER, "--max-connections", "20", "--keep-alive-timeout", "60") as s:
        idle = []
        try:
            for _ in range(20):
                sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
                sock.sendall(
                    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
                )
                assert sock.recv(65536).startswith(b"HTTP/1.1 401")
                idle.append(sock)
            await anyio.sleep(1)  # idle for a while before the newcomer
            with anyio.fail_after(30):
                calls = await timed_calls(s.url, "bob-token")
        finally:
            for sock in idle:
                sock.close()
    assert max(calls) < 5, calls


# -- requests in flight ---------------------------------------------------------------

#: A 2026-07-28 call of ``util.wait`` (no session), as raw JSON-RPC.
WAIT_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "invoke",
        "arguments": {"name": "util.wait", "arguments": {"seconds": 30}},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}
WAIT_HEADERS = {
    **RAW_HEADERS,
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "invoke",
}


async def test_a_principal_at_its_request_cap_is_refused_and_another_is_served(
    tmp_path: Path,
) -> None:
    """Alice fills every connection the server keeps with slow calls: past her cap
    they are refused at once, and Bob is served promptly."""
    options = ("--principal-requests", "8", "--max-connections", "30")
    with serving(tmp_path, *VERIFIER, *options) as s:
        statuses: dict[int, int] = {}

        async def call(http: httpx2.AsyncClient) -> None:
            response = await http.post(s.url, content=json.dumps(WAIT_CALL))
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        headers = {**WAIT_HEADERS, "Authorization": "Bearer alice-token"}
        pool = httpx2.Limits(max_connections=30, max_keepalive_connections=30)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60, limits=pool) as http,
            anyio.create_task_group() as group,
        ):
            for _ in range(30):
                group.start_soon(call, http)
            with anyio.fail_after(30):
                while statuses.get(429, 0) < 22:
                    await anyio.sleep(0.1)
                calls = await timed_calls(s.url, "bob-token")
            group.cancel_scope.cancel()
        stderr = s.stderr()
    assert statuses == {429: 22}
    assert max(calls) < 5, calls
    assert "too many requests in flight for this principal (its limit is 8)" in stderr


def test_http_limit_options_need_http_and_valid_values() -> None:
    import sys

    for options, expected in (
        (["--principal-sessions", "3"], "--principal-sessions needs --http"),
        (
            ["--http", "0", "--principal-sessions", "9", "--max-sessions", "4"],
            "principal_sessions (9) cannot exceed max_sessions (4)",
        ),
        (["--http", "0", "--header-timeout", "0"], "header_timeout must be a positive"),
        (["--log-level", "LOUD"], "is not a logging level"),
    ):
        completed = subprocess.run(
            [sys.executable, *SERVE, *options],
            cwd=ROOT,
            env=serve_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 2, completed.stderr
        assert expected in completed.stderr


def test_a_session_refusal_is_json_rpc(tmp_path: Path) -> None:
    """Raw clients get a JSON-RPC error body (the official client shows its message)."""
    with (
        serving(tmp_path, "--principal-sessions", "1") as s,
        httpx2.Client(headers=RAW_HEADERS, timeout=30) as http,
    ):
        assert http.post(s.url, content=json.dumps(INITIALIZE)).status_code == 200
        refused = http.post(s.url, content=json.dumps(INITIALIZE))
    assert refused.status_code == 429
    body: Any = refused.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert "its limit is 1" in body["error"]["message"]


async def test_the_server_wide_session_cap_says_so(tmp_path: Path) -> None:
    options = (*VERIFIER, "--principal-sessions", "2", "--max-sessions", "3")
    with serving(tmp_path, *options) as s, anyio.fail_after(60):
        async with AsyncExitStack() as stack:
            for token in ("alice-token", "alice-token", "bob-token"):
                await stack.enter_async_context(client(s.url, token))
            message = await refusal(s.url, "bob-token")
            assert "the server holds its limit of 3 open sessions: try again later" in message
            # 2026-07-28 holds no session: bob is still served.
            async with client(s.url, "bob-token", era="2026-07-28") as modern:
                assert not (await modern.call_tool("search", {"query": "echo"})).is_error


# -- connections ------------------------------------------------------------------------


async def _answer_ok(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI app answering every request with ``ok`` (and the lifespan it is given)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


async def test_a_connection_reset_after_its_response_is_freed_at_once() -> None:
    # uvicorn cancels its keep-alive timer only on a clean close; after a reset (what a
    # client does when it closes with an answer's last bytes unread, as the SDK's does
    # after each 2025-11-25 event stream) the timer kept the dead connection alive.
    import gc

    from opgate.mcp import HTTPLimits

    async with _in_process(_answer_ok, HTTPLimits(keep_alive_timeout=60)) as (server, port):
        protocol = server.config.http_protocol_class

        def alive() -> int:
            gc.collect()
            return sum(1 for item in gc.get_objects() if type(item) is protocol)

        for _ in range(20):
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = b""
                while not answer.endswith(b"ok"):
                    answer += await stream.receive()
                raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
                raw.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
        with anyio.fail_after(10):  # the resets reach the server; none is kept
            while alive():
                await anyio.sleep(0.05)
