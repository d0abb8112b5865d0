"""opgate.openapi against an upstream API that misbehaves (``tests/hostile_upstream.py``).

Real HTTP on 127.0.0.1 (uvicorn, or a raw socket for what no ASGI server sends):
answers that echo the host's credentials in every encoding, redirects that leave the
base URL once decoded, JSON nested beyond the structured-content limit, bodies that
never end or inflate, headers that never end.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client

from opgate import Completed, Failed, InputMode, InputResponse, Pending, Registry
from opgate.mcp import GatewayServer
from opgate.openapi import Catalog, build_catalog

from hostile_upstream import ESCAPES, Hostile, document, serve_hostile, serve_raw
from openapi_credentials import API_KEY, HEADERS, TOKEN, encodings

pytestmark = pytest.mark.anyio


class Policy:
    def scope_key(self, ctx: Any) -> str:
        return "alice"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    with serve_hostile() as served:
        yield served


@pytest.fixture
async def api(hostile: Hostile) -> AsyncIterator[tuple[Catalog, Registry]]:
    hostile.received.clear()
    catalog = build_catalog(document(), base_url=hostile.base_url, headers=HEADERS, timeout=3)
    yield catalog, catalog.registry(Policy())
    await catalog.aclose()


def assert_no_credential(text: str) -> None:
    for secret in (TOKEN, API_KEY, f"Bearer {TOKEN}"):
        for form in encodings(secret):
            assert form not in text, (form, text[:400])


def everything(outcome: Any) -> str:
    """Every text an outcome shows: blocks, structured content, message, diagnostics."""
    if isinstance(outcome, Failed):
        return outcome.failure.message + json.dumps(outcome.failure.diagnostics)
    assert isinstance(outcome, Completed), outcome
    parts = [
        getattr(block, "text", None) or getattr(block, "uri", None) or repr(block)
        for block in outcome.result.content
    ]
    parts.append((outcome.result.structured_json or b"").decode())
    return "\n".join(parts)


# -- 12: credentials never come back ------------------------------------------------


async def test_a_success_that_echoes_the_headers_shows_no_credential(
    api: tuple[Catalog, Registry],
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "echo", {})
    assert isinstance(outcome, Completed), outcome
    seen = outcome.result.structured["headers"]
    assert seen["authorization"] == "[redacted]"
    assert seen["x-api-key"] == "[redacted]"
    assert seen["host"].startswith("127.0.0.1:")  # the rest of the echo is intact
    assert_no_credential(everything(outcome))
    text = outcome.result.content[0].text
    assert json.loads(text) == outcome.result.structured  # the copy is of the redacted value


async def test_an_error_that_echoes_the_headers_shows_no_credential(
    api: tuple[Catalog, Registry],
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "echo_error", {})
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.message.startswith("HTTP 400 Bad Request: ")
    assert '"authorization":"[redacted]"' in outcome.failure.message
    assert_no_credential(everything(outcome))


async def test_credentials_encoded_in_a_text_answer_are_redacted(
    api: tuple[Catalog, Registry],
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "echo_encoded", {})
    shown = everything(outcome)
    assert_no_credential(shown)
    assert shown.count("[redacted]") >= 6


async def test_credentials_written_as_json_escapes_are_redacted(
    api: tuple[Catalog, Registry],
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "echo_escaped", {})
    assert isinstance(outcome, Completed), outcome
    assert outcome.result.structured.count("[redacted]") == 2
    assert_no_credential(everything(outcome))


async def test_a_credential_in_a_followed_redirect_is_not_linked(
    api: tuple[Catalog, Registry],
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "echo_in_reason", {})
    assert isinstance(outcome, Completed), outcome
    assert_no_credential(everything(outcome))
    assert "application/octet-stream response" in outcome.result.content[0].text


async def test_defaults_of_the_hosts_own_client_are_redacted(hostile: Hostile) -> None:
    """A client's default query parameter and header are credentials: never echoed back."""
    query_key, tenant_key = "query-KEY-0123456789", "tenant-KEY-9876543210"
    own = httpx2.AsyncClient(params={"api_key": query_key}, headers={"X-Tenant": tenant_key})
    catalog = build_catalog(document(), base_url=hostile.base_url, client=own)
    try:
        registry = catalog.registry(Policy())
        echoed = await registry.invoke(None, "echo", {})
        assert isinstance(echoed, Completed), echoed
        assert echoed.result.structured["query"] == "api_key=[redacted]"
        linked = await registry.invoke(None, "echo_link", {})
        for outcome in (echoed, linked, await registry.invoke(None, "echo_error", {})):
            shown = everything(outcome)
            assert query_key not in shown
            assert tenant_key not in shown
        assert "holds a credential, not shown" in linked.result.content[0].text
    finally:
        await catalog.aclose()
        await own.aclose()


