"""``opgate serve`` builds its target with the collector paused, then freezes the heap it
built: full collections no longer walk the registry.

The served module's one operation reports, from inside the serving process, what the
collector sees: the frozen count, whether the registry is among the objects a full
collection walks, and whether a cycle made during the request is still collected.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from opgate.cli._serve import _collector_paused

from conftest import ROOT, await_port, free_port, serve_environment, stop_process

pytestmark = pytest.mark.anyio

APP = '''
import gc
import json
import weakref

from opgate import Registry, operation


#: The module is imported, and its registry built, while ``opgate serve`` pauses the
#: collector (a zero first threshold): a start-up's millions of allocations trigger no passes.
IMPORTED_WITH_COLLECTOR = gc.isenabled() and gc.get_threshold()[0] != 0


class Node:
    pass


class AllowAll:
    def scope_key(self, ctx):
        return "everyone"

    def authorize(self, ctx, request):
        return None


@operation
def heap() -> str:
    """Report what the collector sees in this process."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    probe = weakref.ref(first)
    del first, second
    gc.collect()
    walked = gc.get_objects()
    return json.dumps(
        {
            "frozen": gc.get_freeze_count(),
            "registry tracked": gc.is_tracked(registry),
            "registry walked": any(item is registry for item in walked),
            "cycle collected": probe() is None,
            "collector enabled": gc.isenabled(),
            "imported with collector": IMPORTED_WITH_COLLECTOR,
        }
    )


registry = Registry([heap], AllowAll())
'''


def environment() -> dict[str, str]:
    """``serve_environment()`` with this checkout's sources first, as an absolute path:
    the server runs in another directory."""
    env = serve_environment()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env["PYTHONPATH"]])
    return env


@asynccontextmanager
async def client(folder: Path, transport: str) -> AsyncIterator[Client]:
    command = [sys.executable, "-m", "opgate", "serve", "heap_app.py"]
    if transport == "stdio":
        parameters = StdioServerParameters(
            command=command[0], args=command[1:], cwd=str(folder), env=environment()
        )
        async with Client(parameters) as session:
            yield session
        return
    port = free_port()
    log = folder / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--http", f"127.0.0.1:{port}"],
            cwd=folder,
            env=environment(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        await_port(process, port, log.read_text)
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as session,
        ):
            yield session
    finally:
        stop_process(process)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_serve_freezes_the_registry_and_still_collects_requests(
    tmp_path: Path, transport: str
) -> None:
    (tmp_path / "heap_app.py").write_text(APP)
    with anyio.fail_after(60):
        async with client(tmp_path, transport) as session:
            result = await session.call_tool("invoke", {"name": "heap", "arguments": {}})
    assert not result.is_error, result.content
    seen = json.loads(result.content[0].text)
    assert seen["registry tracked"]
    assert not seen["registry walked"]
    assert seen["frozen"] > 10_000  # the imported SDK and the registry, not a handful
    assert seen["cycle collected"]
    assert seen["collector enabled"]
    assert seen["imported with collector"] is False


@pytest.fixture
def collector() -> Iterator[None]:
    """Whatever a test does to the collector is undone after it."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()


def test_a_target_that_turns_the_collector_off_keeps_it_off(collector: None) -> None:
    """A target may run without the cyclic collector (``gc.disable()`` at import, its own
    ``gc.collect()`` later): the pause around its import must not turn it back on."""
    gc.enable()
    with _collector_paused():
        gc.disable()  # the target's own choice
    assert not gc.isenabled()


def test_a_target_that_tunes_the_collector_keeps_its_thresholds(collector: None) -> None:
    gc.enable()
    with _collector_paused():
        gc.set_threshold(50_000, 20, 20)
    assert gc.isenabled()
    assert gc.get_threshold() == (50_000, 20, 20)


def test_the_collector_runs_again_after_a_failed_build(collector: None) -> None:
    gc.enable()
    before = gc.get_threshold()
    with pytest.raises(KeyboardInterrupt), _collector_paused():
        raise KeyboardInterrupt
    assert gc.isenabled()
    assert gc.get_threshold() == before
