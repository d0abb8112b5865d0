"""MCP over streamable HTTP: per-call cost in the 2026-07-28 era, and collector pauses.

``python benchmarks/bench_mcp_http.py [--source synthetic:10000 | --source botocore]
[--calls 300] [--seconds 0] [--pins 1] [--freeze | --serve]``

The official ``mcp.Client`` (``mode="2026-07-28"``) calls a ``GatewayServer`` over the
whole HTTP request path of the SDK and of opgate (DNS-rebinding check, ``ExactHTTP``,
the SDK's pre-dispatch check of ``Mcp-Param-*`` headers, dispatch, SSE framing):

* by default in this process, through httpx's ASGI transport to ``http_app()`` (no
  socket; client and server share this thread and its heap); ``--freeze`` calls
  ``gc.freeze()`` once the server is built, as ``opgate serve`` does;
* with ``--serve``, against ``opgate serve --http`` in a child process over loopback,
  which freezes its heap itself; the server's CPU time per call is read from
  ``/proc`` (all its threads, nanoseconds).

The catalog is ``--source``: ``synthetic:N`` (``common.synthetic_catalog``) or
``botocore`` (the real catalog, ``real_catalog.py``), plus the invoked operation
(``billing.invoices.create_0``, five validated fields) for the real one. ``--pins``
pins the invoked operation and the next catalog operations (0 pins none).

The variants: ``search`` with the next query of a seeded mix, ``invoke`` of the invoked
operation and, with a pin, the pinned operation called as its own tool. They run in
blocks, one block of each in turn per round, until every variant has had ``--calls``
calls and at least ``--seconds`` have passed. ``tools/list runs per call`` counts the
runs of the server's ``tools/list`` handler during the calls (in process only): the SDK
lists tools to find a tool's input schema when the server gives it no lookup.

The collector table counts the collections during the calls by generation and the
longest of each (``gc.callbacks``, in the server's process), then times full
``gc.collect()`` passes over the server's heap: the pause a request meets when a full
collection falls on it. With ``--serve`` the served catalog has one more operation,
``bench.collector``, which reports these figures from inside the server.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench_mcp import ARGUMENTS, create_invoice
from bench_real import LIMITS, catalog_for
from bench_real import to_operations as real_operations
from common import (
    SOURCE_ENV,
    AllowAll,
    Table,
    argument_parser,
    bench_environment,
    free_port,
    print_heading,
    print_tables,
    query_mix,
    reap,
    summarize,
    synthetic_catalog,
    to_operations,
)
from opgate import Operation, Registry, Result, Text, finish
from opgate.mcp import GatewayServer
from real_catalog import real_queries

__all__ = [
    "catalog_of",
    "collector_operation",
    "listening_child",
    "main",
    "run",
    "served_registry",
    "server_cpu_ns",
]

#: Distinct search queries (calls cycle through them).
QUERIES = 200

#: Calls of each variant before the measured ones.
WARMUP = 20

#: Rounds at least (one block of each variant per round).
ROUNDS = 5

#: Full collections timed after the calls.
FULL_COLLECTIONS = 3

#: Where the in-process client sends its requests (the app's default allowed hosts).
URL = "http://127.0.0.1:8000/mcp"

#: How long the served child may take to build and listen (the real catalog loads in
#: about a minute on a busy machine).
STARTUP_SECONDS = 600

#: The operation reporting the collector from inside a served child.
COLLECTOR = "bench.collector"


@dataclass(slots=True)
class _Collections:
    """Collections seen through ``gc.callbacks``: count and longest, per generation."""

    started: int = 0
    counts: list[int] = field(default_factory=lambda: [0, 0, 0])
    longest_ns: list[int] = field(default_factory=lambda: [0, 0, 0])

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter_ns()
            return
        generation = info["generation"]
        self.counts[generation] += 1
        took = time.perf_counter_ns() - self.started
        self.longest_ns[generation] = max(self.longest_ns[generation], took)

    def reset(self) -> None:
        self.counts[:] = [0, 0, 0]
        self.longest_ns[:] = [0, 0, 0]


def _collector_report(seen: _Collections) -> dict[str, Any]:
    """The collector's figures now: frozen and tracked objects, the collections
    ``seen`` counted, then ``FULL_COLLECTIONS`` full passes timed (wall and CPU ns)."""
    counts, longest = list(seen.counts), list(seen.longest_ns)
    walls: list[int] = []
    cpus: list[int] = []
    for _ in range(FULL_COLLECTIONS):
        cpu_begin = time.process_time_ns()
        begin = time.perf_counter_ns()
        gc.collect()
        walls.append(time.perf_counter_ns() - begin)
        cpus.append(time.process_time_ns() - cpu_begin)
    return {
        "frozen": gc.get_freeze_count(),
        "tracked": len(gc.get_objects()),
        "counts": counts,
        "longest_ns": longest,
        "full_ns": walls,
        "full_cpu_ns": cpus,
    }


def collector_operation(seen: _Collections) -> Operation:
    """``bench.collector``: ``{"reset": true}`` restarts the count of collections;
    otherwise it reports ``_collector_report`` as JSON text."""

    async def report(invocation: Any) -> Any:
        if invocation.arguments.get("reset"):
            seen.reset()
            return finish(Result([Text("reset")]))
        return finish(Result([Text(json.dumps(_collector_report(seen)))]))

    return Operation(
        COLLECTOR,
        "Report the collector's figures from inside the server",
        report,
        group="bench",
        input_schema={"type": "object", "properties": {"reset": {"type": "boolean"}}},
    )


def catalog_of(source: str) -> tuple[list[Operation], list[str], Any]:
    """The operations, the query mix and the limits of ``source``."""
    kind, _, size = source.partition(":")
    if kind == "synthetic" and size.isdigit():
        catalog = synthetic_catalog(int(size))
        return to_operations(catalog, create_invoice), query_mix(QUERIES), None
    real = catalog_for(source, 1)
    invoked = to_operations(synthetic_catalog(1), create_invoice)
    return invoked + real_operations(real), real_queries(real, QUERIES), LIMITS


def served_registry() -> Registry:
    """The registry ``opgate serve`` serves with ``--serve``: the catalog named by
    ``$OPGATE_BENCH_SOURCE`` and ``bench.collector``, the collections counted from now."""
    operations, _, limits = catalog_of(os.environ.get(SOURCE_ENV, "synthetic:10000"))
    seen = _Collections()
    gc.callbacks.append(seen)
    return Registry([*operations, collector_operation(seen)], AllowAll(), limits=limits)


def _counted_list(server: GatewayServer) -> list[int]:
    """Wrap the SDK server's ``tools/list`` handler; the list holds its run count."""
    sdk = server.sdk_server
    entry = sdk.get_request_handler("tools/list")
    assert entry is not None
    runs = [0]

    async def counted(ctx: Any, params: Any) -> Any:
        runs[0] += 1
        return await entry.handler(ctx, params)

    sdk.add_request_handler("tools/list", entry.params_type, counted)
    return runs


