"""``opgate.mcp._exact`` end to end: raw JSON-RPC bytes to ``opgate serve`` over stdio and HTTP.

The wire is exact in both eras: arguments and answers reach opgate's rules as sent, and
results and prompts are measured (``_wire.wire_size``) as their transport writes them.

A hostile or careful client writes JSON the SDK's own encoder never writes (repeated
member names, 17 significant digits, ``1e400``), so these tests speak raw JSON-RPC:
lines over a subprocess's stdin and stdout, and raw HTTP POSTs with httpx. The server
is ``tests.mcp_wire_catalog:build_registry`` (16 KiB results, 4 KiB definitions) with
``wire.echo`` also pinned as its own tool.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import httpx2
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from opgate._json import number_text, parse

from conftest import ROOT, free_port, serve_environment
from mcp_wire_catalog import ESCAPED_DESCRIPTION, HUGE, LIMITS, TINY, WIDE_TEXT

pytestmark = pytest.mark.anyio

SERVE = [
    *("python", "-m", "opgate", "serve", "tests.mcp_wire_catalog:build_registry"),
    *("--pin", "wire.echo"),
]
ERAS = ("2025-11-25", "2026-07-28")
TRANSPORTS = ("stdio", "http")
BUDGET = LIMITS.result_bytes
#: What an ``inspect`` reply adds to its two copies of the definition (docs/mcp.md).
INSPECT_FRAMING = 1024


def meta(era: str) -> str:
    if era != "2026-07-28":
        return ""
    return (
        ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}'
    )


def initialize(era: str) -> str:
    return (
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
        + json.dumps(era)
        + ',"capabilities":{"elicitation":'
        + ("{}" if era == "2025-06-18" else '{"form":{}}')  # that revision's capability
        + "},"
        + '"clientInfo":{"name":"raw","version":"0"}}}'
    )


INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'


@dataclass
class Exchange:
    """One ``tools/call`` as sent: the server's requests in it and its final response."""

    requests: list[bytes] = field(default_factory=list)
    response: bytes = b""

    @property
    def result(self) -> dict[str, Any]:
        message = json.loads(self.response)
        assert "result" in message, message
        return message["result"]  # type: ignore[no-any-return]

    @property
    def text(self) -> str:
        return str(self.result["content"][0]["text"])


class Raw(Protocol):
    era: str

    async def call(self, params: str, answer: str | None = None) -> Exchange:
        """``tools/call`` with raw ``params`` text (without its ``_meta``); a legacy
        ``elicitation/create`` in it is answered with the raw ``answer`` result."""


def call_text(ident: int, params: str, era: str) -> str:
    assert params.endswith("}")
    head = '{"jsonrpc":"2.0","id":' + str(ident) + ',"method":"tools/call","params":'
    return head + params[:-1] + meta(era) + "}}"


def answer_text(request: bytes, answer: str | None) -> str:
    ident = json.dumps(json.loads(request)["id"])
    return '{"jsonrpc":"2.0","id":' + ident + ',"result":' + (answer or '{"action":"cancel"}') + "}"


# -- stdio -----------------------------------------------------------------------


