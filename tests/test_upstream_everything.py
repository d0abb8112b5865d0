"""The relay against a server no one here wrote: ``@modelcontextprotocol/server-everything``.

The reference MCP server from the npm registry (pinned in ``tests/node_tools.py``, fetched
once into the node tools' cache and announced) runs as a stdio upstream; it speaks
2025-11-25, so its questions come as ``elicitation/create`` inside the call. Through the
``Registry``: its form (every field kind of the 2025-11-25 schema) answered and declined,
its URL hand-off, its ``-32042`` error path (a hand-off, then the call sent again; declined,
the call fails),
and its long-running operation's progress. Through the official ``mcp.Client`` against
``opgate serve --upstreams``, both client eras: the form answered by the client.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext

from opgate import (
    Completed,
    Failed,
    FailureCode,
    FormPrompt,
    InputMode,
    InputResponse,
    LocalPolicy,
    Pending,
    ProgressUpdate,
    Registry,
    URLPrompt,
)
from opgate.upstream import load_config, open_catalog

from conftest import ROOT, serve_environment
from node_tools import Everything, ensure_everything

pytestmark = pytest.mark.anyio

BOTH = {InputMode.FORM, InputMode.URL}
FORM_TOOL = "every.trigger-elicitation-request"
URL_TOOL = "every.trigger-url-elicitation"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def everything() -> Everything:
    return ensure_everything()


@pytest.fixture(scope="module")
def servers(everything: Everything) -> dict[str, Any]:
    node, *args = everything.command()
    return {"mcpServers": {"every": {"command": node, "args": args}}}


@pytest.fixture(scope="module")
async def registry(servers: dict[str, Any]) -> AsyncIterator[Registry]:
    async with open_catalog(load_config(servers), start_timeout=60) as catalog:
        (status,) = catalog.report.upstreams
        assert status.connected, status
        assert status.protocol_version == "2025-11-25"
        yield catalog.registry(LocalPolicy())


def texts(outcome: Completed) -> str:
    return "\n".join(getattr(block, "text", "") for block in outcome.result.content)


async def asked(registry: Registry, name: str, arguments: dict[str, Any]) -> Pending:
    outcome = await registry.invoke(None, name, arguments, input_support=BOTH)
    assert isinstance(outcome, Pending), outcome
    return outcome


async def answered(
    registry: Registry,
    name: str,
    arguments: dict[str, Any],
    pending: Pending,
    response: InputResponse,
) -> Any:
    return await registry.invoke(
        None,
        name,
        arguments,
        input_support=BOTH,
        resume=(pending.continuation, response),
    )


async def test_its_form_is_relayed_and_answered(registry: Registry) -> None:
    pending = await asked(registry, FORM_TOOL, {})
    assert isinstance(pending.prompt, FormPrompt)
    schema = pending.prompt.schema
    assert schema["required"] == ["name"]
    kinds = {prop["type"] for prop in schema["properties"].values()}
    assert kinds == {"string", "boolean", "integer", "number", "array"}
    answer = InputResponse.accept({"name": "Ada", "check": True})
    done = await answered(registry, FORM_TOOL, {}, pending, answer)
    assert isinstance(done, Completed), done
    assert "User provided the requested information" in texts(done)
    assert "Name: Ada" in texts(done)


async def test_its_form_declined(registry: Registry) -> None:
    pending = await asked(registry, FORM_TOOL, {})
    done = await answered(registry, FORM_TOOL, {}, pending, InputResponse.decline())
    assert isinstance(done, Completed), done
    assert "User declined" in texts(done)


async def test_its_url_hand_off_is_relayed(registry: Registry) -> None:
    arguments = {"url": "https://example.com/authorize", "message": "Sign in, please"}
    pending = await asked(registry, URL_TOOL, arguments)
    assert pending.prompt == URLPrompt(
        "upstream 'every' asks: Sign in, please", "https://example.com/authorize"
    )
    done = await answered(registry, URL_TOOL, arguments, pending, InputResponse.accept())
    assert isinstance(done, Completed), done
    assert "completed the URL elicitation flow" in texts(done)


async def test_its_url_elicitation_required_error_is_a_hand_off_then_the_call_again(
    registry: Registry,
) -> None:
    arguments = {"url": "https://example.com/authorize", "errorPath": True}
    handed = await asked(registry, URL_TOOL, arguments)
    assert handed.prompt == URLPrompt(
        "upstream 'every' asks: "
        "Open this link to satisfy the prerequisite, then retry the request.",
        "https://modelcontextprotocol.io",
    )
    # Accepted: the same call again, which this server takes through elicitation/create.
    again = await answered(registry, URL_TOOL, arguments, handed, InputResponse.accept())
    assert isinstance(again, Pending), again
    assert isinstance(again.prompt, URLPrompt)
    assert again.prompt.url == "https://example.com/authorize"
    done = await answered(registry, URL_TOOL, arguments, again, InputResponse.accept())
    assert isinstance(done, Completed), done
    assert "completed the URL elicitation flow" in texts(done)


async def test_its_url_elicitation_required_error_declined(registry: Registry) -> None:
    arguments = {"url": "https://example.com/decline", "errorPath": True}
    handed = await asked(registry, URL_TOOL, arguments)
    outcome = await answered(registry, URL_TOOL, arguments, handed, InputResponse.decline())
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert "the person declined it" in outcome.failure.message


async def test_its_progress_reaches_the_caller(registry: Registry) -> None:
    seen: list[ProgressUpdate] = []
    outcome = await registry.invoke(
        None,
        "every.trigger-long-running-operation",
        {"duration": 1, "steps": 3},
        progress=seen.append,
    )
    assert isinstance(outcome, Completed), outcome
    assert seen, "no progress arrived"
    assert {update.total for update in seen} == {3}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_its_form_through_the_gateway_and_the_official_client(
    servers: dict[str, Any], tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(servers), "utf-8")
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "--upstreams", str(path)],
        cwd=str(ROOT),
        env=serve_environment(),
    )
    seen: list[types.ElicitRequestParams] = []

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    with anyio.fail_after(120):
        async with Client(parameters, mode=mode, elicitation_callback=elicit) as client:  # type: ignore[arg-type]
            result = await client.call_tool("invoke", {"name": FORM_TOOL, "arguments": {}})
    assert not result.is_error, result
    assert "Name: Ada" in "\n".join(getattr(block, "text", "") for block in result.content)
    (params,) = seen
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == (
        "upstream 'every' asks: Please provide inputs for the following fields:"
    )
