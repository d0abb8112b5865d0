"""The relay end to end: the official ``mcp.Client`` against ``opgate serve --upstreams``.

The gateway runs as a subprocess over stdio with two copies of ``tests/relay_servers.py``
behind it, ``old`` (2025-11-25 only) and ``new`` (2026-07-28), and the client speaks
each era (``mode="legacy"``: the gateway asks with ``elicitation/create`` inside the
call; ``mode="auto"``: with an ``InputRequiredResult`` the SDK's client answers and
retries). Through every pairing: a relayed form answered by the client's elicitation
callback and the upstream's result returned; a decline; a relayed URL hand-off; a
``-32042`` error's hand-off accepted and the call sent again; a client without
elicitation gets ``confirmation_required``; progress arrives at the client. A
2026-07-28 client that sends one answer twice gets the same next question (the
registry's replay) and, after the end, the same result.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext

from conftest import ROOT, serve_environment
from relay_servers import GREET_FORM, HANDOFF_URL, entry

pytestmark = pytest.mark.anyio

ERAS = {"old": "2025-11-25", "new": "2026-07-28"}
Elicit = Callable[[ClientRequestContext, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("relay") / "mcp.json"
    servers = {"old": entry("legacy"), "new": entry("modern")}
    path.write_text(json.dumps({"mcpServers": servers}), "utf-8")
    return path


@asynccontextmanager
async def gateway(upstreams: Path, mode: str, elicit: Elicit | None) -> AsyncIterator[Client]:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "--upstreams", str(upstreams)],
        cwd=str(ROOT),
        env=serve_environment(),
    )
    with anyio.fail_after(120):
        async with Client(parameters, mode=mode, elicitation_callback=elicit) as client:  # type: ignore[arg-type]
            yield client


async def invoke(client: Client, name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    return await client.call_tool("invoke", {"name": name, "arguments": arguments}, **kwargs)


def answering(result: types.ElicitResult, seen: list[types.ElicitRequestParams]) -> Elicit:
    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        seen.append(params)
        return result

    return elicit


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_relayed_form_is_answered_and_the_result_returned(
    upstreams: Path, mode: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    accept = types.ElicitResult(action="accept", content={"name": "Ada", "color": "g"})
    async with gateway(upstreams, mode, answering(accept, seen)) as client:
        for up in ("old", "new"):
            result = await invoke(client, f"{up}.greet", {"topic": "tea"})
            assert not result.is_error, result
            assert result.structured_content == {
                "action": "accept",
                "name": "Ada",
                "color": "g",
                "topic": "tea",
                "era": ERAS[up],
            }
    assert len(seen) == 2
    for params, up in zip(seen, ("old", "new"), strict=True):
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.message == f"upstream {up!r} asks: Who are you?"
        assert params.requested_schema == GREET_FORM


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_decline_reaches_the_upstream(upstreams: Path, mode: str) -> None:
    decline = types.ElicitResult(action="decline")
    async with gateway(upstreams, mode, answering(decline, [])) as client:
        for up in ("old", "new"):
            result = await invoke(client, f"{up}.greet", {"topic": "tea"})
            assert not result.is_error, result
            assert result.structured_content["action"] == "decline"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_relayed_url_hand_off(upstreams: Path, mode: str) -> None:
    seen: list[types.ElicitRequestParams] = []
    accept = types.ElicitResult(action="accept")
    async with gateway(upstreams, mode, answering(accept, seen)) as client:
        for up in ("old", "new"):
            result = await invoke(client, f"{up}.handoff", {})
            assert not result.is_error, result
            assert result.content[0].text == f"hand-off accept ({ERAS[up]})"
    assert [(params.mode, params.message) for params in seen] == [
        ("url", f"upstream {up!r} asks: Sign in to continue") for up in ("old", "new")
    ]
    assert all(isinstance(p, types.ElicitRequestURLParams) and p.url == HANDOFF_URL for p in seen)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_url_elicitation_required_error_is_handed_off_and_the_call_sent_again(
    upstreams: Path, mode: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    accept = types.ElicitResult(action="accept")
    async with gateway(upstreams, mode, answering(accept, seen)) as client:
        for up in ("old", "new"):
            result = await invoke(client, f"{up}.gated", {"key": mode})
            assert not result.is_error, result
            assert result.content[0].text == f"gated open after 2 calls ({ERAS[up]})"
    assert [(params.mode, params.message) for params in seen] == [
        ("url", f"upstream {up!r} asks: Authorize step 1") for up in ("old", "new")
    ]
    assert all(
        isinstance(p, types.ElicitRequestURLParams) and p.url == f"{HANDOFF_URL}?gate={mode}&step=1"
        for p in seen
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_without_elicitation_gets_confirmation_required(
    upstreams: Path, mode: str
) -> None:
    async with gateway(upstreams, mode, None) as client:
        for up in ("old", "new"):
            result = await invoke(client, f"{up}.greet", {"topic": "tea"})
            assert result.is_error
            assert result.structured_content["error"]["code"] == "confirmation_required"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_from_the_upstream_reaches_the_client(upstreams: Path, mode: str) -> None:
    async with gateway(upstreams, mode, None) as client:
        for up in ("old", "new"):
            seen: list[tuple[float, float | None, str | None]] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append((value, total, message))  # noqa: B023 - awaited in this round

            result = await invoke(client, f"{up}.steps", {"count": 3}, progress_callback=progress)
            assert not result.is_error, result
            assert seen, f"no progress from {up}"
            assert {total for _, total, _ in seen} == {3.0}
            assert all(message is not None and message.startswith("step ") for *_, message in seen)


async def test_a_modern_client_replaying_an_answer_gets_the_registrys_replay(
    upstreams: Path,
) -> None:
    async def unused(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        raise AssertionError("this client answers the input requests itself")

    # The callback declares the capability; the test drives the retries by hand.
    async with gateway(upstreams, "auto", unused) as client:
        session = client.session
        for up in ("old", "new"):
            arguments = {"name": f"{up}.survey", "arguments": {}}
            first = await session.call_tool("invoke", arguments, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult), first
            ((key, request),) = first.input_requests.items()
            assert request.params.message == f"upstream {up!r} asks: First?"
            a = {key: types.ElicitResult(action="accept", content={"a": 1})}
            retry = {"input_responses": a, "request_state": first.request_state}
            second = await session.call_tool(
                "invoke", arguments, allow_input_required=True, **retry
            )
            assert isinstance(second, types.InputRequiredResult), second
            again = await session.call_tool("invoke", arguments, allow_input_required=True, **retry)
            assert again == second
            b = {key: types.ElicitResult(action="accept", content={"b": True})}
            last = {**retry, "input_responses": b, "request_state": second.request_state}
            done = await session.call_tool("invoke", arguments, **last)
            assert isinstance(done, types.CallToolResult), done
            assert done.structured_content == {"first": {"a": 1}, "second": {"b": True}}
            recovered = await session.call_tool("invoke", arguments, **last)
            assert recovered == done
