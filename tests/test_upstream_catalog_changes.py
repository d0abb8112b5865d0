"""``opgate.upstream.open_catalog`` keeping the catalog true: restarts, late joins, rebuilds.

Against ``tests/relay_servers.py``'s ``changing`` upstream (the SDK's low-level
``Server`` over stdio, whose tools a test changes by writing a file) in both eras,
served by a ``GatewayServer`` that ``catalog.follow`` swaps, and driven by the official
client connected across the swap: a ``list_changed`` rebuild seen by search and inspect
(and an old cursor failing cleanly), a storm of notifications coalesced, an upstream
killed mid-call (that call fails, the next after the restart succeeds, and the other
tools it came back with are offered), an HTTP upstream that went away reconnected when
it is back, a call held for a person abandoned by the restart (its answer fails
cleanly), an upstream that starts late joining, and a rebuild the swap refuses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from opgate import (
    Completed,
    Failed,
    FailureCode,
    InputMode,
    InputResponse,
    LocalPolicy,
    Pending,
    Registry,
    Text,
)
from opgate.mcp import GatewayServer
from opgate.upstream import Backoff, Catalog, Change, load_config, open_catalog

from conftest import await_port, free_port, stop_process
from mcp_client import connect, error_of
from relay_servers import changing_entry
from upstream_servers import HERE

pytestmark = pytest.mark.anyio

FAST = Backoff(first=0.2, cap=0.5, heartbeat=0.5)


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Changes:
    """A catalog's changes as a listener saw them."""

    def __init__(self, catalog: Catalog) -> None:
        self.seen: list[Change] = []
        self._event = anyio.Event()
        catalog.on_change(self._record)

    def _record(self, change: Change) -> None:
        self.seen.append(change)
        self._event.set()

    async def next(self, seconds: float = 30) -> Change:
        """Wait for the next change after those seen so far."""
        count = len(self.seen)
        with anyio.fail_after(seconds):
            while len(self.seen) == count:
                self._event = anyio.Event()
                await self._event.wait()
        return self.seen[-1]


def tools_file(tmp_path: Path, names: list[str]) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(names), "utf-8")
    return path


@asynccontextmanager
async def opened(servers: dict[str, Any], **options: Any) -> AsyncIterator[Catalog]:
    config = load_config({"mcpServers": servers})
    async with open_catalog(
        config, start_timeout=60, call_timeout=60, backoff=FAST, settle=0.2, **options
    ) as catalog:
        yield catalog


async def invoke(registry: Registry, name: str, arguments: dict[str, Any]) -> Any:
    outcome = await registry.invoke(None, name, arguments)
    assert isinstance(outcome, Completed), outcome
    return outcome


async def connected(catalog: Catalog, name: str, seconds: float = 60) -> None:
    with anyio.fail_after(seconds):
        while not catalog.sessions[name].status().connected:
            await anyio.sleep(0.05)


async def test_list_changed_swaps_the_served_registry(tmp_path: Path, era: str) -> None:
    path = tools_file(tmp_path, ["first"])
    async with opened({"shifty": changing_entry(era, path)}) as catalog:
        changes = Changes(catalog)
        gateway = GatewayServer(catalog.registry(LocalPolicy()))
        catalog.follow(gateway)
        old = gateway.registry
        client_era = "legacy" if era == "legacy" else "2026-07-28"
        async with connect(gateway, client_era) as client:
            page = await client.call_tool("search", {"query": "", "limit": 1})
            assert page.structured_content is not None
            cursor = page.structured_content["next_cursor"]
            assert cursor
            assert error_of(await client.call_tool("inspect", {"name": "shifty.second"}))
            tools_file(tmp_path, ["first", "second"])
            announced = await client.call_tool(
                "invoke", {"name": "shifty.announce", "arguments": {"count": 1}}
            )
            assert not announced.is_error, announced
            change = await changes.next()
            assert change.upstreams == ("shifty",)
            assert change.joined == ()
            assert change.summary().startswith("change 1: the tools of shifty changed; ")
            assert "shifty.second" in {operation.name for operation in change.operations}
            assert gateway.registry is not old
            assert gateway.registry.revision != old.revision
            found = await client.call_tool("search", {"query": "second"})
            assert found.structured_content is not None
            assert [item["name"] for item in found.structured_content["items"]] == ["shifty.second"]
            spec = await client.call_tool("inspect", {"name": "shifty.second"})
            assert not spec.is_error
            assert spec.structured_content is not None
            assert spec.structured_content["summary"] == "Tool second."
            called = await client.call_tool("invoke", {"name": "shifty.second", "arguments": {}})
            assert called.content[0].text == "second called"  # type: ignore[union-attr]
            stale = await client.call_tool("search", {"query": "", "cursor": cursor})
            assert error_of(stale)[0] == "invalid_cursor"
        assert catalog.report.rebuilds == 1
        assert "shifty.second" in catalog.tools


