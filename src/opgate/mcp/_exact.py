"""The exact JSON path between the MCP wire and opgate's rules (SDK 2.3).

The SDK decodes every JSON-RPC message itself — repeated member names collapse to
the last one, non-integral numbers become doubles, ``1e400`` an infinity — and its
encoders write Python ``int`` and ``float``. This module keeps opgate's JSON rules at
the wire, in both directions, for messages that pass through opgate's own transports
(``stdio_streams`` and ``ExactHTTP``):

* **Inbound.** The transport hands the raw bytes of the message being served to the
  handler that serves it (``current_message``: a context variable, which the SDK
  carries from the task that delivered a message to the task that handles it).
  ``member_bytes`` finds the raw text of one value in it (``params.arguments`` and so
  on; the last occurrence of a repeated name, as the SDK's decoders choose), which the
  registry then parses with opgate's strict parser. Answers to the requests the server
  sends under its own ids reach the call that awaits them through ``Answers``. The
  protocol's own fields keep the SDK's handling.
* **Outbound.** A number the SDK's encoders cannot write as opgate's canonical text
  becomes a placeholder string (``placeholder``); the transport writes each
  placeholder as that text (``restore``) on its way out. Sizes are measured as
  written (``sent_size``: after ``restore``, and with the ``\\uXXXX`` escapes of the
  SDK's 2026-07-28 HTTP encoder, which writes ASCII only). Placeholders carry a
  random per-process mark, so no string an operation or a client writes is ever
  taken for one.

A message that did not come through these transports (an in-process client) has no
raw bytes: it keeps the SDK's values, and numbers go out as ``int`` and ``float``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, BinaryIO, Protocol

import anyio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ._pipes import PipeReader, PipeWriter, in_loop, serving_in_loop

__all__ = [
    "Answers",
    "ExactHTTP",
    "UnreadableMessage",
    "current_message",
    "member_bytes",
    "placeholder",
    "restore",
    "sent_size",
    "stdio_streams",
]

_MESSAGE: ContextVar[bytes | None] = ContextVar("opgate.mcp.message", default=None)
#: Whether the reply to the message is written ASCII-only (``json.dumps``'s default).
_ASCII_ONLY: ContextVar[bool] = ContextVar("opgate.mcp.ascii_only", default=False)


def current_message() -> bytes | None:
    """The raw bytes of the JSON-RPC message being served, when an exact transport
    delivered it; ``None`` otherwise (then numbers also go out as ``int``/``float``)."""
    return _MESSAGE.get()


# -- reading raw members ---------------------------------------------------------


class UnreadableMessage(ValueError):
    """The message could not be read as UTF-8 JSON here (or it nests beyond the decoder)."""


def _discard(*_: object) -> None:
    return None


# Skips one JSON value in C without building it (every hook discards its part).
_SKIP = json.JSONDecoder(
    object_pairs_hook=_discard, parse_float=_discard, parse_int=_discard, parse_constant=_discard
)
_SPACE = re.compile(r"[ \t\n\r]*")


def _walk(text: str, position: int, path: tuple[str, ...]) -> tuple[int, tuple[int, int] | None]:
    """The end of the value at ``position`` and the span of the value at ``path`` in it
    (the last occurrence of a repeated name), walked once: only members on the path
    are entered, every other value is skipped in C."""
    if not path or not text.startswith("{", position):
        _, end = _SKIP.raw_decode(text, position)
        return end, (position, end) if not path else None
    found = None
    position = _SPACE.match(text, position + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", position):
        return position + 1, None
    while True:
        if not text.startswith('"', position):
            raise UnreadableMessage("expected a member name")
        member, position = scanstring(text, position + 1)
        position = _SPACE.match(text, position).end()  # type: ignore[union-attr]
        if not text.startswith(":", position):
            raise UnreadableMessage("expected a colon")
        start = _SPACE.match(text, position + 1).end()  # type: ignore[union-attr]
        if member == path[0]:
            end, found = _walk(text, start, path[1:])
        else:
            _, end = _SKIP.raw_decode(text, start)
        position = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text.startswith(",", position):
            position = _SPACE.match(text, position + 1).end()  # type: ignore[union-attr]
        elif text.startswith("}", position):
            return position + 1, found
        else:
            raise UnreadableMessage("expected a comma or a closing brace")


def member_bytes(raw: bytes, path: tuple[str, ...]) -> bytes | None:
    """The raw text of the value at ``path`` (member names from the root), exactly as
    sent; ``None`` when a member is absent or a value on the way is not an object.

    A repeated name means its last occurrence, at every level, as in the SDK. Raises
    ``UnreadableMessage`` when the text is not JSON the decoder can read.
    """
    text = raw.decode("utf-8", "surrogateescape")  # invalid bytes come back unchanged
    start = 1 if text.startswith("\ufeff") else 0  # a byte order mark, as ``json`` skips it
    try:
        _, span = _walk(text, _SPACE.match(text, start).end(), path)  # type: ignore[union-attr]
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
        raise UnreadableMessage("the message could not be read") from exc
    if span is None:
        return None
    return text[span[0] : span[1]].encode("utf-8", "surrogateescape")


# -- answers to the server's own requests ------------------------------------------

#: Every id the server sends its own requests under starts with this.
ANSWER_ID_PREFIX = "opgate-"
_ANSWER_MARK = b'"' + ANSWER_ID_PREFIX.encode("ascii")


@dataclass(slots=True)
class Answer:
    """One awaited answer: its request ``id``, the session it belongs to, and, once the
    response arrived, the raw text of its ``result.content`` (``None`` when absent).
    ``repeated`` says that more than one response came under the id: the text kept
    may then belong to another one than the SDK took."""

    id: str
    session: str | None
    arrived: bool = False
    content: bytes | None = None
    unreadable: bool = False
    repeated: bool = False


class Answers:
    """Responses to requests the server sent under its own ids, for the calls awaiting them.

    A call ``expect``s an answer, sends its request under ``answer.id`` and, when the
    SDK hands it the parsed response, reads ``answer.content``. Transports ``offer``
    every inbound message before the SDK sees it, including messages the SDK then
    refuses: the first message under an awaited id from the same session is kept, and
    a second one marks the answer ``repeated``, since which of them the SDK took as
    the response is not known here.
    """

    def __init__(self) -> None:
        self._awaited: dict[str, Answer] = {}

    @contextmanager
    def expect(self, session: str | None) -> Iterator[Answer]:
        answer = Answer(ANSWER_ID_PREFIX + secrets.token_hex(16), session)
        self._awaited[answer.id] = answer
        try:
            yield answer
        finally:
            del self._awaited[answer.id]

    def offer(self, raw: bytes, session: str | None) -> None:
        # Only a \u escape can spell the id's letters otherwise: a message with neither
        # the literal prefix nor one cannot carry an awaited id.
        if not self._awaited or (_ANSWER_MARK not in raw and b"\\u" not in raw):
            return
        try:
            ident = member_bytes(raw, ("id",))
            answer = self._awaited.get(json.loads(ident)) if ident is not None else None
            if answer is None or answer.session != session:
                return
            if answer.arrived:
                answer.repeated = True
                return
        except (ValueError, TypeError):  # not JSON, or an id that is no str
            return
        answer.arrived = True
        try:
            answer.content = member_bytes(raw, ("result", "content"))
        except UnreadableMessage:
            answer.unreadable = True


# -- writing exact numbers --------------------------------------------------------

_MARK = f"#opgate-{secrets.token_hex(12)}#"
_MARK_BYTES = _MARK.encode("ascii")
_OPENING = b'"' + _MARK_BYTES


def placeholder(number_text: str) -> str:
    """The string the SDK writes in place of a number whose canonical text is given."""
    return _MARK + number_text


def sent_size(data: bytes) -> int:
    """The bytes the transport writes for the encoded JSON ``data`` (UTF-8)."""
    data = restore(data)
    if not _ASCII_ONLY.get() or data.isascii():
        return len(data)
    text = data.decode("utf-8", "surrogatepass")
    ascii_count = len(text.encode("ascii", "ignore"))
    astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - len(text)
    # \uXXXX for a character of the BMP, a surrogate pair of them beyond it.
    return ascii_count + 6 * (len(text) - ascii_count - astral) + 12 * astral


def restore(data: bytes) -> bytes:
    """``data`` (encoded JSON) with every placeholder written as its number."""
    if _MARK_BYTES not in data:
        return data
    # A placeholder is '"' MARK number '"', and number texts hold no quote: after each
    # opening, the first quote is the placeholder's closing one.
    head, *tails = data.split(_OPENING)
    return head + b"".join(tail.replace(b'"', b"", 1) for tail in tails)


# -- stdio ----------------------------------------------------------------------


class _Reader(Protocol):
    async def readline(self) -> bytes: ...


class _Writer(Protocol):
    async def write(self, data: bytes) -> Any: ...

    async def flush(self) -> None: ...


class _Lines:
    """The wire's stdin as the SDK's stdio transport reads it: one ``str`` per line.

    Each line is offered to ``answers`` and becomes the current message of the task
    that reads it, before it is returned: SDK 2.3's reader parses the line and sends
    the message from that same task, and the message carries that task's context to
    its handler.
    """

    def __init__(self, reader: _Reader, answers: Answers) -> None:
        self._reader = reader
        self._answers = answers

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        self._answers.offer(line, None)
        _MESSAGE.set(line)
        return line.decode("utf-8", "replace")  # what the SDK's own reader decodes


class _Sink:
    """The wire's stdout as the SDK's stdio transport writes it, placeholders restored."""

    def __init__(self, writer: _Writer) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        await self._writer.write(restore(text.encode("utf-8")))

    async def flush(self) -> None:
        await self._writer.flush()


@asynccontextmanager
async def stdio_streams(answers: Answers) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over this process's stdin and stdout, exact.

    While it runs, descriptors 0 and 1 point at the null device and at stderr, so
    handlers that read stdin or print miss the wire (as in the SDK's own claim); the
    wire is served from private duplicates, restored on exit. A wire that is a pipe or
    a socket is read and written in the event loop (``_pipes``), anything else through
    worker threads, as the SDK does.
    """
    from mcp.server.stdio import stdio_server

    wire_in, wire_out, release = _claim_standard_streams()
    try:
        with _wire(wire_in, wire_out) as (reader, writer):
            async with stdio_server(_Lines(reader, answers), _Sink(writer)) as streams:  # type: ignore[arg-type]
                yield streams
    finally:
        release()


