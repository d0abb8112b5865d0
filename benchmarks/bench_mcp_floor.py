"""The SDK's floor: opgate against a bare official-SDK server, call by call and under load.

``python benchmarks/bench_mcp_floor.py [--source synthetic:10000 | --source botocore]
[--calls 300] [--transports stdio http] [--eras 2025-11-25 2026-07-28]
[--clients 1 8 32] [--seconds 10]``

Targets (issue 25): every MCP call's server CPU within 0.3 ms of the floor, both eras,
stdio and HTTP; HTTP throughput at least 0.95x the floor's at 1, 8 and 32 clients.

Two servers, each in a child process started the same way, each called by the official
``mcp.Client`` in this process:

* **opgate**: ``opgate serve bench_mcp_floor:served_registry`` (``--http`` for HTTP) over
  the catalog of ``--source`` (``synthetic:N`` or the real ``botocore`` one, plus the
  invoked operation ``billing.invoices.create_0``, five validated fields, input and
  output schema); ``search`` takes the next query of a seeded mix, ``invoke`` the
  invoked operation.
* **the floor**: this file with ``--floor-server``, the SDK's low-level ``Server`` over
  the SDK's ``stdio_server`` or ``streamable_http_app()`` under uvicorn (h11, as
  ``opgate serve --http``). It lists opgate's tools as opgate listed them and answers
  ``search`` and ``invoke`` with opgate's own answers to the first search query and
  to the invoke, recorded from opgate just before, without looking at the arguments:
  answers of the same shape and size, so the same work for the client and none for
  the server.
  It is what any server built on the SDK pays per call before doing any work.

**Per call**, for each transport and era: both servers run at once, and the servers and
variants alternate in blocks, round after round. Each call's wall time is taken, and
the server's CPU time over the call (every thread of the child, from
``/proc/PID/task/*/schedstat``, read before and after it). The server's CPU median is
the figure the target is about; the difference is opgate's median minus the floor's.

**Throughput** over HTTP (2026-07-28): ``N`` clients in this process per server, each
with its own HTTP client and session, call ``search`` back to back; the two servers
take turns (five each, ``--seconds`` in all), so drift hits both; requests completed
per second of each server's turns. The clients share the machine with the servers,
alike for both, so the ratio is the figure, not the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench_mcp import ARGUMENTS
from bench_mcp_http import catalog_of, listening_child, server_cpu_ns
from common import (
    SOURCE_ENV,
    AllowAll,
    Table,
    argument_parser,
    bench_environment,
    print_heading,
    print_tables,
    summarize,
)
from opgate import Registry

__all__ = ["floor_server", "main", "run", "served_registry"]

#: Calls of each variant before the measured ones.
WARMUP = 20
#: Rounds at least (one block of each variant per round).
ROUNDS = 5
#: The protocol eras and the ``mcp.Client`` mode of each.
ERAS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
#: The environment variable naming the file of the floor's tools and answers.
ANSWERS_ENV = "OPGATE_FLOOR_ANSWERS"

HERE = Path(__file__).resolve().parent


def served_registry() -> Registry:
    """What ``opgate serve`` serves here: the catalog named by ``$OPGATE_BENCH_SOURCE``."""
    operations, _, limits = catalog_of(os.environ.get(SOURCE_ENV, "synthetic:10000"))
    return Registry(operations, AllowAll(), limits=limits)


def floor_server(recorded: dict[str, Any]) -> Any:
    """The floor: the SDK's low-level ``Server`` listing ``recorded["tools"]`` and
    answering each tool with ``recorded["answers"][name]``, whatever the arguments."""
    import mcp.types as types
    from mcp.server import Server

    tools = [types.Tool.model_validate(tool) for tool in recorded["tools"]]
    answers = {
        name: types.CallToolResult.model_validate(answer)
        for name, answer in recorded["answers"].items()
    }

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return answers[params.name]

    return Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)


def _serve_floor(http: str | None) -> None:
    import anyio

    server = floor_server(json.loads(Path(os.environ[ANSWERS_ENV]).read_text()))
    if http is None:
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return
    import uvicorn

    host, _, port = http.rpartition(":")
    uvicorn.run(
        server.streamable_http_app(), host=host, port=int(port), http="h11", log_level="warning"
    )


def _command(server: str, http: str | None) -> list[str]:
    if server == "floor":
        command = [sys.executable, str(HERE / "bench_mcp_floor.py"), "--floor-server"]
    else:
        command = [sys.executable, "-m", "opgate", "serve", "bench_mcp_floor:served_registry"]
    return command if http is None else [*command, "--http", http]


def _children() -> set[int]:
    """The pids of this process's children now."""
    mine = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == mine:
                found.add(int(entry.name))
    return found


