"""opgate.openapi end to end: a FastAPI app (its own generated OpenAPI) on 127.0.0.1.

Calls go through ``Registry.invoke`` and, for confirmations, through the official MCP
client in process (``mcp.Client`` on ``GatewayServer(...).sdk_server``).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import mcp.types as types
import pytest
from mcp import Client

from opgate import Completed, Failed, FailureCode, InputMode, InputResponse, Pending, Registry
from opgate.mcp import GatewayServer
from opgate.openapi import Catalog, build_catalog

from openapi_app import ITEMS, LOG, document, serve_app

pytestmark = pytest.mark.anyio


@dataclass
class Ctx:
    principal: str


class Policy:
    def scope_key(self, ctx: Any) -> str:
        return ctx.principal if isinstance(ctx, Ctx) else str(ctx.scope_key)

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


def token_for(ctx: Any) -> dict[str, str]:
    principal = ctx.principal if isinstance(ctx, Ctx) else ctx.principal.subject
    return {"Authorization": f"Bearer token-of-{principal}"}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_app() as url:
        yield url


@pytest.fixture
async def shop(base_url: str) -> AsyncIterator[tuple[Catalog, Registry]]:
    ITEMS.clear()
    LOG.clear()
    catalog = build_catalog(document(), base_url=base_url, headers=token_for, timeout=2)
    registry = catalog.registry(Policy())
    yield catalog, registry
    await catalog.aclose()


async def call(registry: Registry, name: str, arguments: Any, ctx: Any = None) -> Any:
    return await registry.invoke(ctx or Ctx("alice"), name, arguments)


def structured(outcome: Any) -> Any:
    assert isinstance(outcome, Completed), outcome
    return outcome.result.structured


def failure(outcome: Any) -> tuple[str, str]:
    assert isinstance(outcome, Failed), outcome
    return outcome.failure.code.value, outcome.failure.message


async def confirm(registry: Registry, name: str, arguments: Any, accept: bool = True) -> Any:
    ctx = Ctx("alice")
    pending = await registry.invoke(ctx, name, arguments, input_support={InputMode.FORM})
    assert isinstance(pending, Pending), pending
    answer = InputResponse.accept({"confirm": accept})
    resume = (pending.continuation, answer)
    return pending, await registry.invoke(
        ctx, name, arguments, input_support={InputMode.FORM}, resume=resume
    )


def test_the_app_imports_whole(base_url: str) -> None:
    catalog = build_catalog(document(), base_url=base_url)
    assert catalog.report.skipped == []
    assert catalog.report.warnings == []
    assert catalog.report.version.startswith("3.1")
    assert {"items.get", "items.create", "forms.login", "meta.status"} <= set(catalog.plans)
    assert catalog.plans["items.get"].group == "items"


async def test_path_query_and_header_parameters(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    await confirm(registry, "items.create", {"body": {"name": "pen", "price": 1.5}})
    got = structured(
        await call(
            registry,
            "items.get",
            {"item_id": 1, "verbose": True, "fields": ["a", "b c"], "x-trace": "t-1"},
        )
    )
    assert got["item"]["name"] == "pen"
    assert got["verbose"] is True
    assert got["fields"] == ["a", "b c"]
    assert got["trace"] == "t-1"
    assert ("GET", "/api/items/1", "verbose=true&fields=a&fields=b+c") in LOG


async def test_schema_violations_are_refused_before_sending(
    shop: tuple[Catalog, Registry],
) -> None:
    _, registry = shop
    code, _message = failure(await call(registry, "items.get", {"item_id": "1; DROP"}))
    assert code == "invalid_arguments"
    code, _ = failure(await call(registry, "items.get", {"item_id": 1, "url": "http://x"}))
    assert code == "invalid_arguments"
    assert LOG == []


async def test_json_response_is_structured_with_a_text_copy(
    shop: tuple[Catalog, Registry],
) -> None:
    _, registry = shop
    outcome = await call(registry, "meta.echo", {})
    assert structured(outcome) == {"query": "", "path": "/api/echo"}
    assert outcome.result.content[0].text == '{"query":"","path":"/api/echo"}'


async def test_confirmed_change_is_sent_once(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    arguments = {"body": {"name": "cup", "price": 2, "tags": ["kitchen"]}}
    pending, created = await confirm(registry, "items.create", arguments)
    message = pending.prompt.message
    assert message.startswith("Send POST /items (items.create)?")
    assert '  {"name":"cup","price":2,"tags":["kitchen"]}\n' in message
    assert LOG.count(("POST", "/api/items", "")) == 1
    assert structured(created)["id"] == 1
    again = await registry.invoke(
        Ctx("alice"),
        "items.create",
        arguments,
        input_support={InputMode.FORM},
        resume=(pending.continuation, InputResponse.accept({"confirm": True})),
    )
    assert isinstance(again, Completed)
    assert "already sent" in again.result.content[0].text
    assert structured(again)["id"] == 1
    assert LOG.count(("POST", "/api/items", "")) == 1  # never a second send
    assert len(ITEMS) == 1


async def test_declined_or_unconfirmable_changes_are_never_sent(
    shop: tuple[Catalog, Registry],
) -> None:
    _, registry = shop
    arguments = {"body": {"name": "cup", "price": 2}}
    _, declined = await confirm(registry, "items.create", arguments, accept=False)
    assert failure(declined) == ("operation_failed", "not sent: POST /items was not confirmed")
    code, _ = failure(await call(registry, "items.create", arguments))  # no form support
    assert code == FailureCode.CONFIRMATION_REQUIRED.value
    assert LOG == []


async def test_form_encoded_body(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    _, done = await confirm(
        registry, "forms.login", {"body": {"username": "bo b", "remember": True}}
    )
    assert structured(done) == {"username": "bo b", "remember": True}


async def test_no_confirmation_when_the_host_says_so(base_url: str) -> None:
    catalog = build_catalog(document(), base_url=base_url, confirm=())
    registry = catalog.registry(Policy())
    try:
        outcome = await call(registry, "items.delete", {"item_id": 5})
        assert isinstance(outcome, Completed)
        assert outcome.result.content[0].text == "HTTP 204 No Content"
    finally:
        await catalog.aclose()


async def test_errors_fail_with_status_and_a_sanitized_bounded_message(
    shop: tuple[Catalog, Registry],
) -> None:
    _, registry = shop
    outcome = await call(registry, "meta.status", {"code": 418, "secret": "token-of-alice"})
    code, message = failure(outcome)
    assert code == "operation_failed"
    assert message.startswith("HTTP 418 I'm a Teapot: ")
    assert "token-of-alice" not in message
    assert "[redacted]" in message
    assert "\x07" not in message
    assert "\n" not in message
    assert outcome.failure.diagnostics == {"status": 418}
    code, message = failure(await call(registry, "items.get", {"item_id": 99}))
    assert message == 'HTTP 404 Not Found: {"detail":"item 99 not found"}'
    _, message = failure(await call(registry, "meta.status", {"code": 503}))
    assert message.startswith("HTTP 503")


async def test_path_parameters_cannot_change_the_path(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    for value in ("..", ".", ""):
        code, message = failure(await call(registry, "files.get", {"name": value}))
        assert code == "operation_failed"
        assert "must not make a path segment" in message
    # Once decoded (as a permissive server or proxy would), these climb out: never sent.
    for value in ("../../admin", "%2e%2e", "..\\..", "..;", "x/../y"):
        code, message = failure(await call(registry, "files.get", {"name": value}))
        assert message == "refused: the request would leave the API's base URL"
    for value in ("a/b", "x?y=1#z", "http://evil.invalid/", "..x"):
        await call(registry, "files.get", {"name": value})
    paths = [path for _, path, _ in LOG]
    assert paths == [
        "/api/files/a%2Fb",
        "/api/files/x%3Fy%3D1%23z",
        "/api/files/http%3A%2F%2Fevil.invalid%2F",
        "/api/files/..x",
    ]
    assert all(query == "" for _, _, query in LOG)


async def test_redirects_never_leave_the_base_url(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    inside = structured(await call(registry, "meta.redirect_inside", {}))
    assert inside == {"name": "redirected", "raw_path": "/api/files/redirected"}
    for name in ("meta.redirect_outside", "meta.redirect_up"):
        _code, message = failure(await call(registry, name, {}))
        assert message.startswith("HTTP 302 Found: the API redirected the request elsewhere")
        assert "attacker" not in message
        assert "outside" not in message
    assert [p for _, p, _ in LOG if p in ("/outside-the-api", "/steal")] == []


async def test_a_slow_api_times_out(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    _code, message = failure(await call(registry, "meta.slow", {"seconds": 5}))
    assert message.startswith("the API did not answer within 2 s")
    assert structured(await call(registry, "meta.slow", {"seconds": 0})) == {"slept": 0}


async def test_headers_come_from_the_host_per_principal(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    for who in ("alice", "bob"):
        got = structured(await call(registry, "meta.headers", {"x-mode": "m"}, Ctx(who)))
        sent = f"Bearer token-of-{who}".encode()
        assert got["authorization_sha256"] == hashlib.sha256(sent).hexdigest()
        assert got["authorization"] == "[redacted]"  # an echoed credential never comes back
        assert got["x_mode"] == "m"


async def test_a_registry_built_without_the_catalog_policy_cannot_leak_headers(
    base_url: str,
) -> None:
    catalog = build_catalog(document(), base_url=base_url, headers=token_for)
    registry = Registry(catalog.operations, Policy())
    try:
        code, _ = failure(await call(registry, "meta.headers", {}))
        assert code == "internal"
    finally:
        await catalog.aclose()


async def test_text_binary_and_oversized_responses(shop: tuple[Catalog, Registry]) -> None:
    _, registry = shop
    text = await call(registry, "meta.text", {"size": 5})
    assert isinstance(text, Completed)
    assert text.result.content[0].text == "xxxxx"
    binary = await call(registry, "meta.binary", {})
    assert isinstance(binary, Completed)
    note, link = binary.result.content
    assert "application/octet-stream response of 300 bytes" in note.text
    assert link.uri.endswith("/api/binary")
    assert link.size == 300
    big = await call(registry, "meta.big", {"count": 2000})
    assert isinstance(big, Completed)
    assert not big.result.has_structured
    assert big.result.content[0].text.endswith(
        "[cut: the response is longer than the result budget]"
    )
    medium = await call(registry, "meta.big", {"count": 400})
    assert isinstance(medium, Completed)
    assert len(medium.result.structured) == 400
    assert "structured content only" in medium.result.content[0].text


def test_base_url_must_be_plain(base_url: str) -> None:
    for bad in ("ftp://x", "/relative", "https://user:pw@x", "https://x/?q=1"):
        with pytest.raises(ValueError, match="base_url"):
            build_catalog(document(), base_url=bad)
    with pytest.raises(ValueError, match="confirm"):
        build_catalog(document(), base_url=base_url, confirm="POST")


def test_the_timeout_must_be_positive_and_finite(base_url: str) -> None:
    for bad in (0, -1.0, float("nan"), float("inf"), True, 10**400):
        with pytest.raises(ValueError, match="positive, finite number of seconds"):
            build_catalog(document(), base_url=base_url, timeout=bad)


# -- through MCP ----------------------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_confirmation_through_the_mcp_client(
    shop: tuple[Catalog, Registry], era: str
) -> None:
    _, registry = shop
    seen: list[str] = []
    answers = iter(["accept", "decline"])

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params.message)
        action = next(answers)
        return types.ElicitResult(
            action=action, content={"confirm": True} if action == "accept" else None
        )

    server = GatewayServer(registry)
    async with Client(server.sdk_server, mode=era, elicitation_callback=answer) as client:
        arguments = {"body": {"name": "lamp", "price": 10}}
        done = await client.call_tool("invoke", {"name": "items.create", "arguments": arguments})
        assert not done.is_error
        assert done.structured_content["name"] == "lamp"
        refused = await client.call_tool("invoke", {"name": "items.create", "arguments": arguments})
        assert refused.is_error
        assert (
            refused.structured_content["error"]["message"]
            == "not sent: POST /items was not confirmed"
        )
        read = await client.call_tool("invoke", {"name": "items.get", "arguments": {"item_id": 1}})
        assert read.structured_content["item"]["name"] == "lamp"
    assert len(seen) == 2
    assert all(m.startswith("Send POST /items") for m in seen)
    assert LOG.count(("POST", "/api/items", "")) == 1


async def test_without_elicitation_changes_need_confirmation(
    shop: tuple[Catalog, Registry],
) -> None:
    _, registry = shop
    async with Client(GatewayServer(registry).sdk_server, mode="legacy") as client:
        result = await client.call_tool(
            "invoke", {"name": "items.delete", "arguments": {"item_id": 1}}
        )
    assert result.structured_content["error"]["code"] == "confirmation_required"
    assert LOG == []
