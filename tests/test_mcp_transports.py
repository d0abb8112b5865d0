"""``opgate serve`` as a real subprocess: stdio, and streamable HTTP with two bearer principals.

The server is ``tests.mcp_catalog:build_registry``; the clients are the official
``mcp.Client`` (over ``StdioServerParameters`` and ``streamable_http_client``) and,
where a test needs a client shape the SDK cannot produce (a bare ``elicitation: {}``
capability, a forged ``Host``), plain HTTP requests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import ROOT, SERVE, serve_environment

pytestmark = pytest.mark.anyio

ERAS = ("legacy", "2026-07-28")


@asynccontextmanager
async def http_client(
    url: str, token: str, era: str, answer: types.ElicitResult | None = None
) -> AsyncIterator[Client]:
    callback = None
    if answer is not None:

        async def callback(context: Any, params: Any) -> types.ElicitResult:
            return answer

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with (
        http,
        Client(
            streamable_http_client(url, http_client=http), mode=era, elicitation_callback=callback
        ) as client,
    ):
        yield client


def error_code(result: types.CallToolResult) -> str:
    assert result.is_error
    return str(result.structured_content["error"]["code"])


# -- stdio ------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_serve_is_driven_by_the_official_client(era: str) -> None:
    seen: list[str] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    parameters = StdioServerParameters(
        command=SERVE[0], args=SERVE[1:], cwd=str(ROOT), env=serve_environment()
    )
    with anyio.fail_after(60):
        async with Client(parameters, mode=era, elicitation_callback=answer) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == ["search", "inspect", "invoke"]
            page = await client.call_tool("search", {"query": "confirm"})
            assert page.structured_content["items"][0]["name"] == "orders.confirm"
            result = await client.call_tool(
                "invoke", {"name": "orders.confirm", "arguments": {"id": 4}}
            )
            assert result.structured_content == {"id": 4}
            assert seen == ["Really?"]


def test_serve_reports_a_bad_target_clearly() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:nothing"],
        cwd=ROOT,
        env=serve_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "has no attribute 'nothing'" in completed.stderr
    assert completed.stdout == ""


def test_serve_refuses_a_public_address_without_authentication() -> None:
    completed = subprocess.run(
        [*SERVE, "--http", "0.0.0.0:0"],
        cwd=ROOT,
        env=serve_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "--token-verifier" in completed.stderr


# -- HTTP ---------------------------------------------------------------------------


async def test_http_requires_a_bearer_token(http_server: str) -> None:
    async with httpx2.AsyncClient() as http:
        response = await http.post(http_server, json={})
    assert response.status_code == 401
    assert "bearer" in response.headers.get("www-authenticate", "").lower()


@pytest.mark.parametrize("era", ERAS)
async def test_two_principals_see_their_own_catalog(http_server: str, era: str) -> None:
    async with http_client(http_server, "alice-token", era) as alice:
        page = await alice.call_tool("search", {"group": "admin"})
        assert page.structured_content["items"] == []
    async with http_client(http_server, "bob-token", era) as bob:
        page = await bob.call_tool("search", {"group": "admin"})
        assert [item["name"] for item in page.structured_content["items"]] == ["admin.reset"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_cursor_is_bound_to_its_principal(http_server: str, era: str) -> None:
    async with http_client(http_server, "alice-token", era) as alice:
        first = await alice.call_tool("search", {"query": "filler", "limit": 2})
        cursor = first.structured_content["next_cursor"]
        assert cursor
        second = await alice.call_tool("search", {"query": "filler", "limit": 2, "cursor": cursor})
        assert not second.is_error
    async with http_client(http_server, "bob-token", era) as bob:
        stolen = await bob.call_tool("search", {"query": "filler", "limit": 2, "cursor": cursor})
    assert error_code(stolen) == "invalid_cursor"


async def test_a_continuation_is_bound_to_its_principal(http_server: str) -> None:
    arguments = {"name": "orders.confirm", "arguments": {"id": 8}}
    yes = {"opgate": types.ElicitResult(action="accept", content={"ok": True})}
    answer = types.ElicitResult(action="accept", content={"ok": True})
    async with http_client(http_server, "alice-token", "2026-07-28", answer) as alice:
        pending = await alice.session.call_tool("invoke", arguments, allow_input_required=True)
        assert isinstance(pending, types.InputRequiredResult)
        async with http_client(http_server, "bob-token", "2026-07-28", answer) as bob:
            with pytest.raises(MCPError, match="expired"):
                await bob.session.call_tool(
                    "invoke", arguments, request_state=pending.request_state, input_responses=yes
                )
        # A retry may arrive on another connection of the same principal.
        async with http_client(http_server, "alice-token", "2026-07-28", answer) as again:
            done = await again.session.call_tool(
                "invoke", arguments, request_state=pending.request_state, input_responses=yes
            )
            assert done.structured_content == {"id": 8}


async def test_legacy_form_elicitation_over_http(http_server: str) -> None:
    answer = types.ElicitResult(action="accept", content={"ok": True})
    async with http_client(http_server, "alice-token", "legacy", answer) as alice:
        result = await alice.call_tool("invoke", {"name": "orders.confirm", "arguments": {"id": 2}})
    assert result.structured_content == {"id": 2}


def _sse_messages(response: httpx2.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:") and line[len("data:") :].strip()
    ]


async def test_bare_elicitation_capability_means_form_only(http_server: str) -> None:
    """A 2025-11-25 client declaring ``elicitation: {}`` gets forms but not URL prompts."""
    headers = {
        "Authorization": "Bearer alice-token",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        response = await http.post(http_server, json=initialize)
        assert response.status_code == 200
        session = response.headers["mcp-session-id"]
        http.headers["mcp-session-id"] = session
        http.headers["mcp-protocol-version"] = "2025-11-25"
        await http.post(http_server, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "invoke", "arguments": {"name": "orders.pay"}},
        }
        with anyio.fail_after(20):
            response = await http.post(http_server, json=call)
        [message] = [m for m in _sse_messages(response) if m.get("id") == 2]
        assert message["result"]["isError"] is True
        assert message["result"]["structuredContent"]["error"]["code"] == "confirmation_required"


@pytest.mark.parametrize(
    ("header", "value"), [("Host", "evil.example"), ("Origin", "http://evil.example")]
)
async def test_dns_rebinding_protection_refuses_foreign_hosts(
    http_server: str, header: str, value: str
) -> None:
    headers = {
        "Authorization": "Bearer alice-token",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        header: value,
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(
            http_server,
            headers=headers,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        )
    assert response.status_code in (403, 421)


async def test_stdio_serve_of_the_demo_application(tmp_path: Path) -> None:
    environment = serve_environment()
    environment["OPGATE_DEMO_DB"] = str(tmp_path / "desk.sqlite3")
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "opgate.demo:build_registry"],
        cwd=str(ROOT),
        env=environment,
    )
    with anyio.fail_after(60):
        async with Client(parameters, mode="2026-07-28") as client:
            page = await client.call_tool("search", {"query": "refund", "group": "refunds"})
            names = [item["name"] for item in page.structured_content["items"]]
            assert "refunds.request" in names
            result = await client.call_tool(
                "invoke", {"name": "customers.get", "arguments": {"customer": 1}}
            )
            assert result.structured_content["id"] == 1
            refused = await client.call_tool(
                "invoke", {"name": "refunds.request", "arguments": {"order": 1}}
            )
            assert error_code(refused) == "confirmation_required"  # no elicitation declared
    assert (tmp_path / "desk.sqlite3").exists()


class _RawTokens(httpx2.AsyncHTTPTransport):
    """A hostile client's transport: quoted placeholders in request bodies become raw
    JSON text the SDK's own encoder never writes (NaN, lone surrogate escapes, repeated
    names, deep nesting)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        super().__init__()
        self.tokens = tokens

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = (await request.aread()).decode()
        hostile = body
        for placeholder, raw in self.tokens.items():
            hostile = hostile.replace(json.dumps(placeholder), raw)
        if hostile != body:
            headers = [(k, v) for k, v in request.headers.items() if k != "content-length"]
            request = httpx2.Request(request.method, request.url, headers=headers, content=hostile)
        return await super().handle_async_request(request)


