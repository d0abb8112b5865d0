"""``opgate.upstream._http``: an HTTP upstream's bodies are bounded before they are parsed.

The transport is tested over ``httpx2.MockTransport`` (bodies at, over and without a
declared length, encoded bodies, event streams); then a real ``KIT`` over streamable
HTTP, answering with one JSON body and with an event stream, sends an answer over the
bound through a real catalog: that call fails naming the bound, and the next one is
answered on the same connection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from opgate import Completed, Failed, FailureCode, LocalPolicy
from opgate.upstream import load_config, open_catalog
from opgate.upstream._http import OversizedResponse, bounding_hooks, http_client
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
    body: Chunks, headers: dict[str, str], seen: list[httpx2.Request], status: int = 200
) -> httpx2.AsyncClient:
    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(status, headers=headers, stream=body)

    return httpx2.AsyncClient(
        transport=httpx2.MockTransport(answer),
        headers={"Accept-Encoding": "gzip"},
        event_hooks=bounding_hooks(LIMIT),
    )


async def read(
    body: Chunks,
    headers: dict[str, str] | None = None,
    *,
    method: str = "GET",
    status: int = 200,
) -> bytes:
    seen: list[httpx2.Request] = []
    headers = headers or {"Content-Type": "application/json"}
    async with (
        client_of(body, headers, seen, status) as client,
        client.stream(method, "http://upstream/mcp") as response,
    ):
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


@pytest.mark.parametrize(
    ("method", "status"),
    [("DELETE", 200), ("POST", 404), ("POST", 500), ("GET", 300)],
    ids=["the DELETE ending a session", "not found", "server error", "3xx, not a redirect"],
)
async def test_an_event_stream_the_sdk_reads_whole_is_bounded(method: str, status: int) -> None:
    events = Chunks(*[b"data: " + b"x" * 500 + b"\n\n"] * 4)
    with pytest.raises(OversizedResponse, match="the response passed 1000 bytes"):
        await read(events, {"Content-Type": "text/event-stream"}, method=method, status=status)
    assert events.read == 2


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirects_body_is_dropped_unread(status: int) -> None:
    # The SDK drains the body of a redirect it follows: an endless one, dressed as an
    # event stream or encoded, would have been read whole.
    body = Chunks(b"x" * 600, b"y" * 600)
    headers = {
        "Location": "http://upstream/elsewhere",
        "Content-Type": "text/event-stream",
        "Content-Encoding": "gzip",
        "Content-Length": "1200",
    }
    assert await read(body, headers, method="POST", status=status) == b""
    assert body.read == 0


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


class Forwarding:
    """A plain-HTTP proxy on loopback: it records each request line and answers with
    ``body`` (a JSON ``Content-Type``, no length), then closes."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.lines: list[bytes] = []

    async def serve(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive()
            self.lines.append(head.split(b"\r\n", 1)[0])
            await stream.send(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                + self.body
            )


@pytest.mark.parametrize("size", [LIMIT, LIMIT + 1], ids=["at the bound", "over it"])
async def test_the_environments_proxy_is_used_and_its_answers_bounded(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # An AsyncClient given a transport of its own ignores the proxy variables.
    proxy = Forwarding(b"x" * size)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{port}")
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, proxy.serve)
        client = http_client(headers={}, timeout=httpx2.Timeout(10.0), max_message_bytes=LIMIT)
        async with client:
            if size > LIMIT:
                with pytest.raises(OversizedResponse, match="passed 1000 bytes"):
                    await client.get("http://upstream.invalid/mcp")
            else:
                response = await client.get("http://upstream.invalid/mcp")
                assert response.content == proxy.body
        group.cancel_scope.cancel()
    assert proxy.lines == [b"GET http://upstream.invalid/mcp HTTP/1.1"]


def sdk_facing(redirects: list[str]) -> httpx2.MockTransport:
    """A streamable-HTTP MCP server (2025-11-25, JSON answers) whose ``tools/call`` of
    ``moved`` at ``/mcp`` answers a same-origin 307 to ``/next`` with an endless body
    dressed as an event stream, and of ``gzipped`` an endless gzip event stream; every
    other call answers ``ok``."""

    class Endless(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for _ in range(4096):  # 256 MiB: a read that is not dropped fails the test
                yield b"x" * 65536
            raise AssertionError("the redirect's body was read")

    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            return httpx2.Response(405)
        message = json.loads(request.content)
        if "id" not in message:
            return httpx2.Response(202)
        reply: dict[str, object] = {"jsonrpc": "2.0", "id": message["id"]}
        if message["method"] == "initialize":
            info = {"name": "moving", "version": "1"}
            reply["result"] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": info,
            }
        elif message["method"] != "tools/call":
            reply["result"] = {"tools": []}
        elif message["params"]["name"] == "gzipped":
            headers = {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
            return httpx2.Response(200, headers=headers, stream=Endless())
        elif message["params"]["name"] == "moved" and request.url.path == "/mcp":
            redirects.append(request.url.path)
            headers = {"Location": "/next", "Content-Type": "text/event-stream"}
            return httpx2.Response(307, headers=headers, stream=Endless())
        else:
            reply["result"] = {"content": [{"type": "text", "text": f"ok at {request.url.path}"}]}
        return httpx2.Response(200, json=reply)

    return httpx2.MockTransport(answer)


async def test_the_sdk_follows_a_redirect_without_reading_its_endless_body() -> None:
    redirects: list[str] = []
    http = httpx2.AsyncClient(transport=sdk_facing(redirects), event_hooks=bounding_hooks(LIMIT))
    async with http:
        transport = streamable_http_client("http://upstream/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            with anyio.fail_after(20):
                moved = await client.call_tool("moved", {})
                after = await client.call_tool("echo", {})
    assert redirects == ["/mcp"]
    assert [block.text for block in moved.content] == ["ok at /next"]  # type: ignore[union-attr]
    assert [block.text for block in after.content] == ["ok at /mcp"]  # type: ignore[union-attr]


async def test_an_encoded_event_stream_fails_its_call_naming_the_encoding() -> None:
    http = httpx2.AsyncClient(transport=sdk_facing([]), event_hooks=bounding_hooks(LIMIT))
    async with http:
        transport = streamable_http_client("http://upstream/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            with anyio.fail_after(20):
                with pytest.raises(MCPError, match=r"encoded \('gzip'\) although identity"):
                    await client.call_tool("gzipped", {})
                after = await client.call_tool("echo", {})
    assert [block.text for block in after.content] == ["ok at /mcp"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("charset", "first"),
    [("utf-7", b"+"), ("unicode_escape", b"\\N{"), ("bz2", b"")],
    ids=["utf-7 shift never closed", "unicode_escape name never closed", "bz2"],
)
async def test_an_event_streams_charset_cannot_hold_or_inflate_its_body(
    charset: str, first: bytes
) -> None:
    # The SDK reads an event stream as text in its declared charset: a utf-7 shift
    # or a \N{ escape never closed would have the decoder hold the whole body before
    # the per-event bound saw a character; bz2 (run under -O) would inflate it. An
    # event stream is UTF-8 (WHATWG).
    events = Chunks(first, *[b"A" * 600] * 8)
    seen: list[httpx2.Request] = []
    headers = {"Content-Type": f"text/event-stream; charset={charset}"}
    async with (
        client_of(events, headers, seen) as client,
        client.stream("GET", "http://upstream/mcp") as response,
    ):
        assert response.encoding == "utf-8"
        source = httpx2.EventSource(response, max_event_size=LIMIT)
        with pytest.raises(httpx2.SSEError, match="exceeded the 1000 byte limit"):
            async for _ in source:
                pass
    assert events.read <= 3
