"""One upstream's connection: started, listed, called, closed, through the official SDK client.

``UpstreamSession(server, ...)`` holds one ``mcp.Client``. Its ``run()`` is the
connection's owner task (the catalog starts one per upstream, all at once): it
starts the subprocess or opens the HTTP session, negotiates the protocol era
(``mode="auto"``: ``server/discover`` first, the ``initialize`` handshake for older
servers), lists every tool, reports ``started``, then keeps the connection until
``close()``. Everything inside the SDK's client (its task groups, the subprocess)
is entered and left in that one task, as anyio requires; ``call_tool`` may be
awaited from any task.

What an upstream gets
---------------------
* A stdio upstream runs ``command`` with ``args`` in ``cwd``, with an environment
  made of the variables its entry names and, from the gateway's environment, only
  those in ``INHERITED_ENV`` (what a process needs to start: its search path, home,
  user, shell, terminal, locale and temporary directory). The SDK's
  ``stdio_client`` adds its own ``get_default_environment()``, which on POSIX is a
  subset of that list. The upstream's stderr goes to the gateway's stderr through a
  ``StderrRelay``: each line prefixed with ``[NAME] ``, control characters escaped.
  Its stdout is read by ``_stdio`` (the SDK's transport with lines bounded by
  ``max_message_bytes``); a longer line loses the connection, and a call in flight
  fails naming the bound.
* Before the first stdio upstream is started, ``protect_gateway()`` makes the
  gateway's process non-dumpable on Linux, so that a process of the same user (the
  upstream) cannot read the gateway's whole environment or memory through
  ``/proc/PID/environ`` or ``/proc/PID/mem``, or ptrace it. The filter above keeps
  secrets from leaking by accident; this keeps a hostile upstream from taking them
  (a root upstream, or one that can read the files the gateway reads, still can).
* An HTTP upstream gets the entry's headers and nothing else: the HTTP client is
  the session's own, so no header of the gateway's clients (their bearer token
  included) can reach it. Redirects are followed by the SDK only within the
  endpoint's origin. Its messages are bounded by ``max_message_bytes`` too
  (``_http``): a server-sent event by the SDK, any other body by the client's
  transport, which also asks for (and accepts only) unencoded bodies. A message over
  the bound fails that call, naming it; the connection is kept.
* What comes back is redacted (``_results.redacted``) of the upstream's own
  credentials, ``redactor_for(server)``: an upstream that echoes its request headers
  or its environment cannot hand the agent the gateway's credential for it. The
  secrets are an HTTP entry's header values (but those of ``PLAIN_HEADERS``), its
  URL's password and query values of at least ``MIN_ENV_SECRET`` characters, and a
  stdio entry's ``env`` values of at least ``MIN_ENV_SECRET`` characters that are not
  a path (``/…``, ``~…``, ``./…``, ``C:\\…``) nor a variable of ``INHERITED_ENV``.
  Answers (content, structured content, ``isError`` text), questions and the
  upstream's error messages in ``UpstreamError`` and in a failed start's reason, and
  the ``serverInfo`` name and version of its status, are all redacted.
* The client declares elicitation (forms and URL hand-offs) and nothing else: an
  upstream's ``sampling/createMessage`` or ``roots/list`` is refused by the SDK's
  default callbacks with a JSON-RPC error.

Calls in the two eras
---------------------
On a 2026-07-28 connection ``call_tool`` sends ``tools/call`` in the caller's task
and returns its answer, an ``InputRequiredResult`` included (``input_responses``
and ``request_state`` answer one). On a 2025-11-25 connection the upstream may send
``elicitation/create`` in the middle of a call, so ``start_call`` runs the call in
the session's own task group as a ``HeldCall`` (``_held``) that the relay follows
and may keep open in ``held`` while a person answers. Nothing the SDK's client
passes on links an ``elicitation/create`` to the call it belongs to (stdio has no
such link; over streamable HTTP the server should send it on the call's own response
stream, but the SDK's transport does not say which stream a request came on), so a
question goes to the call in flight only when it is the upstream's one call in
flight; with none or several, it is refused with a JSON-RPC error (that does not say
how many) and never shown to anyone. Relayed input is thus serialised per upstream:
a held call is in flight, so while one waits for a person no other call of the
upstream can ask, and at most one call is held at a time.

A call the gateway stopped waiting for (its ``call_timeout`` passed, or its handler
was cancelled) is cancelled upstream, but cancellation in MCP is a request the
upstream may ignore: it may still ask its question later, and that question must
not reach the caller of another call. So such a call leaves a *quarantine*: for
``call_timeout`` seconds after it (``quarantined``), every ``elicitation/create`` of
the upstream is refused, whatever is in flight. The SDK drops the upstream's late
answer to a cancelled request without telling, so the quarantine ends by time only;
it is one deadline, so any number of such calls keeps nothing but it.

Restarts and changes
--------------------
``run()`` does not end when a connection does: a start that fails or does not finish
within ``start_timeout``, and a connection that is lost (a stdio process that died,
an HTTP session the upstream ended), are followed by another start after a wait of
``Backoff``: ``first`` seconds, doubling (``factor``) up to ``cap``, less a random
share of up to ``jitter`` so upstreams that fell together do not start again in
step; a connection that stayed up ``stable`` seconds resets the wait (a shorter one
counts as a failed start). While the upstream is down, a call
fails at once saying it is not connected and is being restarted. A loss is found by
the call that meets it (the connection answers ``CONNECTION_CLOSED``, which a ping
confirms) or, between calls, by a ping every ``Backoff.heartbeat`` seconds. On a
loss the calls of the old connection end: held calls are abandoned (their prompts'
answers then fail saying the upstream no longer waits for them) and calls in flight
fail saying the connection closed. Nothing of the SDK's client outlives the
connection: each one is entered and left in ``run()``'s task.

The tools are listed at every start, and again when the upstream says they changed:
``notifications/tools/list_changed`` (2025-11-25) or a ``ToolsListChanged`` event on a
``subscriptions/listen`` stream (2026-07-28, opened when the upstream serves it, and
again after a ``Backoff`` wait if it ends while the connection lives; each opening is
followed by one listing more, for a change made before the stream was open).
Notifications that arrive while a listing runs make one listing more, not one each.
``on_tools`` (the catalog's hook) is called whenever ``tools`` may differ from what
it last saw: a connection came up, or a listing found other tools.

Failures
--------
A start that fails or does not finish within ``start_timeout`` leaves the session
``connected=False`` with a reason (``status()``); so does a connection found closed
during a call (a crashed process), after which no call is sent on it again. A call
that fails, times out
(``call_timeout``), finds the connection closed, or gets an answer that is not a
``tools/call`` result raises ``UpstreamError`` with a public message naming the
upstream; the message quotes at most a bounded line of the upstream's own error
text and never an exception of the gateway's. A ``-32042`` error ("URL elicitation
required") whose data lists URL elicitations is a ``URLElicitationRequired``
carrying them (redacted as a question is), for the relay to hand off.
"""

