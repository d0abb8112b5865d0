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
* Before the first stdio upstream is started, ``protect_gateway()`` makes the
  gateway's process non-dumpable on Linux, so that a process of the same user (the
  upstream) cannot read the gateway's whole environment or memory through
  ``/proc/PID/environ`` or ``/proc/PID/mem``, or ptrace it. The filter above keeps
  secrets from leaking by accident; this keeps a hostile upstream from taking them
  (a root upstream, or one that can read the files the gateway reads, still can).
* An HTTP upstream gets the entry's headers and nothing else: the HTTP client is
  the session's own, so no header of the gateway's clients (their bearer token
  included) can reach it. Redirects are followed by the SDK only within the
  endpoint's origin.
* What comes back is redacted (``_results.redacted``) of the upstream's own
  credentials, ``redactor_for(server)``: an upstream that echoes its request headers
  or its environment cannot hand the agent the gateway's credential for it. The
  secrets are an HTTP entry's header values (but those of ``PLAIN_HEADERS``), its
  URL's password and query values of at least ``MIN_ENV_SECRET`` characters, and a
  stdio entry's ``env`` values of at least ``MIN_ENV_SECRET`` characters that are not
  a path (``/…``, ``~…``, ``./…``, ``C:\\…``) nor a variable of ``INHERITED_ENV``.
  Answers (content, structured content, ``isError`` text), questions and the
  upstream's error messages in ``UpstreamError`` are all redacted.
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
and may keep open in ``held`` while a person answers. Nothing on the wire links an
``elicitation/create`` to the call it belongs to, so a question goes to the call in
flight only when it is the upstream's one call in flight; with none or several, it
is refused with a JSON-RPC error and never shown to anyone.

Failures
--------
A start that fails or does not finish within ``start_timeout`` leaves the session
``connected=False`` with a reason (``status()``); so does a connection found closed
during a call (a crashed process), after which no call is sent on it again. A call
that fails, times out
(``call_timeout``), finds the connection closed, or gets an answer that is not a
``tools/call`` result raises ``UpstreamError`` with a public message naming the
upstream; the message quotes at most a bounded line of the upstream's own error
text and never an exception of the gateway's.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, BinaryIO, Final, TextIO
from urllib.parse import parse_qsl, urlsplit

import anyio
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from opgate import __version__
from opgate.redact import Redactor

from ._config import PLAIN_HEADERS, ServerConfig, StdioServer
from ._held import Ended, HeldCall, HeldCalls, ProgressForward
from ._report import UpstreamStatus, bounded
from ._results import redacted

