"""An HTTP upstream's client: every message bounded before it is parsed.

The SDK's ``streamable_http_client`` bounds one server-sent event
(``max_sse_event_size``) but reads a JSON response whole (``response.aread()``), and
``httpx2`` decodes a ``gzip``, ``deflate``, ``br`` or ``zstd`` body as it arrives: a
hostile or broken upstream could hold the gateway's memory with one endless body, or
with a few kilobytes that inflate to gigabytes. ``http_client(headers=, timeout=,
max_message_bytes=)`` is the ``httpx2.AsyncClient`` an HTTP upstream session uses; its
transport (``BoundedTransport``)

* asks for ``Accept-Encoding: identity`` on every request (whatever the entry's
  headers say), and fails a response that comes encoded anyway, before reading it:
  the bytes counted are then the bytes parsed;
* fails a response that is not a stream of server-sent events once its body passes
  ``max_message_bytes`` (a ``Content-Length`` over it fails at once), without keeping
  more than that. Event streams are bounded per event by the SDK, which the session
  gives the same bound.

A failed body raises ``OversizedResponse`` (an ``httpx2.StreamError``) from the
response stream, where the SDK turns it into an error answer to that one request:
the call fails naming the bound, and the connection is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import httpx2

__all__ = ["BoundedTransport", "OversizedResponse", "http_client"]

#: Content codings that leave the body as sent (no decoding step to inflate it).
_IDENTITY = frozenset({"", "identity"})


class OversizedResponse(httpx2.StreamError):
    """A response body over the bound, or one encoded although ``identity`` was asked."""


def http_client(
    *, headers: Mapping[str, str], timeout: httpx2.Timeout, max_message_bytes: int
) -> httpx2.AsyncClient:
    """The HTTP client of one upstream: its entry's ``headers``, and bodies bounded by
    ``max_message_bytes`` (see the module docstring)."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=timeout,
        transport=BoundedTransport(httpx2.AsyncHTTPTransport(), max_message_bytes),
    )


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner`` with identity-only bodies and non-event bodies of at most
    ``max_message_bytes`` bytes (see the module docstring)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_message_bytes: int) -> None:
        self._inner = inner
        self._limit = max_message_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        body = response.stream
        if not isinstance(body, httpx2.AsyncByteStream):  # an async transport's never is
            raise TypeError("the inner transport returned a synchronous body")
        coding = response.headers.get("Content-Encoding", "").strip().lower()
        media = response.headers.get("Content-Type", "").partition(";")[0].strip().lower()
        if coding not in _IDENTITY:
            problem = f"the response is encoded ({coding!r}) although identity was asked"
            response.stream = _Refused(body, problem)
        elif media != "text/event-stream":
            declared = _declared_length(response)
            if declared is not None and declared > self._limit:
                problem = f"the response is {declared} bytes, over {self._limit}"
                response.stream = _Refused(body, problem)
            else:
                response.stream = _Bounded(body, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


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


class _Refused(httpx2.AsyncByteStream):
    """A body that is never read: iterating it raises ``OversizedResponse(problem)``."""

    def __init__(self, inner: httpx2.AsyncByteStream, problem: str) -> None:
        self._inner = inner
        self._problem = problem

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise OversizedResponse(self._problem)
        yield b""  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        await self._inner.aclose()