HOSTILE = {
    "@nan": "NaN",
    "@infinity": "-Infinity",
    "@overflow": "1e400",  # a float overflows to an infinity when decoded
    "@surrogate": '"\\ud800"',
    "@repeated": '"text":"first","text"',  # {"text": "first", "text": ...}: the last wins
    "@deep": "[" * 128 + "1" + "]" * 128,  # 129 levels under the root object
    "@wide": "[" + "[[]]," * 13000 + "0.5]",
}


@pytest.mark.parametrize("era", ERAS)
async def test_hostile_json_in_tool_calls_gets_clean_tool_errors(
    http_server: str, era: str
) -> None:
    """The operation's arguments reach ``Registry.invoke`` as the JSON text the client
    sent: each problem is a clean ``invalid_arguments`` with its pointer (the agent's own
    member names, never its values), a number the SDK would decode as an infinity is
    just a number, and the session goes on."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"text": "@nan"}, "invalid_arguments: arguments: NaN is not a JSON number (at /text)"),
        (
            {"text": "x", "n": ["@infinity"]},
            "invalid_arguments: arguments: -Infinity is not a JSON number (at /n/0)",
        ),
        ({"text": "x", "n": {"m": "@overflow"}}, "echo x"),
        (
            {"@repeated": 7},
            "invalid_arguments: arguments: duplicate object member name 'text' (at /text)",
        ),
        (
            {"@repeated": "second"},
            "invalid_arguments: arguments: duplicate object member name 'text' (at /text)",
        ),
        (
            {"text": "x", "d": "@deep"},
            "invalid_arguments: arguments: nesting deeper than "
            "128 levels (at '/d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0'…)",
        ),
        ({"text": "x", "w": "@wide"}, "echo x"),
    ]
    if era == "2026-07-28":  # the legacy transport's parser refuses lone surrogate escapes
        cases += [
            (
                {"text": "@surrogate"},
                "invalid_arguments: arguments: string contains a lone surrogate (at /text)",
            ),
        ]
    http = httpx2.AsyncClient(
        headers={"Authorization": "Bearer alice-token"}, timeout=30, transport=_RawTokens(HOSTILE)
    )
    async with (
        http,
        Client(streamable_http_client(http_server, http_client=http), mode=era) as client,
    ):
        for arguments, expected in cases:
            result = await client.call_tool("invoke", {"name": "util.echo", "arguments": arguments})
            assert result.content[0].text == expected, arguments
            assert "first" not in result.content[0].text
        assert not (await client.call_tool("search", {"query": "echo"})).is_error


async def test_hostile_json_in_answers_gets_clean_tool_errors(http_server: str) -> None:
    """An answer the SDK decodes with NaN or a lone surrogate is refused as
    ``invalid_request`` before it is accepted: the prompt can still be answered."""
    http = httpx2.AsyncClient(
        headers={"Authorization": "Bearer alice-token"}, timeout=30, transport=_RawTokens(HOSTILE)
    )
    answer = types.ElicitResult(action="accept", content={"ok": True})
    arguments = {"name": "orders.confirm", "arguments": {"id": 5}}
    async with (
        http,
        Client(
            streamable_http_client(http_server, http_client=http),
            mode="2026-07-28",
            elicitation_callback=lambda context, params: answer,  # never called here
        ) as client,
    ):
        pending = await client.session.call_tool("invoke", arguments, allow_input_required=True)
        assert isinstance(pending, types.InputRequiredResult)
        state = pending.request_state
        for content, where in (
            ({"ok": "@nan"}, "/ok"),
            ({"ok": True, "@surrogate": 1}, "'/\\ud800'"),
        ):
            hostile = {"opgate": types.ElicitResult(action="accept", content=content)}
            refused = await client.session.call_tool(
                "invoke", arguments, request_state=state, input_responses=hostile
            )
            assert error_code(refused) == "invalid_request"
            assert refused.content[0].text.endswith(f"(at {where})"), refused.content[0].text
        done = await client.session.call_tool(
            "invoke", arguments, request_state=state, input_responses={"opgate": answer}
        )
        assert done.structured_content == {"id": 5}
