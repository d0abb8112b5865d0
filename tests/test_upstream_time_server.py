"""A real upstream no one here wrote: ``mcp-server-time`` from PyPI (the dev extra), behind
``opgate.upstream`` together with the tests' own ``kit`` upstream.

Through the registry: search across both upstreams, inspect the time server's tools
(summaries from its descriptions, its declared annotations, its schemas through the
compiler profile, its output schema kept), invoke both tools with their structured
results checked by opgate against that output schema, and its ``isError`` answer
for an unknown timezone mapped to an operation failure.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import pytest

from opgate import Completed, Failed, FailureCode, LocalPolicy, OperationSpec, Registry, SearchPage
from opgate.upstream import load_config, open_catalog

from upstream_servers import stdio_entry

pytestmark = pytest.mark.anyio

TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def registry() -> AsyncIterator[Registry]:
    config = load_config({"mcpServers": {"time": TIME, "kit": stdio_entry("kit")}})
    async with open_catalog(config, start_timeout=60) as catalog:
        time, kit = catalog.report.upstreams
        assert time.connected, time.reason
        assert time.server.startswith("mcp-time ")
        assert kit.connected, kit.reason
        assert catalog.report.skipped == ()
        yield catalog.registry(LocalPolicy())


async def test_search_finds_tools_of_both_upstreams(registry: Registry) -> None:
    page = await registry.search(None, "", limit=20)
    assert isinstance(page, SearchPage)
    groups = {item.group for item in page.items}
    assert groups == {"time", "kit"}
    hits = await registry.search(None, "timezone")
    assert isinstance(hits, SearchPage)
    assert [item.name for item in hits.items] == ["time.convert_time", "time.get_current_time"]


async def test_inspect_shows_the_time_servers_definition(registry: Registry) -> None:
    spec = await registry.inspect(None, "time.get_current_time")
    assert isinstance(spec, OperationSpec)
    assert spec.group == "time"
    assert spec.summary == "Get current time in a specific timezone"
    assert spec.description.endswith(
        "Annotations declared by the upstream: readOnlyHint=true, destructiveHint=false, "
        "idempotentHint=true, openWorldHint=false."
    )
    schema = spec.input_schema
    assert isinstance(schema, dict)
    assert schema["required"] == ["timezone"]
    output = spec.output_schema
    assert isinstance(output, dict)
    assert set(output["required"]) == {"timezone", "datetime", "day_of_week", "is_dst"}


async def test_get_current_time(registry: Registry) -> None:
    outcome = await registry.invoke(None, "time.get_current_time", {"timezone": "Europe/Warsaw"})
    assert isinstance(outcome, Completed), outcome
    structured = outcome.result.structured
    assert isinstance(structured, dict)
    assert structured["timezone"] == "Europe/Warsaw"
    assert isinstance(structured["is_dst"], bool)


async def test_convert_time(registry: Registry) -> None:
    outcome = await registry.invoke(
        None,
        "time.convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
    )
    assert isinstance(outcome, Completed), outcome
    structured = outcome.result.structured
    assert isinstance(structured, dict)
    assert structured["time_difference"] == "+9.0h"
    assert structured["target"]["datetime"].endswith("T21:00:00+09:00")


async def test_an_unknown_timezone_is_the_servers_own_error(registry: Registry) -> None:
    outcome = await registry.invoke(None, "time.get_current_time", {"timezone": "Mars/Olympus"})
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert "Invalid timezone" in outcome.failure.message
