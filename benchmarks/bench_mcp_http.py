"""MCP over streamable HTTP in process: per-call cost in the 2026-07-28 era, and collector pauses.

``python benchmarks/bench_mcp_http.py [--source synthetic:10000 | --source botocore]
[--calls 300] [--seconds 0] [--pins 1] [--freeze]``

The official ``mcp.Client`` (``mode="2026-07-28"``) drives ``GatewayServer.http_app()``
through httpx's ASGI transport: the whole HTTP request path of the SDK and of opgate
(DNS-rebinding check, ``ExactHTTP``, the SDK's pre-dispatch checks of the
``Mcp-Param-*`` headers, dispatch, SSE framing) runs in this one thread, without a
socket. The catalog is ``--source``: ``synthetic:N`` (``common.synthetic_catalog``) or
``botocore`` (the real catalog, ``real_catalog.py``), plus the invoked operation
(``billing.invoices.create_0``, five validated fields) for the real one. ``--pins``
pins the invoked operation and the next catalog operations (0 pins none).

Calls alternate, one of each variant in turn: ``search`` with the next query of a seeded
mix, ``invoke`` of the invoked operation, and (with a pin) the pinned operation called
as its own tool. They run until every variant has had ``--calls`` calls and at least
``--seconds`` have passed. Each call's wall-clock and process CPU time are taken;
``tools/list runs per call`` counts the runs of the server's ``tools/list`` handler
during them: the SDK lists tools to find a tool's input schema when the server gives it
no lookup.

The collector table counts the collections during the calls by generation and the
longest of each (``gc.callbacks``), then times full ``gc.collect()`` passes over the
server's heap: the pause a request meets when a full collection falls on it.
``--freeze`` calls ``gc.freeze()`` once the server is built, as ``opgate serve`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench_mcp import ARGUMENTS, create_invoice
from bench_real import LIMITS, REAL, catalog_for
from bench_real import to_operations as real_operations
from common import (
    AllowAll,
    Table,
    format_table,
    machine_info,
    query_mix,
    summarize,
    synthetic_catalog,
    to_operations,
)
from opgate import Operation, Registry
from opgate.mcp import GatewayServer
from real_catalog import real_queries

__all__ = ["main", "run"]

#: Distinct search queries (calls cycle through them).
QUERIES = 200

#: Calls of each variant before the measured ones.
WARMUP = 20

#: Full collections timed after the calls.
FULL_COLLECTIONS = 3

#: Where the in-process client sends its requests (the app's default allowed hosts).
URL = "http://127.0.0.1:8000/mcp"


@dataclass(slots=True)
class _Collections:
    """Collections seen through ``gc.callbacks``: count and longest, per generation."""

    started: float = 0.0
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


def _catalog(source: str) -> tuple[list[Operation], list[str], Any]:
    """The operations, the query mix and the limits of ``source``."""
    kind, _, size = source.partition(":")
    if kind == "synthetic" and size.isdigit():
        catalog = synthetic_catalog(int(size))
        return to_operations(catalog, create_invoice), query_mix(QUERIES), None
    real = catalog_for(source, 1)
    invoked = to_operations(synthetic_catalog(1), create_invoice)
    return real_operations(real) + invoked, real_queries(real, QUERIES), LIMITS


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


Call = Callable[[int], Awaitable[Any]]


async def _drive(
    server: GatewayServer,
    variants: Callable[[Client], dict[str, Call]],
    *,
    calls: int,
    seconds: float,
    freeze: bool,
    list_runs: list[int],
) -> tuple[dict[str, tuple[list[int], list[int]]], float, _Collections]:
    """Per variant: wall and CPU ns of each call; tools/list runs per measured call; the
    collections."""
    app = server.http_app()
    if freeze:
        gc.freeze()
    collections = _Collections()
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url=URL, timeout=60)
        async with (
            http,
            Client(streamable_http_client(URL, http_client=http), mode="2026-07-28") as client,
        ):
            chosen = variants(client)
            await client.list_tools()  # the client's own cache of output schemas
            for call in chosen.values():
                for index in range(WARMUP):
                    _checked(await call(index))
            listed = list_runs[0]
            times: dict[str, tuple[list[int], list[int]]] = {label: ([], []) for label in chosen}
            order = list(chosen.items())
            clock = time.perf_counter_ns
            cpu_clock = time.process_time_ns
            deadline = time.monotonic() + seconds
            done = 0
            gc.callbacks.append(collections)
            try:
                while done < calls * len(order) or time.monotonic() < deadline:
                    label, call = order[done % len(order)]
                    cpu_begin = cpu_clock()
                    begin = clock()
                    _checked(await call(done // len(order)))
                    end = clock()
                    walls, cpus = times[label]
                    cpus.append(cpu_clock() - cpu_begin)
                    walls.append(end - begin)
                    done += 1
            finally:
                gc.callbacks.remove(collections)
            per_call = (list_runs[0] - listed) / done
    return times, per_call, collections


def run(
    source: str = "synthetic:10000",
    *,
    calls: int = 300,
    seconds: float = 0.0,
    pins: int = 1,
    freeze: bool = False,
) -> list[Table]:
    """Measure the calls and the collector; return the calls and collector tables."""
    operations, queries, limits = _catalog(source)
    invoked = operations[-1].name if source == REAL else operations[0].name
    others = [op.name for op in operations if op.name != invoked]
    pinned = [invoked, *others[: pins - 1]] if pins > 0 else []
    registry = Registry(operations, AllowAll(), limits=limits)
    size = len(operations)
    del operations, others
    server = GatewayServer(registry, pinned=pinned)
    list_runs = _counted_list(server)
    count = len(queries)

    def variants(client: Client) -> dict[str, Call]:
        async def search(index: int) -> Any:
            return await client.call_tool("search", {"query": queries[index % count]})

        async def invoke(index: int) -> Any:
            return await client.call_tool("invoke", {"name": invoked, "arguments": ARGUMENTS})

        async def pinned_call(index: int) -> Any:
            return await client.call_tool(invoked, ARGUMENTS)

        chosen: dict[str, Call] = {"search": search, "invoke": invoke}
        if pinned:
            chosen["pinned tool"] = pinned_call
        return chosen

    times, per_call_lists, seen = asyncio.run(
        _drive(server, variants, calls=calls, seconds=seconds, freeze=freeze, list_runs=list_runs)
    )

    title = (
        f"MCP over streamable HTTP at {size:,} operations ({source}; 2026-07-28, official "
        f"client in process, {len(pinned)} pinned{', heap frozen' if freeze else ''})"
    )
    trips = Table(
        title,
        (
            "call",
            "runs",
            "median ms",
            "p99 ms",
            "max ms",
            "CPU median ms",
            "CPU mean ms",
            "CPU max ms",
            "tools/list runs per call",
        ),
    )
    for label, (walls, cpus) in times.items():
        wall = summarize(walls)
        cpu = summarize(cpus)
        trips.add(
            call=label,
            runs=wall.runs,
            **{
                "median ms": wall.median_ns / 1e6,
                "p99 ms": wall.p99_ns / 1e6,
                "max ms": wall.max_ns / 1e6,
                "CPU median ms": cpu.median_ns / 1e6,
                "CPU mean ms": sum(cpus) / len(cpus) / 1e6,
                "CPU max ms": cpu.max_ns / 1e6,
                "tools/list runs per call": per_call_lists,
            },
        )
    trips.notes.append(
        "CPU = this process's CPU time for the call: client and server both run in it. "
        "tools/list runs per call = runs of the tools/list handler during the measured "
        "calls over their number (the client lists tools once, before the warm-up)."
    )

    full: list[int] = []
    full_cpu: list[int] = []
    for _ in range(FULL_COLLECTIONS):
        cpu_begin = time.process_time_ns()
        begin = time.perf_counter_ns()
        gc.collect()
        full.append(time.perf_counter_ns() - begin)
        full_cpu.append(time.process_time_ns() - cpu_begin)
    collector = Table(
        "The collector during the calls, and a full collection after them",
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
            "frozen objects": gc.get_freeze_count(),
            "tracked objects": len(gc.get_objects()),
            "collections gen 0 / 1 / 2": " / ".join(str(n) for n in seen.counts),
            "longest gen 0 / 1 / 2 ms": " / ".join(f"{ns / 1e6:.1f}" for ns in seen.longest_ns),
            "full gc.collect() min ms": min(full) / 1e6,
            "full gc.collect() max ms": max(full) / 1e6,
            "full gc.collect() CPU min ms": min(full_cpu) / 1e6,
        }
    )
    collector.notes.append(
        "tracked objects = what a full collection walks (gc.get_objects(); frozen objects "
        "are not among them); the full collections are timed after the calls, "
        f"{FULL_COLLECTIONS} in a row."
    )
    if freeze:
        gc.unfreeze()
    return [trips, collector]


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--source", default="synthetic:10000", help="synthetic:N or botocore")
    parser.add_argument("--calls", type=int, default=300, help="calls per variant, at least")
    parser.add_argument("--seconds", type=float, default=0.0, help="measure at least this long")
    parser.add_argument("--pins", type=int, default=1, help="pinned operations (0 for none)")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() once built")
    args = parser.parse_args(argv)
    print(f"# MCP over streamable HTTP\n\n{machine_info()}\n", flush=True)
    tables = run(
        args.source, calls=args.calls, seconds=args.seconds, pins=args.pins, freeze=args.freeze
    )
    for table in tables:
        print(format_table(table), end="\n\n", flush=True)
    return tables


if __name__ == "__main__":
    main()
