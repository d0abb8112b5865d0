"""An HTTP upstream's client: every message bounded before it is parsed.

The SDK's ``streamable_http_client`` bounds one server-sent event
(``max_sse_event_size``) but reads a JSON response whole (``response.aread()``), and
``httpx2`` decodes a ``gzip``, ``deflate``, ``br`` or ``zstd`` body as it arrives: a
hostile or broken upstream could hold the gateway's memory with one endless body, or
with a few kilobytes that inflate to gigabytes. ``http_client(headers=, timeout=,
max_message_bytes=)`` is the ``httpx2.AsyncClient`` an HTTP upstream session uses. Its
event hooks (``bounding_hooks``), which see every request and response, redirects
included:

* ask for ``Accept-Encoding: identity`` on every request (whatever the entry's
  headers say), and fail a response that comes encoded anyway, before reading it: the
  bytes counted are then the bytes parsed;
* fail any other body once it passes ``max_message_bytes`` (a ``Content-Length`` over
  it fails at once), without keeping more than that. The one exemption is the stream
  of server-sent events that a successful ``GET`` or ``POST`` opens: the SDK reads it
  event by event, each bounded by ``max_sse_event_size``, which the session sets to
  the same bound. Every other body the SDK reads whole (JSON answers, error bodies,
  the answer to the ``DELETE`` that ends a session), so an event-stream
  ``Content-Type`` on one of those earns it nothing;
* drop a redirect's body unread: the SDK never parses one, and it drains the body of
  a redirect it follows.

Being hooks rather than a transport, they leave ``httpx2``'s own transports in place,
so the proxies of the environment (``HTTPS_PROXY``, ``NO_PROXY``, ...) still apply.

A failed body raises ``OversizedResponse`` (an ``httpx2.StreamError``) from the
response stream, where the SDK turns it into an error answer to that one request:
the call fails naming the bound, and the connection is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx2

__all__ = ["OversizedResponse", "RefusedEventStream", "bounding_hooks", "http_client"]

#: Content codings that leave the body as sent (no decoding step to inflate it).
_IDENTITY = frozenset({"", "identity"})

#: The methods whose successful event stream the SDK reads event by event.
_STREAMED = frozenset({"GET", "POST"})


class OversizedResponse(httpx2.StreamError):
    """A response body over the bound, or one encoded although ``identity`` was asked."""


class RefusedEventStream(OversizedResponse, httpx2.SSEError):
    """An event stream refused unread (it came encoded): also an ``SSEError``, which
    the SDK reports with its text ("SSE stream failed: ...") rather than as a stream
    that ended without a response."""


def http_client(
    *, headers: Mapping[str, str], timeout: httpx2.Timeout, max_message_bytes: int
) -> httpx2.AsyncClient:
    """The HTTP client of one upstream: its entry's ``headers``, the environment's
    proxies, and bodies bounded by ``max_message_bytes`` (see the module docstring)."""
    return httpx2.AsyncClient(
        headers=dict(headers), timeout=timeout, event_hooks=bounding_hooks(max_message_bytes)
    )


def bounding_hooks(max_message_bytes: int) -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
    """The ``event_hooks`` of an ``httpx2.AsyncClient`` that bound its bodies by
    ``max_message_bytes`` (see the module docstring)."""

    async def on_request(request: httpx2.Request) -> None:
        request.headers["Accept-Encoding"] = "identity"

    async def on_response(response: httpx2.Response) -> None:
        _bound(response, max_message_bytes)

    return {"request": [on_request], "response": [on_response]}


def _bound(response: httpx2.Response, limit: int) -> None:
    """Put ``response``'s body, not yet read, behind the bound that fits it."""
    body = response.stream
    if not isinstance(body, httpx2.AsyncByteStream):  # an async client's never is
        raise TypeError("the response of an async client has a synchronous body")
    coding = response.headers.get("Content-Encoding", "").strip().lower()
    per_event = _read_per_event(response)
    if response.has_redirect_location:
        for name in ("Content-Encoding", "Content-Length"):
            response.headers.pop(name, None)
        response.stream = _Discarded(body)
    elif coding not in _IDENTITY:
        problem = f"the response is encoded ({coding!r}) although identity was asked"
        refusal = RefusedEventStream(problem) if per_event else OversizedResponse(problem)
        response.stream = _Refused(body, refusal)
    elif per_event:
        # An event stream is UTF-8 whatever its charset says (WHATWG HTML, "Parsing an
        # event stream"): a charset of utf-7 or unicode_escape would have the text
        # decoder hold an endless body unconsumed, before the per-event bound sees a
        # character; one of bz2 or zlib (under -O) would inflate it.
        response.encoding = "utf-8"
    else:
        declared = _declared_length(response)
        if declared is not None and declared > limit:
            problem = f"the response is {declared} bytes, over {limit}"
            response.stream = _Refused(body, OversizedResponse(problem))
        else:
            response.stream = _Bounded(body, limit)


def _read_per_event(response: httpx2.Response) -> bool:
    """Whether the SDK reads ``response`` event by event (bounded per event), rather
    than whole: a ``2xx`` event stream answering a ``GET`` or a ``POST``."""
    media = response.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    return (
        media == "text/event-stream"
        and response.is_success
        and response.request.method in _STREAMED
    )


def _declared_length(response: httpx2.Response) -> int | None:
    value = response.headers.get("Content-Length")
    if value is None or not value.strip().isdigit():
        return None  # absent or unreadable: the count while reading decides
    return int(value)


class _Bounded(httpx2.AsyncByteStream):
    """The chunks of ``inner`` until their total passes ``limit``, then an error."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise OversizedResponse(f"the response passed {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Discarded(httpx2.AsyncByteStream):
    """An empty body in place of ``inner``, which is closed unread."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self._inner.aclose()
        return
        yield b""  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Refused(httpx2.AsyncByteStream):
    """A body that is never read: iterating it raises ``refusal``."""

    def __init__(self, inner: httpx2.AsyncByteStream, refusal: OversizedResponse) -> None:
        self._inner = inner
        self._refusal = refusal

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise self._refusal
        yield b""  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        await self._inner.aclose()