from __future__ import annotations

import codecs
import ctypes
import math
import os
import random
import re
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO, Final, TextIO
from urllib.parse import parse_qsl, urlsplit

import anyio
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError, StdioServerParameters, UrlElicitationRequiredError
from mcp.client.context import ClientRequestContext
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from opgate import Limits, __version__
from opgate.redact import Redactor

from ._config import PLAIN_HEADERS, ServerConfig, StdioServer
from ._held import Ended, HeldCall, HeldCalls, ProgressForward
from ._http import http_client
from ._report import UpstreamStatus, redacted_line
from ._results import redacted
from ._stdio import bounded_stdio_client

__all__ = [
    "CLIENT_NAME",
    "DEFAULT_BACKOFF",
    "DUMPABLE_ENV",
    "INHERITED_ENV",
    "MAX_LISTED_TOOLS",
    "MAX_LIST_PAGES",
    "MAX_STDERR_LINE",
    "MESSAGE_BUDGET_FACTOR",
    "MIN_ENV_SECRET",
    "MIN_MESSAGE_BYTES",
    "Backoff",
    "StderrRelay",
    "URLElicitationRequired",
    "UpstreamError",
    "UpstreamSession",
    "child_environment",
    "max_message_bytes",
    "protect_gateway",
    "redactor_for",
]

#: Variables of the gateway's environment a stdio upstream inherits: what a process
#: needs to start (the SDK's ``get_default_environment`` list, plus locale and tmp).
INHERITED_ENV: Final[tuple[str, ...]] = (
    (
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "TMP",
        "USERNAME",
        "USERPROFILE",
    )
    if sys.platform == "win32"
    else (
        "HOME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "TMPDIR",
        "USER",
    )
)

#: Shortest value of a stdio entry's ``env`` redacted from what the upstream answers:
#: shorter values (``UTC``, ``true``, ``debug``) are settings, not secrets, and would
#: redact ordinary words.
MIN_ENV_SECRET: Final = 8
_PATH = re.compile(r"(?:[/~]|\.{1,2}[/\\]|[A-Za-z]:[/\\])")

#: The name the gateway gives itself in the handshake.
CLIENT_NAME: Final = "opgate"
#: Longest piece of an upstream's stderr copied as one line (bytes).
MAX_STDERR_LINE: Final = 8_192
#: Pages of ``tools/list`` read at most: a paginator that never ends cannot hold up a start.
MAX_LIST_PAGES: Final = 100
#: Tools read from one upstream at most; the rest are left out (and reported).
MAX_LISTED_TOOLS: Final = 5_000
#: The least bound on one message a stdio upstream sends (a line), whatever the result
#: budget: a ``tools/list`` page has no budget, and an answer over the budget but under
#: this fails as that call's budget error, the connection kept.
MIN_MESSAGE_BYTES: Final = 16 << 20
#: How many times the result budget a message may take on the wire: JSON escapes a
#: control character in six bytes, and the envelope and content blocks add their own.
MESSAGE_BUDGET_FACTOR: Final = 8