@contextmanager
def _wire(wire_in: BinaryIO, wire_out: BinaryIO) -> Iterator[tuple[_Reader, _Writer]]:
    """The reader and writer of the wire: in the event loop where it can be, else
    through worker threads."""
    fd_in, fd_out = _loop_descriptor(wire_in), _loop_descriptor(wire_out)
    with serving_in_loop(*(fd for fd in (fd_in, fd_out) if fd is not None)):
        reader: _Reader = anyio.wrap_file(wire_in) if fd_in is None else PipeReader(fd_in)
        writer: _Writer = anyio.wrap_file(wire_out) if fd_out is None else PipeWriter(fd_out)
        yield reader, writer


def _loop_descriptor(stream: BinaryIO) -> int | None:
    """``stream``'s descriptor if it can be served in the event loop, else ``None``."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
    return fd if in_loop(fd) else None


def _claim_standard_streams() -> tuple[BinaryIO, BinaryIO, Callable[[], None]]:
    """Private duplicates of fds 0 and 1 for the wire; 0 then reads EOF, 1 writes to 2."""
    try:
        import fcntl

        sys.stdout.flush()
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, OSError, ValueError):  # no such descriptors: serve in place
        return sys.stdin.buffer, sys.stdout.buffer, lambda: None
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def release() -> None:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)

    # closefd=False: a worker thread may still block reading after the transport
    # ended, so the private descriptors are never closed and reused under it.
    return (
        os.fdopen(wire_in, "rb", closefd=False),
        os.fdopen(wire_out, "wb", closefd=False),
        release,
    )


# -- streamable HTTP ---------------------------------------------------------------

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]


class ExactHTTP:
    """ASGI wrapper of the SDK's streamable-HTTP session manager app.

    It sits inside authentication, so only a known caller's body is ever buffered
    (an unauthenticated one gets its 401 while uvicorn's flow control holds the rest).

    A POST body (up to ``max_body`` bytes; a larger one passes through untouched, for
    the SDK to refuse) is offered to ``answers`` and becomes the current message of
    the request, then replayed to the app. Every response body has its placeholders
    restored (its ``content-length`` follows).
    """

    def __init__(self, app: Any, *, answers: Answers, max_body: int) -> None:
        self._app = app
        self._answers = answers
        self._max_body = max_body

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        send = _restoring(send)
        if scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        complete = False
        pending: _Message | None = None
        while size <= self._max_body:
            message = await receive()
            if message["type"] != "http.request":
                pending = message  # a disconnect: the app learns it in turn
                break
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if not message.get("more_body", False):
                complete = True
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> _Message:
            nonlocal replayed, pending
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": not complete}
            if pending is not None:
                message, pending = pending, None
                return message
            return await receive()

        if not complete:
            await self._app(scope, replay, send)
            return
        self._answers.offer(body, _header(scope, b"mcp-session-id"))
        # The SDK's rule for its 2026-07-28 entry, whose encoder escapes all non-ASCII.
        version = _header(scope, b"mcp-protocol-version")
        ascii_only = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        token, ascii_token = _MESSAGE.set(body), _ASCII_ONLY.set(ascii_only)
        try:
            await self._app(scope, replay, send)
        finally:
            _ASCII_ONLY.reset(ascii_token)
            _MESSAGE.reset(token)


def _header(scope: _Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _restoring(send: _Send) -> _Send:
    """``send`` with placeholders restored in response bodies.

    A response with a ``content-length`` (one JSON body) is held until its last
    chunk and its length rewritten; a streamed one (server-sent events, one event per
    chunk) is restored chunk by chunk.
    """
    held: _Message | None = None
    parts: list[bytes] = []

    async def restoring(message: _Message) -> None:
        nonlocal held
        kind = message["type"]
        if kind == "http.response.start" and any(
            name.lower() == b"content-length" for name, _ in message.get("headers", ())
        ):
            held = message
            return
        if kind != "http.response.body":
            await send(message)
            return
        body = message.get("body", b"")
        if held is None:
            if _MARK_BYTES in body:
                message = {**message, "body": restore(body)}
            await send(message)
            return
        parts.append(body)
        if message.get("more_body", False):
            return
        body = restore(b"".join(parts))
        parts.clear()
        headers = [
            (name, value)
            for name, value in held.get("headers", ())
            if name.lower() != b"content-length"
        ]
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        start, held = {**held, "headers": headers}, None
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return restoring