__all__ = [
    "CLIENT_NAME",
    "DUMPABLE_ENV",
    "INHERITED_ENV",
    "MAX_LISTED_TOOLS",
    "MAX_LIST_PAGES",
    "MAX_STDERR_LINE",
    "MIN_ENV_SECRET",
    "StderrRelay",
    "UpstreamError",
    "UpstreamSession",
    "child_environment",
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
    thread that copies it to ``target`` a line at a time, each line prefixed with
    ``[NAME] `` and every character that is not printable (terminal escapes, CR, bidi
    controls) written as its Python escape, so an upstream can neither forge the
    gateway's own log lines nor drive the operator's terminal. A line longer than
    ``MAX_STDERR_LINE`` bytes is copied in pieces, each prefixed. ``close()`` closes
    the gateway's end; the thread ends once every process holding the other end has.
    """

    def __init__(self, name: str, target: TextIO) -> None:
        read, write = os.pipe()
        self.file: TextIO = os.fdopen(write, "w")
        source = os.fdopen(read, "rb")
        thread = threading.Thread(
            target=_copy_stderr, args=(source, name, target), daemon=True, name=f"{name} stderr"
        )
        thread.start()

    def close(self) -> None:
        """Close the gateway's end of the pipe."""
        self.file.close()


def _copy_stderr(source: BinaryIO, name: str, target: TextIO) -> None:
    with source:
        while line := source.readline(MAX_STDERR_LINE):
            text = line.decode("utf-8", "replace").removesuffix("\n")
            shown = "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)
            try:
                target.write(f"[{name}] {shown}\n")
                target.flush()
            except (OSError, ValueError):  # stderr gone: keep draining so the upstream never blocks
                continue


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _start_reason(server: ServerConfig, exc: BaseException) -> str:
    """Why a start failed, for the operator (never a header or environment value)."""
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return f"the handshake failed: error {exc.code}: {bounded(exc.message)}"
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
    * ``status()``: an ``UpstreamStatus``.
    """

    def __init__(
        self,
        server: ServerConfig,
        *,
        start_timeout: float,
        call_timeout: float,
        stderr: TextIO | None = None,
    ) -> None:
        self.server = server
        self.name = server.name
        self.tools: tuple[types.Tool, ...] = ()
        self.truncated = False
        self.client: Client | None = None
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._stderr = stderr
        self._redactor = redactor_for(server)
        self._reason = "not started"
        self._started = anyio.Event()
        self._stop = anyio.Event()
        self._finished = anyio.Event()
        self._calls: anyio.abc.TaskGroup | None = None
        self._in_flight: set[HeldCall] = set()
        self.held = HeldCalls()

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
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if isinstance(self.server, StdioServer) else "http"

    def status(self) -> UpstreamStatus:
        """The upstream's state now."""
        client = self.client
        if client is None:
            return UpstreamStatus(self.name, self.transport, False, self._reason)
        info = client.server_info
        server = ""
        if info is not None:
            server = bounded(f"{info.name} {info.version}".strip(), 80)
        return UpstreamStatus(
            self.name,
            self.transport,
            True,
            protocol_version=client.protocol_version,
            server=server,
            tools=len(self.tools),
        )

    async def started(self) -> None:
        """Wait until the start succeeded or failed (``run`` bounds it by ``start_timeout``)."""
        await self._started.wait()

    async def close(self) -> None:
        """Ask the owner task to close the connection and wait until it has."""
        if self.client is not None:
            self._reason = "closed"
        self._stop.set()
        await self._finished.wait()

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        """The SDK client for the entry, entered (the handshake done)."""
        server = self.server
        info = types.Implementation(name=CLIENT_NAME, version=__version__)
        if isinstance(server, StdioServer):
            protect_gateway()
            parameters = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=child_environment(server),
                cwd=server.cwd,
            )
            relay = StderrRelay(self.name, _errlog(self._stderr))
            try:
                transport = stdio_client(parameters, errlog=relay.file)
                async with Client(
                    transport,
                    mode="auto",
                    client_info=info,
                    cache=None,
                    elicitation_callback=self._on_elicit,
                ) as client:
                    yield client
            finally:
                relay.close()
            return
        async with httpx2.AsyncClient(headers=dict(server.headers), timeout=_HTTP_TIMEOUT) as http:
            transport = streamable_http_client(server.url, http_client=http)
            async with Client(
                transport,
                mode="auto",
                client_info=info,
                cache=None,
                elicitation_callback=self._on_elicit,
            ) as client:
                yield client

    async def run(self) -> None:
        """The owner task: start, list, serve calls until ``close()``; never raises
        except for cancellation."""
        # The start deadline is lifted once started; it is one scope around the whole
        # connection because the SDK's scopes inside it must close in the same order.
        deadline = anyio.CancelScope(deadline=anyio.current_time() + self._start_timeout)
        try:
            with deadline:
                async with self._connected() as client:
                    self.tools, self.truncated = await _list_tools(client)
                    deadline.deadline = math.inf
                    async with anyio.create_task_group() as calls:
                        self._calls = calls
                        self.client = client
                        self._started.set()
                        await self._stop.wait()
                        self.client = None
                        self.held.abandon_all()
                        calls.cancel_scope.cancel()
            if deadline.cancelled_caught and not self._started.is_set():
                self._reason = f"did not start within {self._start_timeout:g} s"
        except Exception as exc:  # every failure of an upstream is the upstream's
            if not self._started.is_set():
                self._reason = _start_reason(self.server, exc)
            else:
                self._reason = "the connection ended"
        finally:
            self.client = None
            self._calls = None
            self._started.set()
            self._finished.set()

    def _connection(self) -> Client:
        client = self.client
        if client is None:
            raise UpstreamError(f"upstream {self.name!r} is not connected ({self._reason})")
        return client

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
            raise UpstreamError(f"upstream {self.name!r} is not connected ({self._reason})")
        call = HeldCall(self.name, call_timeout=self._call_timeout)
        self._in_flight.add(call)
        calls.start_soon(self._run_call, client, call, _request(tool, arguments, None, None))
        return call

    async def _run_call(
        self, client: Client, call: HeldCall, request: types.CallToolRequest
    ) -> None:
        """The task of one held call: send it, and end it with its answer or failure."""
        ended = Ended(error=UpstreamError(f"upstream {self.name!r} closed the connection"))
        try:
            with call.scope:
                answer = await client.session.send_request(
                    request, _CALL_RESULT, progress_callback=call.progress
                )
                ended = Ended(answer=redacted(answer, self._redactor))
            if call.scope.cancelled_caught:
                ended = Ended(error=self._timed_out())
        except Exception as exc:
            try:
                ended = Ended(error=await self._failure(client, exc))
            except Exception as again:  # the task must not take the connection down with it
                kind = type(_leaf(again)).__name__
                ended = Ended(error=UpstreamError(f"upstream {self.name!r} failed ({kind})"))
        finally:
            self._in_flight.discard(call)
            call.end(ended)

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The SDK's elicitation callback: the question of the one call in flight."""
        calls = self._in_flight
        if len(calls) != 1:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=(
                    "the gateway relays an elicitation only while it has one call in flight "
                    f"to this server ({len(calls)} now): it cannot tell whose it is"
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
            if exc.code == types.CONNECTION_CLOSED and await _closed(client):
                self._lose(client, "the connection closed")
                return UpstreamError(f"upstream {name!r} closed the connection during the call")
            return UpstreamError(
                f"upstream {name!r} failed the call: error {exc.code}: "
                f"{bounded(self._redactor.text(exc.message))}"
            )
        if isinstance(exc, pydantic.ValidationError):
            return UpstreamError(
                f"upstream {name!r} answered with something that is not a tools/call result"
            )
        kind = type(_leaf(exc)).__name__  # the transport's own failures: named by kind only
        return UpstreamError(f"upstream {name!r} could not be reached ({kind})")

    def _lose(self, client: Client, reason: str) -> None:
        """The connection of ``client`` is gone: no call is sent on it again, and the
        owner task leaves the SDK's client (which stops a stdio upstream's process)."""
        if self.client is client:
            self.client = None
            self._reason = reason
            self._stop.set()


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