async def test_a_storm_of_list_changed_is_coalesced(tmp_path: Path, era: str) -> None:
    path = tools_file(tmp_path, ["first"])
    async with opened({"shifty": changing_entry(era, path)}) as catalog:
        changes = Changes(catalog)
        registry = catalog.registry(LocalPolicy())
        await invoke(registry, "shifty.announce", {"count": 40})
        await anyio.sleep(1.0)
        assert changes.seen == []  # the same tools listed: nothing to rebuild
        tools_file(tmp_path, ["first", "third"])
        await invoke(registry, "shifty.announce", {"count": 40})
        await changes.next()
        await anyio.sleep(1.0)  # whatever the storm still makes would arrive by now
        assert len(changes.seen) == 1
        assert catalog.report.rebuilds == 1


async def test_an_upstream_killed_mid_call_is_restarted_with_its_new_tools(
    tmp_path: Path,
) -> None:
    path = tools_file(tmp_path, ["first"])
    async with opened({"shifty": changing_entry("modern", path)}) as catalog:
        changes = Changes(catalog)
        gateway = GatewayServer(catalog.registry(LocalPolicy()))
        catalog.follow(gateway)
        pid = int((await invoke(gateway.registry, "shifty.pid", {})).result.content[0].text)
        outcomes: list[Any] = []

        async def call() -> None:
            registry = gateway.registry
            outcomes.append(await registry.invoke(None, "shifty.wait", {"seconds": 30}))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await anyio.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
            tools_file(tmp_path, ["first", "fourth"])  # what it lists when it comes back
        (killed,) = outcomes
        assert isinstance(killed, Failed)
        assert killed.failure.message == "upstream 'shifty' closed the connection during the call"
        down = await gateway.registry.invoke(None, "shifty.first", {})
        assert isinstance(down, Failed)
        assert "is not connected" in down.failure.message
        assert "restarting it" in down.failure.message
        change = await changes.next()
        assert change.upstreams == ("shifty",)
        status = catalog.sessions["shifty"].status()
        assert (status.connected, status.restarts) == (True, 1)
        after = await invoke(gateway.registry, "shifty.fourth", {})
        assert after.result.content == (Text("fourth called"),)
        again = await invoke(gateway.registry, "shifty.first", {})
        assert again.result.content == (Text("first called"),)


