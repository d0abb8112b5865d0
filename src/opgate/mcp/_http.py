"""Serving over HTTP: what one client may hold, and the uvicorn server that enforces it.

Two layers, both bounded by ``HTTPLimits``:

* **Sessions** (the ASGI app, ``GatewayServer.http_app``): a 2025-11-25 client opens a
  session with ``initialize`` and the server keeps it until the client ends it
  (``DELETE``) or it stays idle for ``session_idle_timeout``. ``SessionGuard`` caps
  the sessions one principal may hold (``principal_sessions``) as well as the whole
  server's (``max_sessions``), and the size of the request that opens one
  (``session_open_bytes``), because the SDK keeps that request's parameters for the
  session's life. 2026-07-28 requests hold no session and pass untouched.
  ``RequestGuard`` caps the requests one principal may have in flight
  (``principal_requests``, in both eras): a request holds its connection until its
  response is sent, so without it one principal's slow calls (or responses it reads
  slowly) could hold every connection the server keeps.
* **Connections** (the server, ``uvicorn_config`` and ``serve_http``): uvicorn has no
  timeout for receiving a request, so a client that sends one byte every few seconds
  holds its connection (and a descriptor) forever. ``guarded_protocol`` closes a
  connection whose request head is not complete within ``header_timeout`` or whose
  body is not complete within ``body_timeout``, and keeps at most
  ``max_connections`` open: a new connection beyond that closes the one that has
  been arriving (or idle) longest, so slow connections cannot lock out prompt ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Hashable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import h11
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import principal_components
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from uvicorn.protocols.http.h11_impl import H11Protocol

from .. import ConfigurationError

if sys.platform == "linux":
    import fcntl
    import termios

    #: ``ioctl`` request for a socket's send queue not yet acknowledged (Linux's
    #: ``SIOCOUTQ``, the same number as ``TIOCOUTQ``).
    _SIOCOUTQ: int | None = termios.TIOCOUTQ
else:  # pragma: no cover - only asyncio's buffer is measured
    _SIOCOUTQ = None

#: ``SO_LINGER`` on, with no time: closing the socket resets the connection and drops
#: the kernel's send queue.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)

__all__ = [
    "HTTPLimits",
    "RequestGuard",
    "SessionGuard",
    "fit_descriptors",
    "guard_requests",
    "guard_sessions",
    "guarded_protocol",
    "serve_http",
    "uvicorn_config",
]

logger = logging.getLogger("opgate.mcp.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The listening socket's queue of connections not yet accepted. asyncio accepts up
#: to this many at once, before any protocol sees them.
LISTEN_BACKLOG = 128

#: Descriptors kept beyond ``max_connections``: three accept bursts and 64 for
#: everything else (the listening socket, logs, a shared ledger's connections, files
#: a handler opens). asyncio hands an accepted socket to its protocol two loop
#: iterations later, and a connection closed to make room frees its descriptor one
#: iteration after that, while each iteration may accept another burst.
DESCRIPTOR_RESERVE = 3 * LISTEN_BACKLOG + 64


@dataclass(frozen=True, slots=True)
class HTTPLimits:
    """What HTTP clients may hold on one server process.

    Sessions (2025-11-25 clients; 2026-07-28 holds none):

    * ``max_sessions`` (1,000): open sessions on the server.
    * ``principal_sessions`` (32): open sessions of one principal (the verified
      token's client, issuer and subject; without a token verifier every caller is
      the one local principal). A principal at its cap gets HTTP 429 saying how to
      free one; other principals are unaffected.
    * ``session_idle_timeout`` (600 s): a session with no request in flight (and no
      open ``GET`` stream) for this long is closed; its id then answers 404.
    * ``session_open_bytes`` (16 KiB): largest body of a request that opens a
      session (its ``initialize``), whose parameters the session keeps.

    Requests (both eras):

    * ``principal_requests`` (64): requests of one principal in flight at once
      (from its arrival until its response is sent: a ``GET`` stream counts while
      open). Beyond it the request gets HTTP 429 saying to wait for one to finish.

    Connections (``uvicorn_config``, ``serve_http``):

    * ``max_connections`` (2,048): open client connections. Beyond it the
      connection whose request (head or body) has been arriving, or which has been
      idle between requests, longest is closed; when every one is being served,
      the new one.
      ``serve_http`` raises the process's descriptor limit to fit, or lowers this to
      fit a hard limit it cannot raise (and says so).
    * ``header_timeout`` (10 s): time to receive a request's head, from the
      connection's start or from the first byte of a following request.
    * ``body_timeout`` (30 s): time to receive a request's body after its head.
    * ``keep_alive_timeout`` (5 s): idle time between requests on one connection.
    * ``send_timeout`` (30 s): time output may wait on a client that reads none of
      it. A connection (open or closing) whose unsent output does not shrink within
      this time is closed, the output dropped: a client that sends requests and never
      reads the answers holds no connection for longer.
    * ``max_header_bytes`` (16 KiB): largest request head (a larger one gets 400).
    """

    max_sessions: int = 1000
    principal_sessions: int = 32
    session_idle_timeout: float = 600.0
    session_open_bytes: int = 16 * 1024
    principal_requests: int = 64
    max_connections: int = 2048
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    send_timeout: float = 30.0
    max_header_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in (
            "max_sessions",
            "principal_sessions",
            "session_open_bytes",
            "principal_requests",
        ):
            _positive_int(self, name)
        _positive_int(self, "max_connections")
        _positive_int(self, "max_header_bytes")
        for name in ("session_idle_timeout", "header_timeout", "body_timeout", "send_timeout"):
            _positive_seconds(self, name)
        _positive_seconds(self, "keep_alive_timeout")
        if self.principal_sessions > self.max_sessions:
            raise ConfigurationError(
                f"HTTPLimits.principal_sessions ({self.principal_sessions}) cannot exceed "
                f"max_sessions ({self.max_sessions})"
            )
        if self.session_open_bytes < 1024:
            raise ConfigurationError(
                "HTTPLimits.session_open_bytes must be at least 1024 (an initialize request)"
            )


def _positive_int(limits: HTTPLimits, name: str) -> None:
    value = getattr(limits, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"HTTPLimits.{name} must be a positive int, got {value!r}")


def _positive_seconds(limits: HTTPLimits, name: str) -> None:
    value = getattr(limits, name)
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"HTTPLimits.{name} must be a positive, finite number of seconds, got {value!r}"
        )


# -- sessions ---------------------------------------------------------------------------


class SessionGuard:
    """ASGI wrapper of a stateful session manager's app: session caps per principal.

    Every request that would open a session (a legacy-era request without
    ``Mcp-Session-Id``) is admitted only while its principal holds fewer than
    ``principal_sessions`` sessions (counting openings in flight) and the server
    fewer than ``max_sessions``; its body is then limited to ``session_open_bytes``.
    A session counts from the response that gave out its id until the session
    manager forgets it (``DELETE``, idle timeout, crash). Requests for an existing
    session and 2026-07-28 requests pass untouched.
    """

    def __init__(
        self, app: ASGIApp, manager: StreamableHTTPSessionManager, limits: HTTPLimits
    ) -> None:
        self._app = app
        self._manager = manager
        self._limits = limits
        self._open_app = RequestBodyLimitMiddleware(app, limits.session_open_bytes)
        self._held: dict[Hashable, set[str]] = {}
        self._opening: dict[Hashable, int] = {}
        self._refusals = _RefusalLog("refused a new session")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _opens_session(scope):
            await self._app(scope, receive, send)
            return
        if _declared_length(scope) > self._limits.session_open_bytes:
            limit = self._limits.session_open_bytes
            message = f"the request that opens a session is limited to {limit} bytes"
            await _json_rpc_error(send, 413, message)
            return
        key = _principal_key(scope)
        refusal = self._refusal(key)
        if refusal is not None:
            status, message = refusal
            self._refusals.note(message)
            await _json_rpc_error(send, status, message)
            return
        self._opening[key] = self._opening.get(key, 0) + 1
        opened: list[str] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        opened.append(value.decode("latin-1"))
            await send(message)

        try:
            await self._open_app(scope, receive, watch)
        finally:
            _decrement(self._opening, key)
            if opened and _is_open(self._manager, opened[0]):
                self._held.setdefault(key, set()).add(opened[0])

    def _refusal(self, key: Hashable) -> tuple[int, str] | None:
        """``(status, message)`` refusing a new session for ``key``, or None to admit it."""
        self._forget_closed()
        limits = self._limits
        idle = f"{limits.session_idle_timeout:g} s"
        if len(self._held.get(key, ())) + self._opening.get(key, 0) >= limits.principal_sessions:
            return 429, (
                f"too many open sessions for this principal (its limit is "
                f"{limits.principal_sessions}): end one (HTTP DELETE with its Mcp-Session-Id) "
                f"or let one stay idle for {idle}; protocol 2026-07-28 needs no session"
            )
        total = sum(map(len, self._held.values())) + sum(self._opening.values())
        if total >= limits.max_sessions:
            return 503, (
                f"the server holds its limit of {limits.max_sessions} open sessions: "
                f"try again later (sessions idle for {idle} are closed)"
            )
        return None

    def _forget_closed(self) -> None:
        for key, sessions in list(self._held.items()):
            still = {sid for sid in sessions if _is_open(self._manager, sid)}
            if still:
                self._held[key] = still
            else:
                del self._held[key]


def guard_sessions(manager: StreamableHTTPSessionManager, limits: HTTPLimits) -> None:
    """Put a ``SessionGuard`` in front of a stateful session manager's requests."""
    manager.asgi_app = SessionGuard(manager.asgi_app, manager, limits)  # type: ignore[assignment]