async def test_basic_credentials_are_redacted_decoded_too(hostile: Hostile) -> None:
    pair = "alice:correct-horse"
    basic = {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
    catalog = build_catalog(document(), base_url=hostile.base_url, headers=basic)
    try:
        registry = catalog.registry(Policy())
        shown = everything(await registry.invoke(None, "echo_encoded", {}))
        assert basic["Authorization"] not in shown
        shown = everything(await registry.invoke(None, "echo", {}))
        assert "Y29ycmVjdC1ob3Jz" not in shown
        assert basic["Authorization"][6:] not in shown
    finally:
        await catalog.aclose()


async def test_no_credential_in_the_mcp_reply(api: tuple[Catalog, Registry]) -> None:
    _, registry = api
    async with Client(GatewayServer(registry).sdk_server, mode="legacy") as client:
        for name in ("echo", "echo_error", "echo_encoded", "echo_escaped", "echo_in_reason"):
            reply = await client.call_tool("invoke", {"name": name, "arguments": {}})
            assert_no_credential(reply.model_dump_json())


async def test_a_cookie_one_caller_got_is_never_sent_for_another(hostile: Hostile) -> None:
    def per_principal(ctx: Any) -> dict[str, str]:
        return {"X-Api-Key": f"key-of-{ctx}"}

    catalog = build_catalog(document(), base_url=hostile.base_url, headers=per_principal)
    try:
        registry = catalog.registry(Policy())
        hostile.received.clear()
        assert isinstance(await registry.invoke("alice", "set_cookie", {}), Completed)
        echoed = await registry.invoke("bob", "echo", {})
        assert isinstance(echoed, Completed), echoed
        assert "cookie" not in echoed.result.structured["headers"]
        assert all("cookie" not in r.headers for r in hostile.received)
        assert len(catalog._upstream.client().cookies) == 0  # nothing kept either
    finally:
        await catalog.aclose()


async def test_a_cookie_the_host_gives_is_the_only_one_sent(hostile: Hostile) -> None:
    catalog = build_catalog(
        document(), base_url=hostile.base_url, headers={"Cookie": "host-session=1234"}
    )
    try:
        registry = catalog.registry(Policy())
        hostile.received.clear()
        await registry.invoke(None, "set_cookie", {})
        await registry.invoke(None, "echo", {})
        assert [r.headers.get("cookie") for r in hostile.received] == ["host-session=1234"] * 2
    finally:
        await catalog.aclose()


# -- 13: redirects -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_a_redirect_that_leaves_the_base_url_is_not_followed(
    api: tuple[Catalog, Registry], hostile: Hostile, name: str
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, f"escape_{name}", {})
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.message.startswith("HTTP 302 Found: the API redirected")
    assert outcome.failure.diagnostics == {"status": 302}
    assert [r.raw_path for r in hostile.received] == [f"/api/escape_{name}"]
    assert "secret" not in outcome.failure.message


async def test_a_redirect_inside_the_base_url_is_followed_with_the_credentials(
    api: tuple[Catalog, Registry], hostile: Hostile
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "inside", {})
    assert isinstance(outcome, Completed), outcome
    assert [r.raw_path for r in hostile.received] == ["/api/inside", "/api/echo"]
    assert hostile.received[1].headers["x-api-key"] == API_KEY


async def test_every_request_with_credentials_stays_under_the_base_path(
    api: tuple[Catalog, Registry], hostile: Hostile
) -> None:
    _, registry = api
    for name in ESCAPES:
        await registry.invoke(None, f"escape_{name}", {})
    climbs = ("../../admin", "..\\..\\admin", "%2e%2e", "..;", "x/../../admin", "%252e%252e")
    for value in climbs:
        outcome = await registry.invoke(None, "files", {"name": value})
        assert isinstance(outcome, Failed), (value, outcome)
        assert "leave the API's base URL" in outcome.failure.message
    for value in ("a/b", "..x", "x..", "%", "%zz", "a;b", "http://evil.invalid/"):
        outcome = await registry.invoke(None, "files", {"name": value})
        assert isinstance(outcome, Completed), (value, outcome)
    assert hostile.received
    for request in hostile.received:
        assert request.path.startswith("/api/"), request
        assert request.headers.get("host") == hostile.origin.removeprefix("http://")