def max_message_bytes(limits: Limits) -> int:
    """The bound on one message of a stdio upstream under ``limits``:
    ``MESSAGE_BUDGET_FACTOR`` times ``limits.result_bytes``, at least ``MIN_MESSAGE_BYTES``."""
    return max(MIN_MESSAGE_BYTES, MESSAGE_BUDGET_FACTOR * limits.result_bytes)


#: Seconds an HTTP upstream has to accept a connection, take a request or answer a read.
_HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)

#: Seconds the ping that tells a closed connection from an upstream's own error may take.
_PING_TIMEOUT: Final = 5.0

#: Set to ``1`` in the gateway's environment to keep the process dumpable (core dumps,
#: a debugger or ``py-spy`` of the same user), at the cost ``protect_gateway`` names.
DUMPABLE_ENV: Final = "OPGATE_DUMPABLE"
_PR_SET_DUMPABLE: Final = 4

_CALL_RESULT: Final = pydantic.TypeAdapter(types.CallToolResult | types.InputRequiredResult)


class UpstreamError(Exception):
    """A call to an upstream did not produce a result; ``str()`` is the public message."""


class URLElicitationRequired(UpstreamError):
    """The upstream refused the call with ``-32042`` (URL elicitation required):
    ``elicitations`` are the URL hand-offs it wants completed before the call is sent
    again, as it sent them (at least one)."""

    def __init__(
        self, message: str, elicitations: tuple[types.ElicitRequestURLParams, ...]
    ) -> None:
        super().__init__(message)
        self.elicitations = elicitations