class RequestGuard:
    """ASGI wrapper of a session manager's app: requests in flight per principal.

    A request counts from its arrival until the app returns (its response sent, or
    its client gone); a principal with ``principal_requests`` of them gets HTTP 429
    for the next one. Other principals are unaffected.
    """

    def __init__(self, app: ASGIApp, limits: HTTPLimits) -> None:
        self._app = app
        self._limit = limits.principal_requests
        self._serving: dict[Hashable, int] = {}
        self._refusals = _RefusalLog("refused a request")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        key = _principal_key(scope)
        serving = self._serving.get(key, 0)
        if serving >= self._limit:
            message = (
                f"too many requests in flight for this principal (its limit is "
                f"{self._limit}): wait for one to finish, or close a GET stream it does not need"
            )
            self._refusals.note(message)
            await _json_rpc_error(send, 429, message)
            return
        self._serving[key] = serving + 1
        try:
            await self._app(scope, receive, send)
        finally:
            _decrement(self._serving, key)


def guard_requests(manager: StreamableHTTPSessionManager, limits: HTTPLimits) -> None:
    """Put a ``RequestGuard`` in front of a session manager's requests (outermost)."""
    manager.asgi_app = RequestGuard(manager.asgi_app, limits)  # type: ignore[assignment]


class _RefusalLog:
    """A warning for the first refusal, then at most one every ten seconds with a count."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._refused = 0
        self._logged_at = -math.inf

    def note(self, message: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now - self._logged_at >= 10:
            more = f" ({self._refused} refusals since the last report)" if self._refused > 1 else ""
            logger.warning("%s: %s%s", self._what, message, more)
            self._logged_at = now
            self._refused = 0


def _opens_session(scope: Scope) -> bool:
    """Whether the stateful session manager would open a session for this request."""
    version = None
    for name, value in scope["headers"]:
        if name == b"mcp-session-id":
            return False
        if name == b"mcp-protocol-version" and version is None:  # the SDK reads the first
            version = value.decode("latin-1")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _declared_length(scope: Scope) -> int:
    """The request's ``Content-Length`` (0 when absent or unreadable; bodies are counted too)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _decrement(counts: dict[Hashable, int], key: Hashable) -> None:
    """One fewer for ``key``; a key at zero is dropped, so the table holds only live ones."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


def _principal_key(scope: Scope) -> Hashable:
    """The session owner: the token's (client, issuer, subject), or None (local)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        return principal_components(user.access_token)
    return None