async def test_a_redirect_loop_ends_with_a_clear_failure(
    api: tuple[Catalog, Registry], hostile: Hostile
) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "loop", {})
    assert isinstance(outcome, Failed), outcome
    assert "redirected more than 5 times" in outcome.failure.message
    assert len(hostile.received) == 6


# -- 14: JSON nested too deeply ------------------------------------------------------


async def test_deep_json_falls_back_to_text(api: tuple[Catalog, Registry]) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "deep_json", {})
    assert isinstance(outcome, Completed), outcome
    assert not outcome.result.has_structured
    assert outcome.result.content[0].text == "[" * 800 + "]" * 800


async def test_deep_json_against_an_output_schema_says_why(hostile: Hostile) -> None:
    spec = document()
    spec["paths"]["/deep_json"]["get"]["responses"]["200"]["content"] = {
        "application/json": {"schema": {"type": "array"}}
    }
    catalog = build_catalog(spec, base_url=hostile.base_url, output_schemas=True)
    try:
        outcome = await catalog.registry(Policy()).invoke(None, "deep_json", {})
        assert isinstance(outcome, Failed), outcome
        assert "nested deeper than 128 levels" in outcome.failure.message
    finally:
        await catalog.aclose()


async def test_a_confirmed_call_answered_with_deep_json_is_recorded_for_replay(
    api: tuple[Catalog, Registry], hostile: Hostile
) -> None:
    _, registry = api
    arguments = {"body": {"amount": 1}}
    pending = await registry.invoke(None, "transfer", arguments, input_support={InputMode.FORM})
    assert isinstance(pending, Pending), pending
    resume = (pending.continuation, InputResponse.accept({"confirm": True}))
    done = await registry.invoke(
        None, "transfer", arguments, input_support={InputMode.FORM}, resume=resume
    )
    assert isinstance(done, Completed), done
    again = await registry.invoke(
        None, "transfer", arguments, input_support={InputMode.FORM}, resume=resume
    )
    assert isinstance(again, Completed), again
    assert "already sent for this confirmation; not sent again" in again.result.content[0].text
    assert again.result.content[1].text == "[" * 800 + "]" * 800
    assert [r.method for r in hostile.received] == ["POST"]


class _Exploding(httpx2.AsyncBaseTransport):
    """A transport that fails in a way no HTTP error mapping expects."""

    def __init__(self) -> None:
        self.calls = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        raise RuntimeError("a bug below the HTTP client")


async def test_an_unexpected_error_after_sending_began_is_recorded() -> None:
    transport = _Exploding()
    client = httpx2.AsyncClient(transport=transport)
    catalog = build_catalog(
        document(), base_url="http://127.0.0.1:9/api", headers=HEADERS, client=client
    )
    registry = catalog.registry(Policy())
    arguments = {"body": {"amount": 1}}
    try:
        pending = await registry.invoke(None, "transfer", arguments, input_support={InputMode.FORM})
        assert isinstance(pending, Pending), pending
        resume = (pending.continuation, InputResponse.accept({"confirm": True}))
        failed = await registry.invoke(
            None, "transfer", arguments, input_support={InputMode.FORM}, resume=resume
        )
        assert isinstance(failed, Failed), failed
        assert failed.failure.code.value == "internal"
        again = await registry.invoke(
            None, "transfer", arguments, input_support={InputMode.FORM}, resume=resume
        )
        assert isinstance(again, Failed), again
        assert "is not used again" in again.failure.message
        assert "may have reached the API" in again.failure.message
        assert "outcome is not known here" not in again.failure.message
        assert transport.calls == 1
    finally:
        await client.aclose()


# -- hostile answers ------------------------------------------------------------------


async def test_a_gzip_bomb_is_cut_at_the_read_limit(api: tuple[Catalog, Registry]) -> None:
    _, registry = api
    started = time.monotonic()
    outcome = await registry.invoke(None, "gzip_bomb", {})
    assert isinstance(outcome, Completed), outcome
    assert outcome.result.content[0].text.endswith(
        "[cut: the response is longer than the result budget]"
    )
    assert time.monotonic() - started < 2.5


async def test_a_body_that_never_ends_is_cut(api: tuple[Catalog, Registry]) -> None:
    _, registry = api
    outcome = await registry.invoke(None, "endless", {})
    assert isinstance(outcome, Completed), outcome
    assert outcome.result.content[0].text.endswith(
        "[cut: the response is longer than the result budget]"
    )