@dataclass(frozen=True, slots=True)
class Backoff:
    """How an upstream that is down is started again (see the module docstring).

    * ``first``: seconds before the first start again (after a loss, or a failed start);
    * ``factor``: how much longer each further wait in a row is (at least 1);
    * ``cap``: the longest wait, in seconds;
    * ``jitter``: the share (0 to under 1) of a wait that may be taken off at random;
    * ``heartbeat``: seconds between the pings that find a connection lost between calls;
    * ``stable``: seconds a connection must have been up for its loss to start the waits
      from ``first`` again; a shorter one counts as a failed start, so an upstream that
      crashes as soon as it is up is not started again every ``first`` seconds.

    The defaults (``DEFAULT_BACKOFF``): 0.5 s, doubling, at most 30 s, jitter 0.25, a
    ping every 15 s, stable after 60 s. Tests pass small ones.
    """

    first: float = 0.5
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 0.25
    heartbeat: float = 15.0
    stable: float = 60.0

    def __post_init__(self) -> None:
        for name in ("first", "factor", "cap", "heartbeat", "stable"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"Backoff.{name} must be a number")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"Backoff.{name} must be a positive, finite number")
        if self.factor < 1:
            raise ValueError("Backoff.factor must be at least 1")
        if self.cap < self.first:
            raise ValueError("Backoff.cap must be at least Backoff.first")
        if not 0 <= self.jitter < 1:
            raise ValueError("Backoff.jitter must be at least 0 and under 1")

    def delay(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        """Seconds to wait before start ``attempt`` (0 for the first again):
        ``min(cap, first * factor**attempt)``, less up to ``jitter`` of it (``draw()``
        is in [0, 1))."""
        base = self.cap
        if attempt < 64:  # beyond that the power overflows; the cap holds long before
            base = min(self.cap, self.first * self.factor**attempt)
        return base * (1 - self.jitter * draw())


#: The ``Backoff`` of ``open_catalog`` unless it is given one.
DEFAULT_BACKOFF: Final = Backoff()


def child_environment(
    server: StdioServer, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of ``server``'s process: ``INHERITED_ENV`` from ``environ``
    (default ``os.environ``; shell functions left out, as the SDK does), then the
    entry's own ``env`` over it."""
    environ = os.environ if environ is None else environ
    env = {
        key: value
        for key in INHERITED_ENV
        if (value := environ.get(key)) is not None and not value.startswith("()")
    }
    env.update(server.env)
    return env


def redactor_for(server: ServerConfig) -> Redactor:
    """The ``Redactor`` of ``server``'s own credentials (see the module docstring)."""
    if isinstance(server, StdioServer):
        secrets = [
            value
            for key, value in server.env.items()
            if key not in INHERITED_ENV and len(value) >= MIN_ENV_SECRET and not _PATH.match(value)
        ]
    else:
        secrets = [v for k, v in server.headers.items() if k.lower() not in PLAIN_HEADERS]
        parts = urlsplit(server.url)
        secrets.extend(filter(None, [parts.password]))
        secrets.extend(v for _, v in parse_qsl(parts.query) if len(v) >= MIN_ENV_SECRET)
    return Redactor(secrets)


def protect_gateway(environ: Mapping[str, str] | None = None) -> bool:
    """Make this process non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``) and say
    whether it now is.

    A non-dumpable process's ``/proc/PID`` files are owned by root, so a process of
    the same user without ``CAP_SYS_PTRACE`` (a stdio upstream) cannot read its
    ``environ`` or ``mem`` or attach to it. Side effects, for the whole process: no
    core dumps, and no debugger or profiler (``gdb``, ``py-spy``) of the same user can
    attach. Does nothing, and returns ``False``, off Linux, when the call fails, or
    when ``environ`` (default ``os.environ``) sets ``DUMPABLE_ENV`` to ``1``. The
    setting is the process's own: an upstream it starts is dumpable again once it
    runs its program.
    """
    environ = os.environ if environ is None else environ
    if not sys.platform.startswith("linux") or environ.get(DUMPABLE_ENV) == "1":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, ctypes.c_ulong(0), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _errlog(stream: TextIO | None) -> TextIO:
    """Where a stdio upstream's stderr goes: ``stream`` (default ``sys.stderr``) when it
    is a file, else the process's own stderr (a replaced ``sys.stderr``, such as a
    test's capture, may have no file descriptor for the subprocess to write to)."""
    for candidate in (stream or sys.stderr, sys.__stderr__):
        try:
            if candidate is not None and candidate.fileno() >= 0:
                return candidate
        except (OSError, AttributeError, ValueError):
            continue
    raise ValueError("stderr must be a file with a descriptor for stdio upstreams to write to")


class StderrRelay:
    """A pipe for one stdio upstream's stderr (``file``, given to the process) and a
    thread that copies it to ``target`` a line at a time, each line redacted of
    ``redactor``'s credentials, prefixed with ``[NAME] `` and with every character that
    is not printable (terminal escapes, CR, bidi controls) written as its Python escape,
    so an upstream can neither forge the gateway's own log lines nor drive the operator's
    terminal, and a server that logs its configuration does not put its key in the
    gateway's log. A line longer than ``MAX_STDERR_LINE`` bytes is copied in pieces,
    each prefixed; each piece's last ``redactor.tail`` characters wait for the next, so
    a credential a cut falls inside is still redacted. ``close()`` closes the gateway's
    end; the thread ends once every process holding the other end has.
    """

    def __init__(self, name: str, target: TextIO, redactor: Redactor | None = None) -> None:
        read, write = os.pipe()
        self.file: TextIO = os.fdopen(write, "w")
        source = os.fdopen(read, "rb")
        thread = threading.Thread(
            target=_copy_stderr,
            args=(source, name, target, redactor or Redactor(())),
            daemon=True,
            name=f"{name} stderr",
        )
        thread.start()

    def close(self) -> None:
        """Close the gateway's end of the pipe."""
        self.file.close()


def _copy_stderr(source: BinaryIO, name: str, target: TextIO, redactor: Redactor) -> None:
    # A line cut into pieces keeps the last ``redactor.tail`` characters of each piece
    # (unredacted: ``Redactor.split``) for the next: a credential the cut falls inside
    # is then seen whole, and a character's bytes are never split between two pieces.
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    held = ""
    with source:
        while piece := source.readline(MAX_STDERR_LINE):
            ended = piece.endswith(b"\n")
            text = held + decoder.decode(piece, final=ended)
            if ended:
                text, held = redactor.text(text).removesuffix("\n"), ""
            else:
                text, held = redactor.split(text)
            if text or ended:
                _write_stderr(target, name, text)
        if rest := redactor.text(held + decoder.decode(b"", final=True)):
            _write_stderr(target, name, rest)


def _write_stderr(target: TextIO, name: str, text: str) -> None:
    shown = "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)
    try:
        target.write(f"[{name}] {shown}\n")
        target.flush()
    except (OSError, ValueError):  # stderr gone: keep draining so the upstream never blocks
        pass


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _start_reason(server: ServerConfig, exc: BaseException, redactor: Redactor) -> str:
    """Why a start failed, for the operator and in the errors of calls to it (never a
    header or environment value: the upstream's own message is redacted)."""
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return f"the handshake failed: error {exc.code}: {redacted_line(exc.message, redactor)}"
    if isinstance(server, StdioServer) and isinstance(exc, OSError):
        return f"could not run {server.command!r}: {exc.strerror or type(exc).__name__}"
    if isinstance(exc, httpx2.HTTPError | OSError):
        return f"could not reach the upstream ({type(exc).__name__})"
    if isinstance(exc, pydantic.ValidationError):
        return "the upstream's answer is not a valid MCP message"
    return f"the start failed ({type(exc).__name__})"


class UpstreamSession:
    """One upstream's connection (see the module docstring).

    * ``name``, ``server``: the upstream and its config entry;
    * ``tools``: the tools it listed (in its own order), empty until started;
    * ``truncated``: whether the listing was cut at ``MAX_LISTED_TOOLS`` or
      ``MAX_LIST_PAGES``;
    * ``client``: the connected ``mcp.Client`` (``None`` when not connected), for
      code that needs more of the SDK than ``call_tool``;
    * ``holds_calls``: whether calls go through ``start_call`` (a 2025-11-25
      connection) rather than ``call_tool``;
    * ``held``: the ``HeldCalls`` waiting for a person's answer;
    * ``generation``: connections made so far; ``on_tools``: the hook called when
      ``tools`` may have changed (see the module docstring);
    * ``status()``: an ``UpstreamStatus``.
    """

    def __init__(
        self,
        server: ServerConfig,
        *,
        start_timeout: float,
        call_timeout: float,
        stderr: TextIO | None = None,
        max_message_bytes: int = MIN_MESSAGE_BYTES,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.server = server
        self.name = server.name
        self.tools: tuple[types.Tool, ...] = ()
        self.truncated = False
        self.client: Client | None = None
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._stderr = stderr
        self._max_message_bytes = max_message_bytes
        self._oversized = False
        self._redactor = redactor_for(server)
        self._reason = "not started"
        self._started = anyio.Event()
        self._stop = anyio.Event()
        self._finished = anyio.Event()
        self._calls: anyio.abc.TaskGroup | None = None
        self._in_flight: set[HeldCall] = set()
        self._quarantine_until = -math.inf
        self.held = HeldCalls()
        self._backoff = backoff
        self._lost = anyio.Event()  # the current connection's end (see _lose)
        self._starting: anyio.CancelScope | None = None  # the current connection's scope
        self._relist = anyio.Event()  # the upstream said its tools changed
        self._since: datetime | None = None
        self._failures = 0  # starts that failed in a row
        #: Connections made so far (the catalog tells a reconnection by it).
        self.generation = 0
        #: Called whenever ``tools`` may differ from what the caller last saw.
        self.on_tools: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"UpstreamSession({self.name!r}, connected={self.client is not None})"

    @property
    def holds_calls(self) -> bool:
        """Whether the connection is of the 2025-11-25 era (calls are ``start_call``'s)."""
        client = self.client
        return client is not None and client.protocol_version not in MODERN_PROTOCOL_VERSIONS

    @property
    def in_flight(self) -> int:
        """Calls started with ``start_call`` that have not ended."""
        return len(self._in_flight)

    @property
    def quarantined(self) -> bool:
        """Whether the upstream's questions are refused now because a call ended at the
        gateway without the upstream's answer (see the module docstring)."""
        return anyio.current_time() < self._quarantine_until

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if isinstance(self.server, StdioServer) else "http"

    def status(self) -> UpstreamStatus:
        """The upstream's state now."""
        client = self.client
        restarts = max(0, self.generation - 1)
        if client is None:
            return UpstreamStatus(
                self.name,
                self.transport,
                False,
                self._reason,
                since=self._since,
                attempts=self._failures,
                restarts=restarts,
                retrying=not self._stop.is_set(),
            )
        info = client.server_info
        server = ""
        if info is not None:
            named = f"{info.name} {info.version}".strip()  # the upstream's: redacted first
            server = redacted_line(named, self._redactor, 80)
        return UpstreamStatus(
            self.name,
            self.transport,
            True,
            protocol_version=client.protocol_version,
            server=server,
            tools=len(self.tools),
            since=self._since,
            restarts=restarts,
        )

    async def started(self) -> None:
        """Wait until the start succeeded or failed (``run`` bounds it by ``start_timeout``)."""
        await self._started.wait()

    async def close(self) -> None:
        """Ask the owner task to close the connection and wait until it has."""
        if self.client is not None:
            self._reason = "closed"
        self._stop.set()
        starting = self._starting
        if starting is not None and self.client is None:
            starting.cancel()  # a start under way (or a retry's) need not finish
        await self._finished.wait()

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        """The SDK client for the entry, entered (the handshake done)."""
        server = self.server
        if isinstance(server, StdioServer):
            protect_gateway()
            parameters = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=child_environment(server),
                cwd=server.cwd,
            )
            relay = StderrRelay(self.name, _errlog(self._stderr), self._redactor)
            try:
                transport = bounded_stdio_client(
                    parameters,
                    errlog=relay.file,
                    max_line_bytes=self._max_message_bytes,
                    on_oversized=self._on_oversized,
                )
                async with self._client(transport) as client:
                    yield client
            finally:
                relay.close()
            return
        bound = self._max_message_bytes
        async with http_client(
            headers=server.headers, timeout=_HTTP_TIMEOUT, max_message_bytes=bound
        ) as http:
            transport = streamable_http_client(
                server.url, http_client=http, max_sse_event_size=bound
            )
            async with self._client(transport) as client:
                yield client

    @property
    def redactor(self) -> Redactor:
        """The credentials of this upstream's entry (``redactor_for``), found in what
        it sends."""
        return self._redactor

    def _client(self, transport: Any) -> Client:
        """The SDK client over ``transport``: either era, no cache, this session's
        elicitation callback and message handler."""
        return Client(
            transport,
            mode="auto",
            client_info=types.Implementation(name=CLIENT_NAME, version=__version__),
            cache=None,
            elicitation_callback=self._on_elicit,
            message_handler=self._on_message,
        )

    async def run(self) -> None:
        """The owner task: start, list, serve calls, and start again after a failed
        start or a lost connection (see the module docstring), until ``close()``; never
        raises except for cancellation."""
        try:
            streak = 0  # failed starts and short connections in a row
            while not self._stop.is_set():
                lasted = await self._connect()
                up = lasted is not None
                self._since = datetime.now(UTC)
                self._failures = 0 if up else self._failures + 1
                self._started.set()
                if self._stop.is_set():
                    break
                stable = lasted is not None and lasted >= self._backoff.stable
                streak = 0 if stable else streak + 1
                wait = self._backoff.delay(max(0, streak - 1))
                with anyio.move_on_after(wait):
                    await self._stop.wait()
        finally:
            self.client = None
            self._calls = None
            self._started.set()
            self._finished.set()

    def _on_oversized(self, size: int) -> None:
        """The transport stopped reading a line over ``max_message_bytes``: the
        connection is lost (the calls in flight fail on the closed stream)."""
        self._oversized = True
        client = self.client
        if client is not None:
            self._lose(client, self._oversized_reason())

    def _oversized_reason(self) -> str:
        return f"it sent a message over {self._max_message_bytes} bytes"

    async def _connect(self) -> float | None:
        """One connection, from its start to its end: the seconds it was up, or
        ``None`` when it did not come up."""
        # The start deadline is lifted once started; it is one scope around the whole
        # connection because the SDK's scopes inside it must close in the same order.
        deadline = anyio.CancelScope(deadline=anyio.current_time() + self._start_timeout)
        self._starting = deadline
        lost = self._lost = anyio.Event()
        self._oversized = False
        up = False
        began = 0.0
        try:
            with deadline:
                async with self._connected() as client:
                    self._relist = anyio.Event()
                    tools, truncated = await _list_tools(client)
                    deadline.deadline = math.inf
                    async with anyio.create_task_group() as calls:
                        self.tools, self.truncated = tools, truncated
                        self._calls = calls
                        self.client = client
                        self._quarantine_until = -math.inf  # no call given up on this one
                        self.generation += 1
                        self._since = datetime.now(UTC)
                        up = True
                        began = anyio.current_time()
                        self._started.set()
                        self._tools_changed()
                        calls.start_soon(self._watch, client)
                        await _either(self._stop, lost)
                        self.client = None
                        self.held.abandon_all()
                        calls.cancel_scope.cancel()
            if deadline.cancelled_caught and not up and not self._stop.is_set():
                self._reason = f"did not start within {self._start_timeout:g} s"
        except Exception as exc:  # every failure of an upstream is the upstream's
            if not up:
                self._reason = (
                    self._oversized_reason()
                    if self._oversized
                    else _start_reason(self.server, exc, self._redactor)
                )
            elif not lost.is_set():
                self._reason = "the connection ended"
        finally:
            self.client = None
            self._calls = None
            self._starting = None
            self.held.abandon_all()
        return anyio.current_time() - began if up else None

    def _tools_changed(self) -> None:
        hook = self.on_tools
        if hook is not None:
            hook()

    async def _watch(self, client: Client) -> None:
        """While ``client`` is connected: list the tools again when the upstream says
        they changed, and ping it every ``heartbeat`` seconds."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._heartbeat, client)
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                group.start_soon(self._listen, client)
            while True:
                await self._relist.wait()
                self._relist = anyio.Event()  # notifications from now on: one listing more
                try:
                    with anyio.fail_after(self._call_timeout):
                        tools, truncated = await _list_tools(client)
                except Exception:  # the upstream's: keep the tools listed before
                    if await _gone(client):
                        self._lose(client, "the connection closed")
                    continue
                if (tools, truncated) != (self.tools, self.truncated):
                    self.tools, self.truncated = tools, truncated
                    self._tools_changed()

    async def _heartbeat(self, client: Client) -> None:
        while True:
            await anyio.sleep(self._backoff.heartbeat)
            if await _gone(client):
                self._lose(client, "the connection closed")
                return

    async def _listen(self, client: Client) -> None:
        """A 2026-07-28 upstream's tool-list changes, from ``subscriptions/listen``: an
        upstream that does not serve it is only pinged; a stream that ends while the
        connection lives is opened again after a ``Backoff`` wait."""
        attempt = 0
        while True:
            try:
                with anyio.fail_after(self._call_timeout) as opening:
                    async with client.listen(tools_list_changed=True) as subscription:
                        opening.deadline = math.inf
                        attempt = 0
                        # A change before the stream was open sent no event to anyone:
                        # list once more now that every change is seen.
                        self._relist.set()
                        async for event in subscription:
                            if isinstance(event, ToolsListChanged):
                                self._relist.set()
            except ListenNotSupportedError:
                return
            except MCPError as exc:
                if exc.code == types.METHOD_NOT_FOUND:
                    return  # the upstream serves no listen stream
            except (SubscriptionLost, TimeoutError):
                pass
            if await _gone(client):
                self._lose(client, "the connection closed")
                return
            await anyio.sleep(self._backoff.delay(attempt))
            attempt += 1

    async def _on_message(self, message: IncomingMessage) -> None:
        """The SDK's message handler: a 2025-11-25 ``notifications/tools/list_changed``."""
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()

    def _connection(self) -> Client:
        client = self.client
        if client is None:
            raise self._not_connected()
        return client

    def _not_connected(self) -> UpstreamError:
        again = "" if self._stop.is_set() else "; the gateway is restarting it, try again shortly"
        return UpstreamError(f"upstream {self.name!r} is not connected ({self._reason}){again}")

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        progress: ProgressForward | None = None,
        input_responses: dict[str, types.ElicitResult] | None = None,
        request_state: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Send ``tools/call`` for ``tool`` with ``arguments`` (SDK-ready JSON values)
        in this task, and return the upstream's answer.

        ``progress`` receives the upstream's progress notifications for the call;
        ``input_responses`` and ``request_state`` answer an ``InputRequiredResult``.
        Raises ``UpstreamError`` (see the module docstring); cancellation propagates
        (and the SDK tells the upstream the request was cancelled).
        """
        client = self._connection()
        request = _request(tool, arguments, input_responses, request_state)
        try:
            with anyio.fail_after(self._call_timeout):
                answer = await client.session.send_request(
                    request, _CALL_RESULT, progress_callback=progress
                )
            return redacted(answer, self._redactor)
        except TimeoutError:
            raise self._timed_out() from None
        except Exception as exc:
            raise await self._failure(client, exc) from None

    def start_call(self, tool: str, arguments: dict[str, Any]) -> HeldCall:
        """Start ``tools/call`` for ``tool`` as a ``HeldCall`` in the session's task group
        (a 2025-11-25 connection; see the module docstring).

        Raises ``UpstreamError`` when the upstream is not connected.
        """
        client = self._connection()
        calls = self._calls
        if calls is None:  # pragma: no cover - set whenever client is
            raise self._not_connected()
        call = HeldCall(self.name, call_timeout=self._call_timeout)
        self._in_flight.add(call)
        calls.start_soon(self._run_call, client, call, _request(tool, arguments, None, None))
        return call

    async def _run_call(
        self, client: Client, call: HeldCall, request: types.CallToolRequest
    ) -> None:
        """The task of one held call: send it, and end it with its answer or failure."""
        ended = Ended(error=UpstreamError(f"upstream {self.name!r} closed the connection"))
        answered = False  # the upstream's answer (a result or its JSON-RPC error) arrived
        try:
            with call.scope:
                answer = await client.session.send_request(
                    request, _CALL_RESULT, progress_callback=call.progress
                )
                ended = Ended(answer=redacted(answer, self._redactor))
                answered = True
            if call.scope.cancelled_caught:
                ended = Ended(error=self._timed_out())
        except Exception as exc:
            answered = isinstance(exc, pydantic.ValidationError) or (
                isinstance(exc, MCPError)
                and exc.code not in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT)
            )
            try:
                ended = Ended(error=await self._failure(client, exc))
            except Exception as again:  # the task must not take the connection down with it
                kind = type(_leaf(again)).__name__
                ended = Ended(error=UpstreamError(f"upstream {self.name!r} failed ({kind})"))
        finally:
            # The upstream may still be running it, and may still ask on this connection
            # (a closed one asks nothing more; a new one starts with no such call).
            if not answered and self.client is client:
                self._quarantine_until = max(
                    self._quarantine_until, anyio.current_time() + self._call_timeout
                )
            self._in_flight.discard(call)
            call.end(ended)

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The SDK's elicitation callback: the question of the one call in flight,
        unless a call the gateway stopped waiting for may still be asking."""
        if self.quarantined:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=(
                    "the gateway relays no elicitation for a while after a call it stopped "
                    "waiting for: it cannot tell whose it is"
                ),
            )
        calls = self._in_flight
        if len(calls) != 1:  # how many are in flight is other callers' business
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=(
                    "the gateway relays an elicitation only while it has one call in flight "
                    "to this server: it cannot tell whose it is"
                ),
            )
        (call,) = calls
        try:
            params = redacted(params, self._redactor)
        except pydantic.ValidationError:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="the gateway cannot relay this question without the upstream's "
                "credentials in it",
            )
        return await call.ask(params)

    def _timed_out(self) -> UpstreamError:
        return UpstreamError(
            f"upstream {self.name!r} did not answer within {self._call_timeout:g} s"
        )

    async def _failure(self, client: Client, exc: Exception) -> UpstreamError:
        """The ``UpstreamError`` for what a request raised (see the module docstring)."""
        name = self.name
        if isinstance(exc, MCPError):
            if exc.code == types.URL_ELICITATION_REQUIRED:
                wanted = _url_elicitations(exc)
                if wanted:
                    try:  # shown to the agent as prompts: redacted as a question is
                        wanted = tuple(redacted(params, self._redactor) for params in wanted)
                    except pydantic.ValidationError:
                        return UpstreamError(
                            f"upstream {name!r} needs a URL hand-off completed first that "
                            "the gateway cannot relay without the upstream's credentials in it"
                        )
                    return URLElicitationRequired(
                        f"upstream {name!r} needs a URL hand-off completed first: "
                        f"error {exc.code}: {redacted_line(exc.message, self._redactor)}",
                        wanted,
                    )
            if exc.code == types.CONNECTION_CLOSED and self._oversized:
                return UpstreamError(
                    f"upstream {name!r} sent a message over {self._max_message_bytes} bytes; "
                    "the gateway closed the connection"
                )
            if exc.code == types.CONNECTION_CLOSED and await _closed(client):
                self._lose(client, "the connection closed")
                return UpstreamError(f"upstream {name!r} closed the connection during the call")
            if exc.code == types.INVALID_REQUEST and exc.message == _SESSION_ENDED:
                self._lose(client, "the upstream ended its session")
                return UpstreamError(f"upstream {name!r} ended its session during the call")
            return UpstreamError(
                f"upstream {name!r} failed the call: error {exc.code}: "
                f"{redacted_line(exc.message, self._redactor)}"
            )
        if isinstance(exc, pydantic.ValidationError):
            return UpstreamError(
                f"upstream {name!r} answered with something that is not a tools/call result"
            )
        kind = type(_leaf(exc)).__name__  # the transport's own failures: named by kind only
        return UpstreamError(f"upstream {name!r} could not be reached ({kind})")

    def _lose(self, client: Client, reason: str) -> None:
        """The connection of ``client`` is gone: no call is sent on it again, and the
        owner task leaves the SDK's client (which stops a stdio upstream's process) and
        starts the upstream again."""
        if self.client is client:
            self.client = None
            self._reason = reason
            self._lost.set()