def _is_open(manager: StreamableHTTPSessionManager, session_id: str) -> bool:
    """Whether the manager still holds the session ``session_id``.

    SDK-private (``mcp`` 2.3): the manager's table of open sessions,
    ``_server_instances``, which it updates on DELETE, idle timeout and crash alike;
    it has no public view of it.
    """
    return session_id in manager._server_instances


async def _json_rpc_error(send: Send, status: int, message: str) -> None:
    """A JSON-RPC error without a request id (the official client shows its message)."""
    code = -32603 if status >= 500 else -32600  # internal error / invalid request
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    body = json.dumps(error).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# -- connections ------------------------------------------------------------------------


class _GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with request receipt deadlines and a connection cap.

    A connection is in one of four phases, read from h11's view of the client:
    ``idle`` between requests (uvicorn's keep-alive timeout), ``head`` while a
    request head arrives (``header_timeout``, from the connection's start or from
    the request's first byte), ``body`` while its body arrives (``body_timeout``
    after the head), and ``served`` (the app's business). Connections whose request
    is arriving (head or body) and idle ones are kept oldest first, so that a new
    connection beyond ``max_connections`` closes the one that has been in its
    phase longest: a dripping client's, or a stale idle one, and never a client's
    connection that has only just opened while an older one waits.
    """

    _limits: ClassVar[HTTPLimits]
    _arriving: ClassVar[dict[_GuardedH11, None]]
    _idle: ClassVar[dict[_GuardedH11, None]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._unsent_deadline: asyncio.TimerHandle | None = None
        self._unsent = 0  # output waiting when the unsent deadline was armed
        self._phase = ""
        self._since = 0.0  # when the connection entered its table (arriving or idle)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        # Writes pause as soon as output waits on the client, so that any output
        # waiting (on an open or a closing connection) runs the unsent deadline.
        self.transport.set_write_buffer_limits(high=0)
        if len(self.connections) > self._limits.max_connections and not self._make_room():
            _warn_at_capacity(len(self.connections) - 1)
            self.transport.close()
            return
        self._start_request(arm=True)

    def data_received(self, data: bytes) -> None:
        if self._phase == "idle":
            self._start_request(arm=True)  # a kept-alive connection's next request begins
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._follow()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_unsent()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_unsent()  # every byte written has been sent

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        self._cancel()
        self._cancel_unsent()
        self._phase = "closed"
        super().connection_lost(exc)
        # uvicorn cancels its keep-alive timer only on a clean close: after a reset the
        # timer kept the closed connection (protocol, transport, buffers) alive for
        # keep_alive_timeout, one per connection a client resets.
        self._unset_keepalive_if_required()

    def _make_room(self) -> bool:
        """Close the connection arriving or idle longest; False if there is none.

        Ages are compared across both tables: a connection that has only just
        opened is never closed for the next newcomer while an older one waits.
        """
        for table in (self._arriving, self._idle):
            while table and next(iter(table)).transport.is_closing():
                del table[next(iter(table))]
        heads = [next(iter(table)) for table in (self._arriving, self._idle) if table]
        if not heads:
            return False
        oldest = min(heads, key=lambda connection: connection._since)
        oldest._forget()
        oldest._close("closed to make room for a new connection")
        return True

    def _forget(self) -> None:
        self._arriving.pop(self, None)
        self._idle.pop(self, None)

    def _follow(self) -> None:
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._phase not in ("head", "idle"):
                self._start_request(arm=False)  # uvicorn's keep-alive timeout runs first
        elif state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self._limits.body_timeout)
        else:
            self._forget()
            self._cancel()
            self._phase = "served"

    def _start_request(self, *, arm: bool) -> None:
        self._forget()
        self._since = self.loop.time()
        if arm:
            self._arriving[self] = None
            self._arm("head", self._limits.header_timeout)
        else:
            self._idle[self] = None
            self._cancel()
            self._phase = "idle"

    def _arm(self, phase: str, seconds: float) -> None:
        self._cancel()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expire, phase)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, phase: str) -> None:
        self._deadline = None
        if self._phase == phase:
            seconds = self._limits.header_timeout if phase == "head" else self._limits.body_timeout
            self._close(f"request {phase} not received within {seconds:g} s")

    def _close(self, why: str, *, drop_output: bool = False) -> None:
        """Close the connection; output still waiting is sent first (within the
        send timeout) unless ``drop_output``, which frees the descriptor at once."""
        self._forget()
        self._cancel()
        self._phase = "closed"
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        logger.info("closed the connection of %s: %s", client, why)
        if drop_output:
            # A reset: closed normally, the kernel would keep the socket (FIN-WAIT-1,
            # for minutes against a client that reads nothing) with its send queue,
            # megabytes of the output, and still deliver it once the client read.
            sock = self.transport.get_extra_info("socket")
            if sock is not None and sock.fileno() >= 0:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            self.transport.abort()
        elif not self.transport.is_closing():
            self.transport.close()

    def _unsent_bytes(self) -> int:
        """Output written and not yet taken by the client: asyncio's buffer, and on
        Linux the kernel's send queue (which a reading client drains first)."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if _SIOCOUTQ is not None and sock is not None and sock.fileno() >= 0:
            try:
                queued = bytearray(4)
                fcntl.ioctl(sock.fileno(), _SIOCOUTQ, queued)
                unsent += int.from_bytes(queued, sys.byteorder, signed=True)
            except OSError:
                pass
        return unsent

    def _watch_unsent(self) -> None:
        """Arm the unsent deadline while output waits on the client."""
        if self._unsent_deadline is None and self.transport.get_write_buffer_size():
            self._unsent = self._unsent_bytes()
            self._unsent_deadline = self.loop.call_later(
                self._limits.send_timeout, self._check_unsent
            )

    def _check_unsent(self) -> None:
        self._unsent_deadline = None
        unsent = self._unsent_bytes()
        if self.transport.get_write_buffer_size() and unsent >= self._unsent:
            self._close(f"output not read within {self._limits.send_timeout:g} s", drop_output=True)
        else:
            self._watch_unsent()  # the client read some: another send_timeout

    def _cancel_unsent(self) -> None:
        if self._unsent_deadline is not None:
            self._unsent_deadline.cancel()
            self._unsent_deadline = None


_last_capacity_warning = [-math.inf]


def _warn_at_capacity(open_connections: int) -> None:
    """Say (at most every ten seconds) that new connections are being refused."""
    now = asyncio.get_running_loop().time()
    if now - _last_capacity_warning[0] >= 10:
        _last_capacity_warning[0] = now
        logger.warning(
            "refusing new connections: %d are open, all busy with requests "
            "(raise --max-connections if this is legitimate load)",
            open_connections,
        )


def guarded_protocol(limits: HTTPLimits) -> type[H11Protocol]:
    """A uvicorn ``http`` protocol class enforcing ``limits``' connection bounds.

    Each call makes a class with its own table of connections: give one to one
    ``uvicorn.Config``.
    """
    return type(
        "GuardedH11Protocol",
        (_GuardedH11,),
        {"_limits": limits, "_arriving": {}, "_idle": {}, "__module__": __name__},
    )


class _CloseOnRefusal:
    """ASGI wrapper: a 401 answer says ``Connection: close``, so uvicorn closes the
    connection after it. A client without credentials then gets one answer per
    connection: it cannot pipeline requests whose answers it reads in drips, holding
    the connection with a little progress every send timeout."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                headers = [*message.get("headers", ()), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, closing)


def uvicorn_config(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: HTTPLimits | None = None,
    log_level: str | int = "warning",
) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``app`` with ``limits``' connection bounds.

    The h11 protocol is always used (``guarded_protocol``); WebSockets are off. A
    401 answer closes its connection (``Connection: close``).
    """
    limits = HTTPLimits() if limits is None else limits
    return uvicorn.Config(
        _CloseOnRefusal(app),
        host=host,
        port=port,
        http=guarded_protocol(limits),
        ws="none",
        lifespan="on",
        log_level=log_level,
        # uvicorn types it as int but only hands it to loop.call_later.
        timeout_keep_alive=cast(int, limits.keep_alive_timeout),
        backlog=LISTEN_BACKLOG,
        h11_max_incomplete_event_size=limits.max_header_bytes,
        server_header=False,
    )


def fit_descriptors(limits: HTTPLimits) -> HTTPLimits:
    """``limits`` with ``max_connections`` fitting the process's descriptor limit.

    The soft limit is raised (up to the hard one) to ``max_connections`` plus a
    reserve; if the hard limit is lower, ``max_connections`` is lowered to fit it
    and a warning says so.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return limits
    needed = limits.max_connections + DESCRIPTOR_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return limits
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    if soft >= needed:
        return limits
    fitted = max(1, soft - DESCRIPTOR_RESERVE)
    logger.warning(
        "the descriptor limit is %d: serving at most %d connections instead of %d "
        "(raise it with ulimit -n)",
        soft,
        fitted,
        limits.max_connections,
    )
    return dataclasses.replace(limits, max_connections=fitted)


async def serve_http(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: HTTPLimits | None = None,
    log_level: str | int = "warning",
    sockets: Sequence[socket.socket] | None = None,
) -> None:
    """Serve ``app`` (an ``http_app``) with uvicorn until the process is told to stop.

    ``sockets``: bound sockets to listen on instead of binding ``host:port`` (uvicorn,
    binding itself, logs a failure and exits the process); they are closed at the end.
    """
    limits = fit_descriptors(HTTPLimits() if limits is None else limits)
    config = uvicorn_config(app, host=host, port=port, limits=limits, log_level=log_level)
    await uvicorn.Server(config).serve(sockets=None if sockets is None else list(sockets))