def _environment(source: str, answers: Path | None = None) -> dict[str, str]:
    env = bench_environment(source)
    if answers is not None:
        env[ANSWERS_ENV] = str(answers)
    return env


@asynccontextmanager
async def _http_child(
    server: str, source: str, answers: Path | None = None
) -> AsyncIterator[tuple[str, int]]:
    """``server`` over HTTP in a child (the floor with ``answers``); its URL and pid
    once it listens."""
    async with listening_child(
        lambda address: _command(server, address),
        _environment(source, answers),
        f"the {server} server",
    ) as served:
        yield served


@asynccontextmanager
async def _session(
    server: str, source: str, transport: str, era: str, answers: Path | None = None
) -> AsyncIterator[tuple[Client, int]]:
    """A connected official client to ``server`` (the floor with ``answers``) and the
    server's pid."""
    mode: Any = ERAS[era]
    if transport == "http":
        async with (
            _http_child(server, source, answers) as (url, pid),
            httpx2.AsyncClient(timeout=120) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            yield client, pid
        return
    command = _command(server, None)
    parameters = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=_environment(source, answers),
        cwd=str(HERE),
    )
    before = _children()
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(parameters, errlog=quiet), mode=mode) as client:
            (pid,) = _children() - before
            yield client, pid


Call = Callable[[Client, int], Awaitable[Any]]


def _variants(invoked: str, queries: Sequence[str]) -> dict[str, Call]:
    count = len(queries)

    async def search(client: Client, index: int) -> Any:
        return await client.call_tool("search", {"query": queries[index % count]})

    async def invoke(client: Client, index: int) -> Any:
        return await client.call_tool("invoke", {"name": invoked, "arguments": ARGUMENTS})

    return {"search": search, "invoke": invoke}


def _checked(result: Any) -> Any:
    if result.is_error:
        raise RuntimeError(f"the call failed: {result.content}")
    return result


@dataclass(slots=True)
class _Times:
    walls: list[int] = field(default_factory=list)
    server_cpus: list[int] = field(default_factory=list)


async def _record(client: Client, variants: dict[str, Call]) -> dict[str, Any]:
    """opgate's tools as listed and its answers to each variant's first call: what the
    floor lists and answers."""
    dump: dict[str, Any] = {"mode": "json", "by_alias": True, "exclude_none": True}
    listed = await client.list_tools()
    return {
        "tools": [tool.model_dump(**dump) for tool in listed.tools],
        "answers": {
            label: _checked(await call(client, 0)).model_dump(**dump)
            for label, call in variants.items()
        },
    }


