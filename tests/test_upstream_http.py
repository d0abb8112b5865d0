"""``opgate.upstream._http``: an HTTP upstream's bodies are bounded before they are parsed.

The transport is tested over ``httpx2.MockTransport`` (bodies at, over and without a
declared length, encoded bodies, event streams); then a real ``KIT`` over streamable
HTTP, answering with one JSON body and with an event stream, sends an answer over the
bound through a real catalog: that call fails naming the bound, and the next one is
answered on the same connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from opgate import Completed, Failed, FailureCode, LocalPolicy
from opgate.upstream import load_config, open_catalog
from opgate.upstream._http import BoundedTransport, OversizedResponse, http_client
from opgate.upstream._session import MIN_MESSAGE_BYTES

from upstream_servers import serve_kit_http

pytestmark = pytest.mark.anyio

LIMIT = 1000


class Chunks(httpx2.AsyncByteStream):
    """A body sent in ``chunks``, counting how many were read."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.read += 1
            yield chunk


def client_of(
    body: Chunks, headers: dict[str, str], seen: list[httpx2.Request]
) -> httpx2.AsyncClient:
    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, headers=headers, stream=body)

    transport = BoundedTransport(httpx2.MockTransport(answer), LIMIT)
    return httpx2.AsyncClient(transport=transport, headers={"Accept-Encoding": "gzip"})


async def read(body: Chunks, headers: dict[str, str] | None = None) -> bytes:
    seen: list[httpx2.Request] = []
    async with client_of(body, headers or {"Content-Type": "application/json"}, seen) as client:
        response = await client.get("http://upstream/mcp")
        try:
            return await response.aread()
        finally:
            assert seen[0].headers["Accept-Encoding"] == "identity"  # the entry's gzip overridden


async def test_a_body_at_the_bound_arrives_whole() -> None:
    assert await read(Chunks(b"a" * 600, b"b" * 400)) == b"a" * 600 + b"b" * 400


async def test_a_body_past_the_bound_fails_before_the_rest_is_read() -> None:
    body = Chunks(b"a" * 600, b"b" * 401, b"never read")
    with pytest.raises(OversizedResponse, match="the response passed 1000 bytes"):
        await read(body)
    assert body.read == 2


async def test_a_declared_length_over_the_bound_fails_without_reading() -> None:
    body = Chunks(b"a" * 1001)
    with pytest.raises(OversizedResponse, match="the response is 1001 bytes, over 1000"):
        await read(body, {"Content-Type": "application/json", "Content-Length": "1001"})
    assert body.read == 0


async def test_an_encoded_body_is_refused_unread() -> None:
    # A few bytes of gzip can inflate to gigabytes: the bound counts what is parsed.
    body = Chunks(b"\x1f\x8b not really gzip")
    with pytest.raises(OversizedResponse, match=r"encoded \('gzip'\) although identity"):
        await read(body, {"Content-Type": "application/json", "Content-Encoding": "GZIP"})
    assert body.read == 0


async def test_an_identity_coding_passes() -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "identity"}
    assert await read(Chunks(b"{}"), headers) == b"{}"


async def test_an_event_stream_is_left_to_the_sdks_bound_per_event() -> None:
    events = Chunks(*[b"data: " + b"x" * 500 + b"\n\n"] * 4)
    headers = {"Content-Type": "text/event-stream; charset=utf-8"}
    assert len(await read(events, headers)) == 4 * 508


async def test_the_client_of_an_upstream_keeps_its_headers_and_timeout() -> None:
    timeout = httpx2.Timeout(3.0)
    async with http_client(headers={"X-Team": "a"}, timeout=timeout, max_message_bytes=5) as client:
        assert client.headers["X-Team"] == "a"
        assert client.timeout == timeout


@pytest.mark.parametrize("json_response", [True, False], ids=["json body", "event stream"])
async def test_an_answer_over_the_bound_fails_that_call_and_keeps_the_connection(
    json_response: bool,
) -> None:
    with serve_kit_http(json_response=json_response) as url:
        config = load_config({"mcpServers": {"web": {"url": url}}})
        async with open_catalog(config, start_timeout=60, call_timeout=60) as catalog:
            registry = catalog.registry(LocalPolicy())
            outcome = await registry.invoke(
                None, "web.blob", {"mib": (MIN_MESSAGE_BYTES >> 20) + 1}
            )
            assert isinstance(outcome, Failed), outcome
            assert outcome.failure.code is FailureCode.OPERATION_FAILED
            message = outcome.failure.message
            assert message.startswith("upstream 'web' failed the call"), message
            assert str(MIN_MESSAGE_BYTES) in message, message
            assert catalog.sessions["web"].status().connected
            echoed = await registry.invoke(None, "web.echo", {"text": "still here"})
            assert isinstance(echoed, Completed), echoed
            # Under the message bound, an answer reaches the result budget, which decides.
            under = await registry.invoke(None, "web.blob", {"mib": 1})
            assert isinstance(under, Failed), under
            assert under.failure.code is FailureCode.INVALID_RESULT