def _request(
    tool: str,
    arguments: dict[str, Any],
    input_responses: dict[str, types.ElicitResult] | None,
    request_state: str | None,
) -> types.CallToolRequest:
    params = types.CallToolRequestParams(name=tool, arguments=arguments)
    if input_responses is not None:
        params.input_responses = dict(input_responses)
    if request_state is not None:
        params.request_state = request_state
    return types.CallToolRequest(params=params)


def _url_elicitations(exc: MCPError) -> tuple[types.ElicitRequestURLParams, ...]:
    """The URL hand-offs a ``-32042`` error carries; empty when its data is not of that
    shape (the error is then an ordinary one)."""
    try:
        error = types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        return tuple(UrlElicitationRequiredError.from_error(error).elicitations)
    except (pydantic.ValidationError, ValueError, TypeError, AttributeError):
        return ()


async def _either(first: anyio.Event, second: anyio.Event) -> None:
    """Wait until either event is set."""
    async with anyio.create_task_group() as group:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            group.cancel_scope.cancel()

        group.start_soon(wait, first)
        group.start_soon(wait, second)


#: What the SDK's HTTP client answers once the upstream has ended its session (404).
_SESSION_ENDED: Final = "Session terminated"


async def _gone(client: Client) -> bool:
    """Whether ``client``'s connection is lost: closed (``_closed``), or an HTTP
    session the upstream ended."""
    with anyio.move_on_after(_PING_TIMEOUT):
        try:
            await client.session.send_ping()
        except MCPError as exc:
            return exc.code == types.CONNECTION_CLOSED or (
                exc.code == types.INVALID_REQUEST and exc.message == _SESSION_ENDED
            )
        except Exception:  # a transport's own failure: the next ping tells
            return False
    return False


async def _closed(client: Client) -> bool:
    """Whether ``client``'s connection is closed (an upstream's own ``-32000`` error is
    not): a ping on a closed connection fails at once with ``CONNECTION_CLOSED``."""
    with anyio.move_on_after(_PING_TIMEOUT):
        try:
            await client.session.send_ping()
        except MCPError as exc:
            return exc.code == types.CONNECTION_CLOSED
    return False


async def _list_tools(client: Client) -> tuple[tuple[types.Tool, ...], bool]:
    """Every tool the upstream lists (bounded), and whether the listing was cut."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await client.session.list_tools(params=params)
        tools.extend(page.tools)
        if len(tools) > MAX_LISTED_TOOLS:
            return tuple(tools[:MAX_LISTED_TOOLS]), True
        cursor = page.next_cursor
        if cursor is None:
            return tuple(tools), False
        if cursor in seen:  # a cursor that repeats would list the same pages forever
            return tuple(tools), True
        seen.add(cursor)
    return tuple(tools), True