def _checked(result: Any) -> Any:
    if result.is_error:
        raise RuntimeError(f"the call failed: {result.content}")
    return result


Call = Callable[[Client, int], Awaitable[Any]]


@dataclass(slots=True)
class _Times:
    """One variant's measured calls: wall and client-process CPU ns per call, and the
    server's CPU ns over all of them (``None`` in process)."""

    walls: list[int] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)
    server_cpu_ns: int | None = None


def _variants(invoked: str, queries: Sequence[str], pinned: bool) -> dict[str, Call]:
    count = len(queries)

    async def search(client: Client, index: int) -> Any:
        return await client.call_tool("search", {"query": queries[index % count]})

    async def invoke(client: Client, index: int) -> Any:
        return await client.call_tool("invoke", {"name": invoked, "arguments": ARGUMENTS})

    async def pinned_call(client: Client, index: int) -> Any:
        return await client.call_tool(invoked, ARGUMENTS)

    chosen: dict[str, Call] = {"search": search, "invoke": invoke}
    if pinned:
        chosen["pinned tool"] = pinned_call
    return chosen


async def _measure(
    client: Client,
    variants: dict[str, Call],
    *,
    calls: int,
    seconds: float,
    server_cpu: Callable[[], int] | None,
) -> dict[str, _Times]:
    """Run the variants in blocks, round after round; their times."""
    await client.list_tools()  # the client's own cache of output schemas
    for call in variants.values():
        for index in range(WARMUP):
            _checked(await call(client, index))
    times = {label: _Times(server_cpu_ns=None if server_cpu is None else 0) for label in variants}
    block = max(1, calls // ROUNDS)
    clock = time.perf_counter_ns
    cpu_clock = time.process_time_ns
    deadline = time.monotonic() + seconds
    done = 0
    while done < calls or time.monotonic() < deadline:
        for label, call in variants.items():
            measured = times[label]
            server_begin = 0 if server_cpu is None else server_cpu()
            for step in range(block):
                cpu_begin = cpu_clock()
                begin = clock()
                _checked(await call(client, done + step))
                end = clock()
                measured.cpus.append(cpu_clock() - cpu_begin)
                measured.walls.append(end - begin)
            if server_cpu is not None and measured.server_cpu_ns is not None:
                measured.server_cpu_ns += server_cpu() - server_begin
        done += block
    return times


async def _in_process(
    server: GatewayServer,
    variants: dict[str, Call],
    *,
    calls: int,
    seconds: float,
    freeze: bool,
) -> tuple[dict[str, _Times], float, dict[str, Any]]:
    """The calls through the ASGI transport; tools/list runs per call; the collector."""
    list_runs = _counted_list(server)
    app = server.http_app()
    if freeze:
        gc.freeze()
    seen = _Collections()
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url=URL, timeout=60)
        async with (
            http,
            Client(streamable_http_client(URL, http_client=http), mode="2026-07-28") as client,
        ):
            listed = list_runs[0]
            gc.callbacks.append(seen)
            try:
                times = await _measure(
                    client, variants, calls=calls, seconds=seconds, server_cpu=None
                )
            finally:
                gc.callbacks.remove(seen)
    # The client's one listing is before the warm-up; the lookup never lists.
    made = sum(len(measured.walls) + WARMUP for measured in times.values())
    per_call = (list_runs[0] - listed - 1) / made
    report = _collector_report(seen)
    if freeze:
        gc.unfreeze()
    return times, per_call, report