async def test_a_body_that_drips_times_out(api: tuple[Catalog, Registry]) -> None:
    _, registry = api
    started = time.monotonic()
    outcome = await registry.invoke(None, "drip", {})
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.message.startswith("the API did not answer within 3 s")
    assert time.monotonic() - started < 5


def _answer_with(raw: bytes) -> Any:
    def answer(conn: socket.socket) -> None:
        conn.sendall(raw)

    return answer


async def echo_from(raw: bytes, headers: dict[str, str]) -> Any:
    """The outcome of ``echo`` from an upstream that answers every request with ``raw``."""
    with serve_raw(_answer_with(raw)) as base_url:
        catalog = build_catalog(document(), base_url=base_url, headers=headers, timeout=3)
        try:
            return await catalog.registry(Policy()).invoke(None, "echo", {})
        finally:
            await catalog.aclose()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n", "not valid HTTP"),
        (b"NOT HTTP AT ALL\r\n\r\n", "not valid HTTP"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=rot13\r\n"
            b"Content-Length: 5\r\n\r\nhello",
            "hello",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: 6\r\n\r\nab\xff\xfecd",
            "ab\ufffd\ufffdcd",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b'Content-Length: 11\r\n\r\n["\\ud800x"]',
            '["\\ud800x"]',
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=unicode_escape\r\n"
            b"Content-Length: 8\r\n\r\n\\ud800ab",
            "ab",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 4\r\n\r\nxxxx",
            "could not be decoded",
        ),
    ],
    ids=["huge header", "not http", "rot13", "invalid utf-8", "lone surrogate", "escapes", "br"],
)
async def test_malformed_answers_end_in_a_clear_outcome(raw: bytes, expected: str) -> None:
    outcome = await echo_from(raw, HEADERS)
    shown = everything(outcome)
    assert expected in shown, shown
    assert "\ud800" not in shown


HEX_KEY = "0123456789abcdef0123456789abcdef"  # lower-case: survives lower-casing as it is


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 400 " + b"x" * 185 + API_KEY.encode() + b"\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: "
        + b"x" * 30
        + API_KEY.encode()
        + b"\r\nContent-Length: 4\r\n\r\nxxxx",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: "
        + HEX_KEY.encode()
        + b"\r\nContent-Length: 4\r\n\r\nxxxx",
        b"HTTP/1.1 200 OK\r\nContent-Type: application/"
        + HEX_KEY.encode()
        + b"\r\nContent-Length: 4\r\n\r\n\x00\x01\x02\x03",
        b"HTTP/1.1 200 OK\r\nContent-Type: application/"
        + b"x" * 80
        + API_KEY.encode()
        + b"\r\nContent-Length: 4\r\n\r\n\x00\x01\x02\x03",
    ],
    ids=["reason cut", "encoding cut", "encoding lower-cased", "link media type", "type cut"],
)
async def test_a_credential_echoed_in_the_status_line_or_headers_is_redacted(raw: bytes) -> None:
    """Cut or lower-cased before redaction, a credential used to come back in part or whole."""
    outcome = await echo_from(raw, {**HEADERS, "X-Hex-Key": HEX_KEY})
    shown = everything(outcome)
    if isinstance(outcome, Completed):
        shown += "".join(str(getattr(b, "mime_type", "")) for b in outcome.result.content)
    for part in ("key-ABC", "ABCDEFGH-1", HEX_KEY[:12], HEX_KEY[-12:]):
        assert part.lower() not in shown.replace("[redacted]", "").lower(), shown


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            b'{"pin": 48291375, "exact": 48291375.0, "near": 482913750, "pins": [48291375]}',
            {"pin": "[redacted]", "pins": ["[redacted]"], "near": "[redacted]"},
            id="number",
        ),
        pytest.param(
            b'{"sci": 4.8291375e7, "Sci": 4829137.5E1}',
            {"sci": "[redacted]", "Sci": "[redacted]"},
            id="exponent",
        ),
    ],
)
async def test_a_numeric_credential_echoed_as_a_json_number_is_redacted(
    body: bytes, expected: dict[str, Any]
) -> None:
    """A PIN or account key of digits only comes back as a number, not a string; in
    exponent notation (4.8291375e7 is read as 48291375) its run of digits is not even
    in the body. ``near`` is redacted too: its digits hold the credential."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    outcome = await echo_from(head % len(body) + body, {"X-Pin": "48291375"})
    assert isinstance(outcome, Completed), outcome
    structured = outcome.result.structured
    assert structured.keys() == json.loads(body).keys()
    assert {key: structured[key] for key in expected} == expected
    assert "48291375" not in everything(outcome)