def kit_over_http(port: int) -> subprocess.Popen[bytes]:
    """``KIT`` (``tests/upstream_servers.py``) over streamable HTTP on ``port``."""
    process = subprocess.Popen(
        [sys.executable, str(HERE), "kit", "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    await_port(process, port, lambda: "(stderr not kept)")
    return process


async def test_an_http_upstream_that_went_away_is_reconnected() -> None:
    port = free_port()
    process = kit_over_http(port)
    try:
        async with opened({"web": {"url": f"http://127.0.0.1:{port}/mcp"}}) as catalog:
            registry = catalog.registry(LocalPolicy())
            await invoke(registry, "web.echo", {"text": "before"})
            process.kill()  # it goes away at once, its streams with it
            process.wait()
            gone = await registry.invoke(None, "web.echo", {"text": "while away"})
            assert isinstance(gone, Failed), gone
            assert gone.failure.message.startswith("upstream 'web' ")
            with anyio.fail_after(30):
                while catalog.sessions["web"].status().attempts == 0:
                    await anyio.sleep(0.05)
            away = catalog.sessions["web"].status()
            assert away.reason.startswith("could not reach the upstream")
            assert away.retrying
            process = kit_over_http(port)
            await connected(catalog, "web")
            back = await invoke(registry, "web.echo", {"text": "back"})
            assert back.result.structured == {"result": "back"}
            assert catalog.sessions["web"].status().restarts == 1
    finally:
        stop_process(process)


async def test_a_restart_abandons_the_held_calls_of_the_old_connection(tmp_path: Path) -> None:
    path = tools_file(tmp_path, [])
    async with opened({"shifty": changing_entry("legacy", path)}) as catalog:
        registry = catalog.registry(LocalPolicy())
        pid = int((await invoke(registry, "shifty.pid", {})).result.content[0].text)
        form = {InputMode.FORM}
        asked = await registry.invoke(None, "shifty.ask", {}, input_support=form)
        assert isinstance(asked, Pending), asked
        session = catalog.sessions["shifty"]
        assert len(session.held) == 1
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(30):
            while session.status().restarts == 0:
                await anyio.sleep(0.05)
        assert len(session.held) == 0
        assert session.in_flight == 0
        with anyio.fail_after(10):  # it fails at once, it does not hang
            answered = await registry.invoke(
                None,
                "shifty.ask",
                {},
                input_support=form,
                resume=(asked.continuation, InputResponse.accept({"n": 1})),
            )
        assert isinstance(answered, Failed), answered
        assert answered.failure.code is FailureCode.OPERATION_FAILED
        assert "is no longer waiting for this answer" in answered.failure.message
        again = await registry.invoke(None, "shifty.ask", {}, input_support=form)
        assert isinstance(again, Pending), again  # the new connection asks as before
        done = await registry.invoke(
            None,
            "shifty.ask",
            {},
            input_support=form,
            resume=(again.continuation, InputResponse.accept({"n": 2})),
        )
        assert isinstance(done, Completed), done
        assert done.result.content == (Text("asked accept"),)


async def test_a_process_that_dies_between_calls_is_found_and_restarted(
    tmp_path: Path,
) -> None:
    path = tools_file(tmp_path, ["first"])
    async with opened({"shifty": changing_entry("legacy", path)}) as catalog:
        registry = catalog.registry(LocalPolicy())
        pid = int((await invoke(registry, "shifty.pid", {})).result.content[0].text)
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(30):  # the heartbeat finds it, and the restart follows
            while catalog.sessions["shifty"].status().restarts == 0:
                await anyio.sleep(0.05)
        await connected(catalog, "shifty")
        newer = int((await invoke(registry, "shifty.pid", {})).result.content[0].text)
        assert newer != pid


async def test_an_upstream_that_starts_late_joins(tmp_path: Path) -> None:
    path = tools_file(tmp_path, ["first"])
    gate = tmp_path / "gate"
    servers = {
        "early": changing_entry("modern", path),
        "late": changing_entry("legacy", path, gate),
    }
    async with opened(servers) as catalog:
        report = catalog.report
        late = {status.name: status for status in report.upstreams}["late"]
        assert not late.connected
        assert late.retrying
        assert late.reason.startswith("the handshake failed")
        assert "; retrying" in str(late)
        assert all(name.startswith("early.") for name in catalog.tools)
        changes = Changes(catalog)
        gateway = GatewayServer(catalog.registry(LocalPolicy()))
        catalog.follow(gateway)
        with anyio.fail_after(30):
            while catalog.sessions["late"].status().attempts < 2:
                await anyio.sleep(0.05)  # it keeps being tried
        gate.touch()
        change = await changes.next()
        assert change.upstreams == ("late",)
        assert change.joined == ("late",)
        assert change.summary() == f"change 1: late joined; {len(change.operations)} operations now"
        status = catalog.sessions["late"].status()
        assert status.connected
        assert status.since is not None
        assert "late.first" in gateway.registry
        joined = await invoke(gateway.registry, "late.first", {})
        assert joined.result.content == (Text("first called"),)
        assert catalog.report.failed == ()


async def test_a_rebuild_the_swap_refuses_keeps_the_served_registry(tmp_path: Path) -> None:
    path = tools_file(tmp_path, ["first"])
    async with opened({"shifty": changing_entry("modern", path)}) as catalog:
        gateway = GatewayServer(catalog.registry(LocalPolicy()), pinned=["shifty.first"])
        catalog.follow(gateway)
        changes = Changes(catalog)  # after follow: called only for changes it accepts
        served = gateway.registry
        tools_file(tmp_path, ["second"])
        await invoke(served, "shifty.announce", {"count": 1})
        with anyio.fail_after(30):
            while not catalog.report.refused:
                await anyio.sleep(0.05)
        refused = catalog.report.refused
        assert "ConfigurationError" in refused
        assert "pinned operation 'shifty.first' is not in the registry" in refused
        assert any(line.startswith("rebuild refused: ") for line in catalog.report.lines())
        assert gateway.registry is served
        assert changes.seen == []
        assert "shifty.first" in catalog.tools  # the catalog kept its operations too
        tools_file(tmp_path, ["first", "second"])
        await invoke(served, "shifty.announce", {"count": 1})
        change = await changes.next()
        assert {"shifty.first", "shifty.second"} <= {op.name for op in change.operations}
        assert catalog.report.refused == ""
        assert "shifty.second" in gateway.registry