def server_cpu_ns(pid: int) -> int:
    """CPU time of every thread of process ``pid`` so far (``/proc/PID/task/*/schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a worker thread that ended meanwhile
    return total


@asynccontextmanager
async def listening_child(
    command: Callable[[str], list[str]], env: dict[str, str], what: str
) -> AsyncIterator[tuple[str, int]]:
    """``command(HOST:PORT)`` in a child, in this folder with ``env``, on a free loopback
    port: its MCP URL and pid once it listens (``what`` names it in errors); stopped on
    leaving."""
    port = free_port()
    process = subprocess.Popen(
        command(f"127.0.0.1:{port}"),
        cwd=Path(__file__).resolve().parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited with {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} did not listen in time") from None
                await asyncio.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp", process.pid
    finally:
        process.terminate()
        reap(process)


@asynccontextmanager
async def _served(source: str, pins: Sequence[str]) -> AsyncIterator[tuple[str, int]]:
    """``opgate serve bench_mcp_http:served_registry --http`` in a child; its URL and pid."""
    command = [sys.executable, "-m", "opgate", "serve", "bench_mcp_http:served_registry"]
    command += [f"--pin={name}" for name in pins]
    async with listening_child(
        lambda address: [*command, "--http", address], bench_environment(source), "opgate serve"
    ) as served:
        yield served


async def _over_loopback(
    source: str,
    pins: Sequence[str],
    variants: dict[str, Call],
    *,
    calls: int,
    seconds: float,
) -> tuple[dict[str, _Times], dict[str, Any]]:
    """The calls against ``opgate serve --http``; the collector as the server reports it."""
    async with (
        _served(source, pins) as (url, pid),
        httpx2.AsyncClient(timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
    ):
        _checked(await client.call_tool("invoke", {"name": COLLECTOR, "arguments": {}}))
        _checked(
            await client.call_tool("invoke", {"name": COLLECTOR, "arguments": {"reset": True}})
        )
        times = await _measure(
            client,
            variants,
            calls=calls,
            seconds=seconds,
            server_cpu=lambda: server_cpu_ns(pid),
        )
        reply = _checked(await client.call_tool("invoke", {"name": COLLECTOR, "arguments": {}}))
        report: dict[str, Any] = json.loads(reply.content[0].text)
    return times, report


def run(
    source: str = "synthetic:10000",
    *,
    calls: int = 300,
    seconds: float = 0.0,
    pins: int = 1,
    freeze: bool = False,
    serve: bool = False,
) -> list[Table]:
    """Measure the calls and the collector; return the calls and collector tables."""
    operations, queries, limits = catalog_of(source)
    invoked = operations[0].name
    pinned = [op.name for op in operations[: max(0, pins)]]
    size = len(operations)
    variants = _variants(invoked, queries, bool(pinned))
    per_call_lists: float | None = None
    if serve:
        del operations
        times, report = asyncio.run(
            _over_loopback(source, pinned, variants, calls=calls, seconds=seconds)
        )
        size += 1  # bench.collector
        where = "opgate serve --http in a child, loopback"
    else:
        registry = Registry(operations, AllowAll(), limits=limits)
        del operations
        server = GatewayServer(registry, pinned=pinned)
        times, per_call_lists, report = asyncio.run(
            _in_process(server, variants, calls=calls, seconds=seconds, freeze=freeze)
        )
        where = "in process" + (", heap frozen" if freeze else "")

    trips = Table(
        f"MCP over streamable HTTP at {size:,} operations ({source}; 2026-07-28, official "
        f"client, {where}, {len(pinned)} pinned)",
        (
            "call",
            "runs",
            "median ms",
            "p99 ms",
            "max ms",
            "client CPU median ms",
            "client CPU max ms",
            "server CPU mean ms",
            "tools/list runs per call",
        ),
    )
    for label, measured in times.items():
        wall = summarize(measured.walls)
        cpu = summarize(measured.cpus)
        server_cpu = measured.server_cpu_ns
        trips.add(
            call=label,
            runs=wall.runs,
            **{
                "median ms": wall.median_ns / 1e6,
                "p99 ms": wall.p99_ns / 1e6,
                "max ms": wall.max_ns / 1e6,
                "client CPU median ms": cpu.median_ns / 1e6,
                "client CPU max ms": cpu.max_ns / 1e6,
                "server CPU mean ms": None
                if server_cpu is None
                else server_cpu / len(measured.walls) / 1e6,
                "tools/list runs per call": per_call_lists,
            },
        )
    trips.notes.append(
        "client CPU = this process's CPU time for the call (in process it holds the server "
        "too). server CPU = the served child's CPU time over the variant's calls, all its "
        "threads. tools/list runs per call = runs of the tools/list handler beyond the "
        "client's own one listing, over every tools/call (warm-up included); in process only."
    )

    collector = Table(
        "The collector in the server's process: during the calls, and full collections after",
        (
            "frozen objects",
            "tracked objects",
            "collections gen 0 / 1 / 2",
            "longest gen 0 / 1 / 2 ms",
            "full gc.collect() min ms",
            "full gc.collect() max ms",
            "full gc.collect() CPU min ms",
        ),
    )
    collector.add(
        **{
            "frozen objects": report["frozen"],
            "tracked objects": report["tracked"],
            "collections gen 0 / 1 / 2": " / ".join(str(n) for n in report["counts"]),
            "longest gen 0 / 1 / 2 ms": " / ".join(
                f"{ns / 1e6:.1f}" for ns in report["longest_ns"]
            ),
            "full gc.collect() min ms": min(report["full_ns"]) / 1e6,
            "full gc.collect() max ms": max(report["full_ns"]) / 1e6,
            "full gc.collect() CPU min ms": min(report["full_cpu_ns"]) / 1e6,
        }
    )
    collector.notes.append(
        "tracked objects = what a full collection walks (gc.get_objects(); frozen objects "
        f"are not among them); {FULL_COLLECTIONS} full collections are timed after the "
        "calls, in a row."
    )
    return [trips, collector]


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--source", default="synthetic:10000", help="synthetic:N or botocore")
    parser.add_argument("--calls", type=int, default=300, help="calls per variant, at least")
    parser.add_argument("--seconds", type=float, default=0.0, help="measure at least this long")
    parser.add_argument("--pins", type=int, default=1, help="pinned operations (0 for none)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--freeze", action="store_true", help="in process: gc.freeze() once built")
    mode.add_argument("--serve", action="store_true", help="against opgate serve --http")
    args = parser.parse_args(argv)
    print_heading("MCP over streamable HTTP")
    tables = run(
        args.source,
        calls=args.calls,
        seconds=args.seconds,
        pins=args.pins,
        freeze=args.freeze,
        serve=args.serve,
    )
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