class RawStdio:
    def __init__(self, process: Process, era: str) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.era = era
        self.lines = BufferedByteReceiveStream(process.stdout)
        self.next_id = 1
        #: Called with each server request before it is answered (a meddling peer).
        self.meddler: Callable[[bytes], Awaitable[None]] | None = None

    async def send(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(text.encode("utf-8") + b"\n")

    async def receive(self) -> bytes:
        return await self.lines.receive_until(b"\n", 1 << 24)

    async def call(self, params: str, answer: str | None = None) -> Exchange:
        ident, self.next_id = self.next_id, self.next_id + 1
        await self.send(call_text(ident, params, self.era))
        exchange = Exchange()
        while True:
            line = await self.receive()
            message = json.loads(line)
            if "method" in message and "id" in message:
                exchange.requests.append(line)
                if self.meddler is not None:
                    await self.meddler(line)
                await self.send(answer_text(line, answer))
            elif message.get("id") == ident:
                exchange.response = line
                return exchange


@asynccontextmanager
async def stdio_client(era: str) -> AsyncIterator[RawStdio]:
    command = [str(ROOT / ".venv/bin/python"), *SERVE[1:]]
    async with await anyio.open_process(
        command, cwd=ROOT, env=serve_environment(), stderr=subprocess.DEVNULL
    ) as process:
        client = RawStdio(process, era)
        try:
            if era != "2026-07-28":
                await client.send(initialize(era))
                assert b'"result"' in await client.receive()
                await client.send(INITIALIZED)
            yield client
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()


# -- HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wire_server() -> Iterator[str]:
    port = free_port()
    command = [str(ROOT / ".venv/bin/python"), *SERVE[1:], "--http", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        command, cwd=ROOT, env=serve_environment(), stdout=subprocess.DEVNULL
    )
    try:
        for _ in range(300):
            try:
                httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx2.TransportError:
                if process.poll() is not None:
                    raise AssertionError("the server exited") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def sse_messages(body: bytes) -> list[bytes]:
    if body.lstrip().startswith(b"{"):
        return [body]
    return [
        line[len(b"data:") :].strip()
        for line in body.splitlines()
        if line.startswith(b"data:") and line[len(b"data:") :].strip()
    ]


class RawHTTP:
    def __init__(self, http: httpx2.AsyncClient, url: str, era: str) -> None:
        self.http = http
        self.url = url
        self.era = era
        self.next_id = 1
        #: Called with each server request before it is answered (a meddling peer).
        self.meddler: Callable[[bytes], Awaitable[None]] | None = None

    async def call(self, params: str, answer: str | None = None) -> Exchange:
        ident, self.next_id = self.next_id, self.next_id + 1
        headers = {}
        if self.era == "2026-07-28":
            name = json.loads(params)["name"]
            headers = {"mcp-protocol-version": self.era, "mcp-method": "tools/call"}
            headers["mcp-name"] = name
        exchange = Exchange()
        body = call_text(ident, params, self.era).encode("utf-8")
        async with self.http.stream("POST", self.url, content=body, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *events, buffer = buffer.split(b"\r\n\r\n") if b"\r\n\r\n" in buffer else [buffer]
                for event in events:
                    for message in sse_messages(event):
                        if await self._handle(message, ident, exchange, answer):
                            return exchange
            for message in sse_messages(buffer):
                if await self._handle(message, ident, exchange, answer):
                    return exchange
        raise AssertionError("no response")

    async def _handle(self, raw: bytes, ident: int, exchange: Exchange, answer: str | None) -> bool:
        message = json.loads(raw)
        if "method" in message and "id" in message:
            exchange.requests.append(raw)
            if self.meddler is not None:
                await self.meddler(raw)
            reply = await self.http.post(self.url, content=answer_text(raw, answer).encode())
            assert reply.status_code == 202
            return False
        if message.get("id") == ident:
            exchange.response = raw
            return True
        return False


@asynccontextmanager
async def http_client(url: str, era: str) -> AsyncIterator[RawHTTP]:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        if era != "2026-07-28":
            response = await http.post(url, content=initialize(era).encode())
            assert response.status_code == 200
            http.headers["mcp-session-id"] = response.headers["mcp-session-id"]
            http.headers["mcp-protocol-version"] = era
            await http.post(url, content=INITIALIZED.encode())
        yield RawHTTP(http, url, era)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def raw_client(
    transport: str, era: str, request: pytest.FixtureRequest
) -> AsyncIterator[Raw]:
    with anyio.fail_after(60):
        if transport == "stdio":
            async with stdio_client(era) as client:
                yield client
        else:
            url = request.getfixturevalue("wire_server")
            async with http_client(url, era) as client:
                yield client


def invoke(name: str, arguments: str) -> str:
    return (
        '{"name":"invoke","arguments":{"name":'
        + json.dumps(name)
        + ',"arguments":'
        + arguments
        + "}}"
    )


# -- 1. requests --------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_arguments_reach_validation_as_sent(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    """Repeated names fail with their pointer, numbers are exact (no double between the
    agent and the schema), ``1e400`` is a number and ``1e5000`` is out of profile."""
    async with raw_client(transport, era, request) as client:
        repeated = await client.call(invoke("wire.echo", '{"a":1,"a":2}'))
        assert repeated.result["isError"] is True
        assert repeated.text == (
            "invalid_arguments: arguments: duplicate object member name 'a' (at /a)"
        )
        close = await client.call(invoke("wire.bounded", '{"n":0.30000000000000001}'))
        assert close.text == "invalid_arguments: arguments: /n: exceeds maximum 0.3"
        edge = await client.call(invoke("wire.bounded", '{"n":0.3}'))
        assert edge.text == '{"n":0.3}'
        large = await client.call(invoke("wire.echo", '{"n":1e400, "m":0.30000000000000001}'))
        assert large.result["isError"] is False
        assert large.text == '{"m":0.30000000000000001,"n":1e+400}'
        assert b'"structuredContent":{"m":0.30000000000000001,"n":1e+400}' in large.response
        beyond = await client.call(invoke("wire.echo", '{"n":1e5000}'))
        assert beyond.text == (
            "invalid_arguments: arguments: number exceeds the numeric work profile "
            "(|written exponent| ≤ 4096) (at /n)"
        )
        pinned = await client.call('{"name":"wire.echo","arguments":{"b":true,"b":false}}')
        assert pinned.text.endswith("duplicate object member name 'b' (at /b)")
        for absent in ("null", "{}"):  # arguments that are null mean none, as before
            nothing = await client.call(invoke("wire.echo", absent))
            assert nothing.text == "{}"
            pinned = await client.call('{"name":"wire.echo","arguments":' + absent + "}")
            assert pinned.text == "{}"
        protocol = await client.call(
            '{"name":"search","arguments":{"query":"nothing"},"arguments":{"query":"bounded"}}'
        )  # the protocol's own fields keep the SDK's handling: the last one wins
        assert protocol.result["structuredContent"]["items"][0]["name"] == "wire.bounded"


# -- 2. results ---------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_structured_results_carry_the_validated_numbers(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    async with raw_client(transport, era, request) as client:
        exchange = await client.call(invoke("wire.numbers", "{}"))
    huge = number_text(HUGE)  # 1.111…15e+399, canonical
    assert f'"structuredContent":{{"huge":{huge},"tiny":1e-400}}'.encode() in exchange.response
    message = parse(exchange.response)
    assert isinstance(message, dict)
    result = message["result"]
    assert isinstance(result, dict)
    assert result["structuredContent"] == {"huge": HUGE, "tiny": TINY}


# -- 3. prompts as sent ---------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_prompts_are_sent_in_the_size_they_were_counted(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    """A form of 24 ``1e4000`` bounds goes out with ``1e+4000``, well inside the budget."""
    async with raw_client(transport, era, request) as client:
        exchange = await client.call(invoke("wire.wide_form", "{}"))
    if era == "2026-07-28":
        [sent] = [exchange.response]
        assert exchange.result["resultType"] == "input_required"
    else:
        [sent] = exchange.requests
        assert json.loads(sent)["method"] == "elicitation/create"
    assert sent.count(b'"maximum":1e+4000') == 24
    assert len(sent) < 2048 < BUDGET


@pytest.mark.parametrize("era", ERAS)
async def test_a_result_is_measured_as_its_transport_writes_it(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    """The SDK's 2026-07-28 HTTP encoder writes ASCII only: 12,000 bytes of UTF-8 text are
    24,000 bytes there, over the 16 KiB budget; elsewhere they are sent as they are."""
    async with raw_client(transport, era, request) as client:
        exchange = await client.call(invoke("wire.wide_text", "{}"))
    if transport == "http" and era == "2026-07-28":
        assert exchange.text.startswith("invalid_result: the result is ")
        assert exchange.text.endswith(f"bytes as sent, over the result budget of {BUDGET}")
    else:
        assert exchange.text == WIDE_TEXT
        assert len(exchange.response) < BUDGET


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_over_the_budget_as_sent_is_refused(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    """A form message of 13.5 KB of UTF-8 is 27 KB as 2026-07-28 HTTP writes it: that
    prompt is refused as ``invalid_result`` instead of being sent; elsewhere it is sent."""
    async with raw_client(transport, era, request) as client:
        exchange = await client.call(invoke("wire.wide_prompt", "{}"))
    if transport == "http" and era == "2026-07-28":
        assert exchange.text.startswith("invalid_result: the prompt is ")
        assert exchange.text.endswith(f"bytes as sent, over the result budget of {BUDGET}")
        return
    [sent] = exchange.requests if era != "2026-07-28" else [exchange.response]
    assert len(sent) < BUDGET
    assert "\u754c" * 4500 in sent.decode()


@pytest.mark.parametrize("era", ERAS)
async def test_a_handler_that_prints_or_reads_stdin_never_touches_the_stdio_wire(era: str) -> None:
    with anyio.fail_after(60):
        async with stdio_client(era) as client:
            noisy = await client.call(invoke("wire.noisy", "{}"))
            assert noisy.text == "read ''"
            after = await client.call(invoke("wire.echo", '{"n":1}'))
            assert after.text == '{"n":1}'


# -- answers ------------------------------------------------------------------------


async def answered(client: Raw, content: str) -> Exchange:
    """``wire.number_form`` answered with the raw ``content``, in the client's era."""
    answer = '{"action":"accept","content":' + content + "}"
    first = await client.call(invoke("wire.number_form", "{}"), answer)
    if client.era != "2026-07-28":
        assert len(first.requests) == 1
        return first
    state = json.dumps(first.result["requestState"])
    params = (
        '{"name":"invoke","arguments":{"name":"wire.number_form"},"requestState":'
        + state
        + ',"inputResponses":{"opgate":'
        + answer
        + "}}"
    )
    return await client.call(params)


@pytest.mark.parametrize("era", ERAS)
async def test_answers_reach_the_form_checks_as_sent(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    async with raw_client(transport, era, request) as client:
        close = await answered(client, '{"n":0.30000000000000001}')
        assert close.text == "invalid_request: answers: answer field 'n': exceeds maximum 0.3"
        repeated = await answered(client, '{"n":0.1,"n":0.2}')
        assert repeated.text.endswith("duplicate object member name 'n' (at /n)")
        tiny = await answered(client, '{"n":1e-400}')
        assert tiny.text == '{"n":1e-400}'
        assert b'"structuredContent":{"n":1e-400}' in tiny.response


# -- 4. the client's profile ----------------------------------------------------------


async def test_a_2025_06_18_client_is_sent_only_forms_it_can_show(
    transport: str, request: pytest.FixtureRequest
) -> None:
    async with raw_client(transport, "2025-06-18", request) as client:
        rich = await client.call(invoke("wire.rich_form", "{}"))
        assert rich.requests == []
        assert rich.result["structuredContent"]["error"]["code"] == "confirmation_required"
        assert "MCP 2025-06-18 clients cannot show" in rich.text
        assert "'colours' is a multiselect" in rich.text
        plain = await client.call(invoke("wire.plain_form", "{}"))
        [sent] = plain.requests
        assert json.loads(sent)["params"]["requestedSchema"]["properties"]["ok"] == {
            "title": "Confirm",
            "type": "boolean",
        }
    async with raw_client(transport, "2025-11-25", request) as client:
        assert len((await client.call(invoke("wire.rich_form", "{}"))).requests) == 1


# -- 5. inspect ---------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_an_inspect_reply_is_bounded_by_twice_the_definition_budget(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    async with raw_client(transport, era, request) as client:
        exchange = await client.call('{"name":"inspect","arguments":{"name":"wire.wide_schema"}}')
    assert exchange.result["isError"] is False
    assert exchange.response.count(b'"maximum":1e+4000') == 40  # structured
    assert exchange.response.count(b'\\"maximum\\":1e+4000') == 40  # its text copy
    assert len(exchange.response) <= 2 * LIMITS.definition_bytes + INSPECT_FRAMING
    message = parse(exchange.response)
    assert isinstance(message, dict)
    assert isinstance(message["result"], dict)
    [text] = message["result"]["content"]  # type: ignore[misc]
    assert message["result"]["structuredContent"] == parse(text["text"])  # type: ignore[index]


@pytest.mark.parametrize("era", ERAS)
async def test_an_inspect_reply_of_escaped_texts_is_bounded_by_the_definition_budget(
    transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    """The text copy escapes the structured JSON once more; 2026-07-28 HTTP escapes
    non-ASCII characters too (up to six bytes of reply per counted byte)."""
    async with raw_client(transport, era, request) as client:
        exchange = await client.call('{"name":"inspect","arguments":{"name":"wire.escaped_text"}}')
    assert exchange.result["isError"] is False
    assert exchange.result["structuredContent"]["description"] == ESCAPED_DESCRIPTION
    factor = 6 if transport == "http" and era == "2026-07-28" else 3
    assert len(exchange.response) <= factor * LIMITS.definition_bytes + INSPECT_FRAMING


async def test_another_sessions_response_never_answers_a_prompt(wire_server: str) -> None:
    """Mallory posts a response under the id of Alice's elicitation to her own session
    first: the SDK drops it there, and opgate never takes its content for Alice's."""
    async with (
        http_client(wire_server, "2025-11-25") as alice,
        http_client(wire_server, "2025-11-25") as mallory,
    ):

        async def meddle(request: bytes) -> None:
            forged = answer_text(request, '{"action":"accept","content":{"n":0.1}}')
            reply = await mallory.http.post(wire_server, content=forged.encode())
            assert reply.status_code == 202

        alice.meddler = meddle
        answer = '{"action":"accept","content":{"n":0.2}}'
        with anyio.fail_after(60):
            exchange = await alice.call(invoke("wire.number_form", "{}"), answer)
    assert exchange.text == '{"n":0.2}'


@pytest.mark.parametrize("era", ERAS)
async def test_pipelined_calls_each_get_their_own_raw_arguments(era: str) -> None:
    """Lines sent back to back are in flight together: each call reads its own text."""
    with anyio.fail_after(60):
        async with stdio_client(era) as client:
            for ident in range(1, 21):
                arguments = '{"n":%d.50}' % ident  # noqa: UP031 - raw JSON text
                await client.send(call_text(ident, invoke("wire.echo", arguments), era))
            seen = {}
            while len(seen) < 20:
                message = json.loads(await client.receive())
                seen[message["id"]] = message["result"]["content"][0]["text"]
    assert seen == {ident: '{"n":%d.5}' % ident for ident in range(1, 21)}  # noqa: UP031


REFUSED_ANSWERS = (
    '{"jsonrpc":"1.0","id":%s,"result":{"action":"accept","content":{"n":0.1}}}',
    '{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"n":0.1}}}x',
    '{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"n":0.1}},"result":7}',
    '{"jsonrpc":"2.0","id":%s,"method":"ping","result":{"action":"accept","content":{"n":0.1}}}',
)


@pytest.mark.parametrize("refused", REFUSED_ANSWERS)
async def test_a_prompt_answered_twice_is_never_answered_with_the_other_text(
    transport: str, refused: str, request: pytest.FixtureRequest
) -> None:
    """A client first sends a message under the elicitation's id that the SDK refuses,
    then a valid response: the handler never gets the refused message's content."""
    async with raw_client(transport, "2025-11-25", request) as client:

        async def meddle(sent: bytes) -> None:
            ident = json.dumps(json.loads(sent)["id"])
            text = refused % ident
            if isinstance(client, RawHTTP):
                await client.http.post(client.url, content=text.encode())
            else:
                assert isinstance(client, RawStdio)
                await client.send(text)

        client.meddler = meddle  # type: ignore[attr-defined]
        exchange = await client.call(
            invoke("wire.number_form", "{}"), '{"action":"accept","content":{"n":0.2}}'
        )
    assert exchange.text == (
        "invalid_request: the client sent more than one response to the prompt: answer it once"
    )