async def _per_call(
    sessions: dict[str, tuple[Client, int]], variants: dict[str, Call], calls: int
) -> dict[str, dict[str, _Times]]:
    """Every variant ``calls`` times on every server, in blocks that alternate between
    the servers and the variants round after round (drift on a shared machine hits
    them all alike): wall and server CPU ns per call, by server and variant."""
    for client, _pid in sessions.values():
        await client.list_tools()
        for call in variants.values():
            for index in range(WARMUP):
                _checked(await call(client, index))
    times = {server: {label: _Times() for label in variants} for server in sessions}
    block = max(1, calls // ROUNDS)
    clock = time.perf_counter_ns
    done = 0
    while done < calls:
        for label, call in variants.items():
            for server, (client, pid) in sessions.items():
                measured = times[server][label]
                for step in range(block):
                    cpu_begin = server_cpu_ns(pid)
                    begin = clock()
                    _checked(await call(client, done + step))
                    end = clock()
                    measured.server_cpus.append(server_cpu_ns(pid) - cpu_begin)
                    measured.walls.append(end - begin)
        done += block
    return times


async def _throughput(
    urls: dict[str, str], queries: Sequence[str], clients: int, seconds: float
) -> dict[str, float]:
    """Searches completed per second on each server by ``clients`` sessions calling back
    to back; the servers take turns, ``ROUNDS`` turns each, ``seconds`` in all."""
    count = len(queries)
    done = dict.fromkeys(urls, 0)
    running: dict[str, asyncio.Event] = {server: asyncio.Event() for server in urls}
    stop = asyncio.Event()

    async def one(server: str, offset: int, ready: asyncio.Event) -> None:
        async with (
            httpx2.AsyncClient(timeout=120) as http,
            Client(
                streamable_http_client(urls[server], http_client=http), mode="2026-07-28"
            ) as client,
        ):
            await client.list_tools()
            index = offset
            _checked(await client.call_tool("search", {"query": queries[index % count]}))
            ready.set()
            while True:
                await running[server].wait()
                if stop.is_set():
                    return
                index += 1
                _checked(await client.call_tool("search", {"query": queries[index % count]}))
                if running[server].is_set():
                    done[server] += 1

    readies = []
    tasks = []
    for server in urls:
        for number in range(clients):
            ready = asyncio.Event()
            readies.append(ready)
            tasks.append(asyncio.create_task(one(server, number * 7, ready)))
    for ready in readies:
        await ready.wait()
    elapsed = dict.fromkeys(urls, 0.0)
    turn = seconds / ROUNDS / len(urls)
    for _ in range(ROUNDS):
        for server in urls:
            begin = time.perf_counter()
            running[server].set()
            await asyncio.sleep(turn)
            running[server].clear()
            elapsed[server] += time.perf_counter() - begin
            await asyncio.sleep(0.05)  # the calls in flight finish, uncounted
    stop.set()
    for event in running.values():
        event.set()
    await asyncio.gather(*tasks)
    return {server: done[server] / elapsed[server] for server in urls}


async def _measure_all(
    source: str,
    transports: Sequence[str],
    eras: Sequence[str],
    clients: Sequence[int],
    calls: int,
    seconds: float,
) -> tuple[dict[tuple[str, str], dict[str, dict[str, _Times]]], dict[tuple[str, int], float]]:
    operations, queries, _ = catalog_of(source)
    invoked = operations[0].name
    del operations
    variants = _variants(invoked, queries)
    per_call: dict[tuple[str, str], dict[str, dict[str, _Times]]] = {}
    rates: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as folder:
        answers = Path(folder) / "answers.json"
        for transport in transports:
            for era in eras:
                async with _session("opgate", source, transport, era) as ours:
                    answers.write_text(json.dumps(await _record(ours[0], variants)))
                    async with _session("floor", source, transport, era, answers) as floor:
                        sessions = {"opgate": ours, "floor": floor}
                        per_call[(transport, era)] = await _per_call(sessions, variants, calls)
        if clients:
            async with _http_child("opgate", source) as (url, _pid):
                async with (
                    httpx2.AsyncClient(timeout=120) as http,
                    Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as c,
                ):
                    answers.write_text(json.dumps(await _record(c, variants)))
                async with _http_child("floor", source, answers) as (floor_url, _floor_pid):
                    urls = {"opgate": url, "floor": floor_url}
                    for count in clients:
                        measured = await _throughput(urls, queries, count, seconds)
                        for server, rate in measured.items():
                            rates[(server, count)] = rate
    return per_call, rates


def run(
    source: str = "synthetic:10000",
    *,
    calls: int = 300,
    transports: Sequence[str] = ("stdio", "http"),
    eras: Sequence[str] = tuple(ERAS),
    clients: Sequence[int] = (1, 8, 32),
    seconds: float = 10.0,
) -> list[Table]:
    """Measure; return the per-call table and the throughput table."""
    per_call, rates = asyncio.run(_measure_all(source, transports, eras, clients, calls, seconds))
    calls_table = Table(
        f"Server CPU per call against the floor ({source}; official client, child processes)",
        (
            "transport",
            "era",
            "call",
            "runs",
            "opgate CPU median ms",
            "floor CPU median ms",
            "difference ms",
            "opgate CPU p99 ms",
            "floor CPU p99 ms",
            "opgate wall median ms",
            "floor wall median ms",
            "opgate wall p99 ms",
            "opgate wall max ms",
        ),
    )
    for transport in transports:
        for era in eras:
            ours, floor = per_call[(transport, era)]["opgate"], per_call[(transport, era)]["floor"]
            for label in ours:
                cpu, floor_cpu = (
                    summarize(ours[label].server_cpus),
                    summarize(floor[label].server_cpus),
                )
                wall, floor_wall = summarize(ours[label].walls), summarize(floor[label].walls)
                calls_table.add(
                    transport=transport,
                    era=era,
                    call=label,
                    runs=cpu.runs,
                    **{
                        "opgate CPU median ms": cpu.median_ns / 1e6,
                        "floor CPU median ms": floor_cpu.median_ns / 1e6,
                        "difference ms": (cpu.median_ns - floor_cpu.median_ns) / 1e6,
                        "opgate CPU p99 ms": cpu.p99_ns / 1e6,
                        "floor CPU p99 ms": floor_cpu.p99_ns / 1e6,
                        "opgate wall median ms": wall.median_ns / 1e6,
                        "floor wall median ms": floor_wall.median_ns / 1e6,
                        "opgate wall p99 ms": wall.p99_ns / 1e6,
                        "opgate wall max ms": wall.max_ns / 1e6,
                    },
                )
    calls_table.notes.append(
        "server CPU = the child's CPU time (all threads) between the client's sending a "
        "call and its having the answer; the floor answers every call with opgate's "
        "recorded answer to that tool. Target: difference <= 0.3 ms."
    )
    tables = [calls_table]
    if rates:
        throughput = Table(
            f"Searches per second over HTTP, 2026-07-28 ({source}; {seconds:g} s each)",
            ("clients", "opgate req/s", "floor req/s", "opgate / floor"),
        )
        for count in clients:
            ours_rate, floor_rate = rates[("opgate", count)], rates[("floor", count)]
            throughput.add(
                clients=count,
                **{
                    "opgate req/s": ours_rate,
                    "floor req/s": floor_rate,
                    "opgate / floor": ours_rate / floor_rate,
                },
            )
        throughput.notes.append(
            "the clients run in this process, on the same cores as the server. "
            "Target: opgate / floor >= 0.95."
        )
        tables.append(throughput)
    return tables


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--source", default="synthetic:10000", help="synthetic:N or botocore")
    parser.add_argument("--calls", type=int, default=300, help="calls per variant")
    parser.add_argument("--transports", nargs="+", default=["stdio", "http"])
    parser.add_argument("--eras", nargs="+", default=list(ERAS), choices=list(ERAS))
    parser.add_argument("--clients", nargs="*", type=int, default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=10.0, help="per throughput run")
    parser.add_argument("--floor-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--http", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor_server:
        _serve_floor(args.http)
        return []
    print_heading("The SDK's floor")
    tables = run(
        args.source,
        calls=args.calls,
        transports=args.transports,
        eras=args.eras,
        clients=args.clients,
        seconds=args.seconds,
    )
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
