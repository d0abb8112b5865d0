"""The gateway over many stdio upstreams: search, invoke overhead, time to first ``tools/list``.

``python benchmarks/bench_gateway.py [--quick] [--servers 50] [--tools 40] [--runs 300]
[--start-servers 20] [--repeats 3] [--no-compare] [--output FILE]``

The upstreams are ``gateway_upstream.py`` processes (the official SDK's low-level
``Server`` over stdio), each serving ``--tools`` tools of one AWS service from the real
botocore catalog (``real_catalog.py``: operation names, documentation as description,
input shapes as JSON Schema): ``--servers`` services with at least that many operations
whose schema is at most 8 KiB, taken at an even stride through the sorted service names,
their operations in name order. Every call answers at once with one text block. The
``mcpServers`` file that starts them, and the tools they serve, are written to a
temporary folder.

Every gateway is a child process over stdio, driven by the official ``mcp.Client``
(``--mode``, default ``auto``: 2026-07-28 where the server offers it; no response
cache), through the same ``mcpServers`` file:

* **opgate**: ``opgate serve --upstreams FILE`` (this tree's sources);
* **FastMCP proxy + BM25**: ``fastmcp.server.create_proxy(config)`` with
  ``BM25SearchTransform(max_results=5)``: ``search_tools`` and its ``call_tool``;
* **fastmcp-gateway**: its ``GatewayServer`` with one one-server ``mcpServers`` value
  per entry: ``discover_tools(query=...)`` (every tool containing every word) and
  ``execute_tool``.

Tables:

1. **Search**: one ``tools/call`` of the gateway's search per query of a seeded mix
   (``real_queries`` over the served tools), the gateways one after another (their
   upstreams would not fit in memory at once), each after a warm-up.
2. **Invoke overhead**: the same upstream tool called directly on its upstream (a
   client of its own ``gateway_upstream.py`` process) and through each gateway,
   alternating in rounds; the difference of medians is the gateway's overhead
   (target: opgate <= 1 ms).
3. **Time to first tools/list**: from spawning the gateway (``--start-servers``
   upstreams in its file) to the answer of the client's first ``tools/list``, and to
   its first search answer, ``--repeats`` times; opgate starts its upstreams in
   parallel, before answering ``initialize``.

4. **Profile**: ``opgate serve`` under cProfile (``gateway_profiled.py``) during
   ``--profile-calls`` invokes and as many searches: own time per call by package.

FastMCP's proxy is measured twice: as ``create_proxy(config)`` makes it by default
(every request connects to every upstream again: a new process each, so seconds per
call; ``FASTMCP_DEFAULT_RUNS`` calls), and given a connected ``fastmcp.Client`` of the
config, which keeps the upstream sessions (``FASTMCP_RUNS`` calls).

``--quick``: 10 servers x 40 tools, 60 searches, 200 invokes, FastMCP's default proxy
left out, 5 upstreams at start, one repeat, 100 profiled calls: about a minute on two
shared cores, most of it the 60-odd Python processes it starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    OTHER_GROUP,
    Table,
    Timing,
    argument_parser,
    format_table,
    machine_info,
    own_time_by_group,
    summarize,
)

__all__ = [
    "HERE",
    "TARGET_OVERHEAD_MS",
    "Gateway",
    "gateway_catalog",
    "gateways",
    "main",
    "run",
    "write_setup",
]

HERE = Path(__file__).resolve().parent

#: The invoke-overhead target of opgate over stdio (median, milliseconds).
TARGET_OVERHEAD_MS = 1.0

#: The largest input schema (JSON bytes) a benchmark tool may have.
MAX_SCHEMA_BYTES = 8_192

#: The deepest nesting of subschemas a benchmark tool may have (fastmcp-gateway refuses
#: every ``$ref``, so the schemas are inlined, and is told to accept its deepest, 50).
MAX_DEPTH = 8

#: The longest tool description kept (characters, cut at a word).
MAX_DESCRIPTION = 1_000

#: Calls per measurement of FastMCP's proxy with a connected client (hundreds of
#: milliseconds per call at 50 upstreams).
FASTMCP_RUNS = 30

#: Calls per measurement of FastMCP's default proxy, which connects to every upstream
#: again (a new process each) for every request.
FASTMCP_DEFAULT_RUNS = 3

#: Rounds the invoke variants alternate in.
ROUNDS = 5


# --- the upstreams ------------------------------------------------------------------------


def _description(summary: str, rest: str) -> str:
    text = f"{summary} {rest}".strip()
    if len(text) <= MAX_DESCRIPTION:
        return text
    return text[:MAX_DESCRIPTION].rsplit(" ", 1)[0] + " ..."


class _Recursive(Exception):
    pass


def _inline(value: Any, defs: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``value`` with every ``#/$defs/X`` reference replaced by ``X`` (``_Recursive`` if
    a shape reaches itself)."""
    if isinstance(value, dict):
        reference = value.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            name = reference[len("#/$defs/") :]
            if name in seen:
                raise _Recursive(name)
            merged = {k: v for k, v in value.items() if k != "$ref"}
            return {**_inline(defs[name], defs, (*seen, name)), **merged}
        return {k: _inline(v, defs, seen) for k, v in value.items() if k != "$defs"}
    if isinstance(value, list):
        return [_inline(item, defs, seen) for item in value]
    return value


def _depth(schema: Any) -> int:
    """Nesting depth of subschemas (an object of scalars is 1)."""
    if not isinstance(schema, dict):
        return 0
    children: list[Any] = list((schema.get("properties") or {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            children.append(schema[key])
    for key in ("anyOf", "oneOf", "allOf"):
        children.extend(schema.get(key) or ())
    return 1 + max((_depth(child) for child in children), default=0)


def inline_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` with its ``$defs`` inlined, or ``None`` if it is recursive, over
    ``MAX_SCHEMA_BYTES`` once inlined, or nested deeper than ``MAX_DEPTH``."""
    try:
        inlined: dict[str, Any] = _inline(schema, schema.get("$defs", {}))
    except _Recursive:
        return None
    if len(json.dumps(inlined)) > MAX_SCHEMA_BYTES or _depth(inlined) > MAX_DEPTH:
        return None
    return inlined


_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``ListTagsForResource`` -> ``list_tags_for_resource`` (MCP tools are mostly named so;
    fastmcp-gateway refuses a name that starts with a capital)."""
    return _WORD_BOUNDARY.sub("_", name).lower()


def gateway_catalog(
    servers: int, tools: int, source: str = "botocore"
) -> dict[str, list[dict[str, Any]]]:
    """``servers`` upstreams of ``tools`` tools each: name -> MCP tool definitions.

    ``source`` ``"botocore"``: AWS services (see the module's docstring);
    ``"synthetic"``: ``common.synthetic_catalog`` cut into upstreams ``s0``, ``s1``, ...
    (for tests: botocore not needed).
    """
    if source == "synthetic":
        from common import synthetic_catalog

        made = synthetic_catalog(servers * tools)
        return {
            f"s{k}": [
                {
                    "name": op.name.replace(".", "_"),
                    "description": f"{op.summary} {op.description}",
                    "inputSchema": op.input_schema,
                }
                for op in made[k * tools : (k + 1) * tools]
            ]
            for k in range(servers)
        }
    if source != "botocore":
        raise ValueError(f"unknown source {source!r}")
    from real_catalog import real_catalog

    by_service: dict[str, list[Any]] = defaultdict(list)
    for operation in real_catalog():
        schema = inline_schema(operation.input_schema)
        if schema is not None:
            by_service[operation.group].append((operation, schema))
    eligible = sorted(name for name, ops in by_service.items() if len(ops) >= tools)
    if len(eligible) < servers:
        raise ValueError(f"only {len(eligible)} services have {tools} small operations")
    stride = len(eligible) // servers
    chosen = eligible[::stride][:servers]
    catalog: dict[str, list[dict[str, Any]]] = {}
    for service in chosen:
        server = service.replace("-", "_")
        operations = sorted(by_service[service], key=lambda pair: pair[0].name)[:tools]
        catalog[server] = [
            {
                "name": snake_case(op.name.split(".", 1)[1]),
                "description": _description(op.summary, op.description),
                "inputSchema": schema,
            }
            for op, schema in operations
        ]
    return catalog


@dataclass(frozen=True, slots=True)
class Setup:
    """The files of one benchmark run: the tools served, and ``mcpServers`` files."""

    catalog: Path
    config: Path  # every upstream
    start_config: Path  # the first ``start_servers`` upstreams


def _entry(catalog: Path, name: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(HERE / "gateway_upstream.py"), str(catalog), name],
    }


def write_setup(
    directory: Path, catalog: dict[str, list[dict[str, Any]]], start_servers: int
) -> Setup:
    """Write the catalog and the two ``mcpServers`` files into ``directory``."""
    path = directory / "catalog.json"
    path.write_text(json.dumps(catalog), encoding="utf-8")
    names = list(catalog)
    config = directory / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {n: _entry(path, n) for n in names}}))
    start = directory / "mcp-start.json"
    start.write_text(
        json.dumps({"mcpServers": {n: _entry(path, n) for n in names[:start_servers]}})
    )
    return Setup(path, config, start)


# --- the gateways -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gateway:
    """One gateway under test: how to start it and how to call its search and invoke."""

    label: str
    command: Callable[[Path], list[str]]
    search_tool: str
    search_arguments: Callable[[str], dict[str, Any]]
    items: Callable[[Any], int]
    invoke_tool: str
    invoke_arguments: Callable[[str, str, dict[str, Any]], dict[str, Any]]
    max_runs: int | None = None  # a cap for a gateway whose every call takes seconds


def _opgate_items(result: Any) -> int:
    return len(_checked(result).structured_content["items"])


def _fastmcp_items(result: Any) -> int:
    return len(_checked(result).structured_content["result"])


def _gateway_items(result: Any) -> int:
    checked = _checked(result)
    structured = checked.structured_content or {}
    found = structured.get("result", structured)
    if isinstance(found, dict):
        for key in ("tools", "results", "matches"):
            if isinstance(found.get(key), list):
                return len(found[key])
    return -1


def _checked(result: Any) -> Any:
    if result.is_error:
        raise RuntimeError(f"the call failed: {result.content}")
    return result


def gateways(compare: bool = True, slow: bool = True) -> list[Gateway]:
    """opgate and, with ``compare``, the comparisons (when their packages are installed);
    ``slow`` includes FastMCP's default proxy (seconds per call)."""
    python = sys.executable
    found = [
        Gateway(
            "opgate",
            lambda config: [python, "-m", "opgate", "serve", "--upstreams", str(config)],
            "search",
            lambda query: {"query": query},
            _opgate_items,
            "invoke",
            lambda server, tool, arguments: {"name": f"{server}.{tool}", "arguments": arguments},
        )
    ]
    if not compare:
        return found
    compared = str(HERE / "gateway_compared.py")
    try:
        import fastmcp  # noqa: F401
    except ImportError:
        return found
    variants = [("FastMCP proxy, connected client + BM25", "fastmcp-connected", FASTMCP_RUNS)]
    if slow:
        variants.append(("FastMCP proxy (default) + BM25", "fastmcp", FASTMCP_DEFAULT_RUNS))
    for label, which, cap in variants:
        found.append(
            Gateway(
                label,
                lambda config, which=which: [python, compared, which, str(config)],
                "search_tools",
                lambda query: {"query": query},
                _fastmcp_items,
                "call_tool",
                lambda server, tool, arguments: {
                    "name": f"{server}_{tool}",
                    "arguments": arguments,
                },
                cap,
            )
        )
    try:
        import fastmcp_gateway  # noqa: F401
    except ImportError:
        return found
    found.append(
        Gateway(
            "fastmcp-gateway",
            lambda config: [python, compared, "fastmcp-gateway", str(config)],
            "discover_tools",
            lambda query: {"query": query, "format": "schema"},
            _gateway_items,
            "execute_tool",
            lambda server, tool, arguments: {"tool_name": tool, "arguments": arguments},
        )
    )
    return found


def child_environment() -> dict[str, str]:
    """This environment with this tree's opgate sources first on ``PYTHONPATH``."""
    import opgate

    sources = Path(opgate.__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(sources), env.get("PYTHONPATH", "")]))
    return env


@asynccontextmanager
async def connected(command: list[str], mode: str) -> AsyncIterator[Any]:
    """The official client connected over stdio to ``command`` (its stderr dropped)."""
    from mcp import Client, StdioServerParameters, stdio_client

    parameters = StdioServerParameters(
        command=command[0], args=command[1:], env=child_environment(), cwd=str(HERE)
    )
    with open(os.devnull, "w", encoding="utf-8") as devnull:
        async with Client(
            stdio_client(parameters, errlog=devnull), mode=mode, cache=None
        ) as client:
            yield client


# --- measurement --------------------------------------------------------------------------


async def _timed(call: Callable[[], Awaitable[Any]], runs: int) -> tuple[Timing, list[Any]]:
    clock = time.perf_counter_ns
    samples: list[int] = []
    results: list[Any] = []
    for _ in range(runs):
        begin = clock()
        result = await call()
        samples.append(clock() - begin)
        results.append(result)
    return summarize(samples), results


async def _interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], runs: int
) -> dict[str, Timing]:
    clock = time.perf_counter_ns
    samples: dict[str, list[int]] = {label: [] for label in calls}
    for call in calls.values():
        for _ in range(min(runs, max(5, runs // 10))):
            _checked(await call())
    per_round = max(1, runs // ROUNDS)
    for _ in range(ROUNDS):
        for label, call in calls.items():
            bucket = samples[label]
            for _ in range(per_round):
                begin = clock()
                result = await call()
                bucket.append(clock() - begin)
                _checked(result)
    return {label: summarize(bucket) for label, bucket in samples.items()}


def _invoked(catalog: dict[str, list[dict[str, Any]]]) -> tuple[str, str]:
    """The upstream tool every invoke calls: the first one taking no required argument
    whose name no other upstream has (so every gateway calls it by its bare name)."""
    names = [tool["name"] for tools in catalog.values() for tool in tools]
    for server, tools in catalog.items():
        for tool in tools:
            if not tool["inputSchema"].get("required") and names.count(tool["name"]) == 1:
                return server, tool["name"]
    raise ValueError("no tool without required arguments")


def _ms(timing: Timing) -> dict[str, float]:
    return {
        "median ms": timing.median_ns / 1e6,
        "p90 ms": timing.p90_ns / 1e6,
        "p99 ms": timing.p99_ns / 1e6,
        "max ms": timing.max_ns / 1e6,
    }


@dataclass(slots=True)
class _Served:
    """What one gateway did over the whole catalog."""

    listed: int  # tools in its tools/list
    protocol: str
    search: Timing
    items: float
    invoke: dict[str, Timing]  # "direct" and "gateway", interleaved


async def _serve_and_measure(
    gateway: Gateway,
    setup: Setup,
    queries: Sequence[str],
    invoked: tuple[str, str],
    runs: int,
    invoke_runs: int,
    mode: str,
) -> _Served | str:
    server, tool = invoked
    if gateway.max_runs is not None:
        runs, invoke_runs = min(runs, gateway.max_runs), min(invoke_runs, gateway.max_runs)
    async with AsyncExitStack() as stack:
        try:
            client = await stack.enter_async_context(connected(gateway.command(setup.config), mode))
        except Exception as exc:  # a comparison that cannot serve the catalog
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            return f"did not start: {type(exc).__name__}: {exc}"
        listed = len((await client.list_tools()).tools)
        protocol = str(client.protocol_version)
        count = len(queries)
        index = 0

        async def search() -> Any:
            nonlocal index
            index += 1
            return await client.call_tool(
                gateway.search_tool, gateway.search_arguments(queries[index % count])
            )

        for _ in range(min(20, runs // 5 + 1)):  # FastMCP builds its BM25 index here
            _checked(await search())
        timing, results = await _timed(search, runs)
        items = statistics.fmean(gateway.items(result) for result in results)
        direct = await stack.enter_async_context(
            connected([sys.executable, *_entry(setup.catalog, server)["args"]], mode)
        )
        through = gateway.invoke_arguments(server, tool, {})

        async def call_direct() -> Any:
            return await direct.call_tool(tool, {})

        async def call_gateway() -> Any:
            return await client.call_tool(gateway.invoke_tool, through)

        invoke = await _interleaved({"direct": call_direct, "gateway": call_gateway}, invoke_runs)
        return _Served(listed, protocol, timing, items, invoke)


async def _first_list(
    gateway: Gateway, config: Path, query: str, mode: str
) -> tuple[float, float, int]:
    """Seconds from spawning ``gateway`` to its first tools/list answer and first search answer."""
    begin = time.perf_counter()
    async with connected(gateway.command(config), mode) as client:
        listed = len((await client.list_tools()).tools)
        first_list = time.perf_counter() - begin
        _checked(await client.call_tool(gateway.search_tool, gateway.search_arguments(query)))
        first_search = time.perf_counter() - begin
    return first_list, first_search, listed


#: Own-time groups of the profile, first match wins: (label, fragments of the file path,
#: or of a built-in function's name).
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("opgate.upstream (relay, upstream session, results)", ("/opgate/upstream/",)),
    ("opgate.mcp adapter", ("/opgate/mcp/",)),
    ("opgate registry (invoke, validation)", ("/opgate/",)),
    ("mcp SDK client (the upstream's session)", ("/mcp/client/",)),
    ("mcp SDK server (runner, dispatch, stdio)", ("/mcp/server/",)),
    ("mcp SDK shared (dispatchers, streams, types)", ("/mcp/shared/", "/mcp_types/", "/mcp/")),
    ("pydantic (models, validation, dumps)", ("/pydantic/", "pydantic_core")),
    ("opentelemetry (SDK spans)", ("/opentelemetry/",)),
    ("anyio, asyncio (tasks, streams, threads, event loop)", ("/anyio/", "/asyncio/", "sniffio")),
)
_IDLE = "'poll' of 'select.epoll'"


async def _profile(
    setup: Setup, invoked: tuple[str, str], queries: Sequence[str], calls: int, mode: str
) -> dict[str, dict[str, float]]:
    """cProfile of ``opgate serve``'s main thread during ``calls`` invokes, then as many
    searches: per call, own milliseconds by group."""
    import pstats
    import signal

    server, tool = invoked
    output = Path(setup.catalog).with_name("opgate.prof")
    command = [
        sys.executable,
        str(HERE / "gateway_profiled.py"),
        str(output),
        "--",
        "serve",
        "--upstreams",
        str(setup.config),
    ]
    shares: dict[str, dict[str, float]] = {}
    async with connected(command, mode) as client:
        pid = int(Path(f"{output}.pid").read_text(encoding="ascii"))
        arguments = {"name": f"{server}.{tool}", "arguments": {}}
        work: dict[str, Callable[[int], Awaitable[Any]]] = {
            "invoke": lambda i: client.call_tool("invoke", arguments),
            "search": lambda i: client.call_tool("search", {"query": queries[i % len(queries)]}),
        }
        for label, call in work.items():
            for index in range(20):
                await call(index)
            os.kill(pid, signal.SIGUSR1)
            await asyncio.sleep(0.05)
            for index in range(calls):
                await call(index)
            os.kill(pid, signal.SIGUSR2)
            for _ in range(100):
                await asyncio.sleep(0.05)
                if output.exists():
                    break
            stats: dict[Any, Any] = pstats.Stats(str(output)).stats  # type: ignore[attr-defined]
            output.rename(output.with_name(f"opgate-{label}.prof"))
            shares[label] = {
                group: 1000 * seconds / calls
                for group, seconds in own_time_by_group(stats, _GROUPS, idle=_IDLE).items()
            }
    return shares


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


# --- the benchmark ------------------------------------------------------------------------


def run(
    servers: int = 50,
    tools: int = 40,
    *,
    runs: int = 300,
    invoke_runs: int = 1_000,
    start_servers: int = 20,
    repeats: int = 3,
    compare: bool = True,
    slow: bool = True,
    mode: str = "auto",
    profile_calls: int = 500,
    source: str = "botocore",
) -> list[Table]:
    """Measure search, invoke overhead and start-up (and profile opgate's calls unless
    ``profile_calls`` is 0); return their tables."""
    from real_catalog import RealOperation, real_queries

    catalog = gateway_catalog(servers, tools, source)
    served_ops = [
        RealOperation(f"{s}.{t['name']}", s, t["description"], "", t["inputSchema"])
        for s, ts in catalog.items()
        for t in ts
    ]
    queries = real_queries(served_ops, 200)
    invoked = _invoked(catalog)
    found = gateways(compare, slow)
    with tempfile.TemporaryDirectory(prefix="opgate-bench-gateway-") as folder:
        setup = write_setup(Path(folder), catalog, start_servers)
        measured: dict[str, _Served | str] = {}
        loads: dict[str, str] = {}
        for gateway in found:
            measured[gateway.label] = asyncio.run(
                _serve_and_measure(gateway, setup, queries, invoked, runs, invoke_runs, mode)
            )
            loads[gateway.label] = _load()
        starts: dict[str, list[tuple[float, float, int]]] = {g.label: [] for g in found}
        for _ in range(repeats):
            for gateway in found:
                starts[gateway.label].append(
                    asyncio.run(_first_list(gateway, setup.start_config, queries[0], mode))
                )
        start_load = _load()
        shares = (
            asyncio.run(_profile(setup, invoked, queries, profile_calls, mode))
            if profile_calls
            else {}
        )
    tables = _tables(
        servers, tools, runs, invoked, measured, loads, starts, start_servers, start_load, mode
    )
    if shares:
        tables.append(_profile_table(shares, profile_calls, servers))
    return tables


def _profile_table(shares: dict[str, dict[str, float]], calls: int, servers: int) -> Table:
    table = Table(
        f"Where opgate serve's main thread spends a call's time (cProfile, {calls} calls each, "
        f"{servers} upstreams; own ms per call)",
        ("package", *(f"{label} ms" for label in shares), *(f"{label} %" for label in shares)),
    )
    labels = [label for label, _ in _GROUPS] + [OTHER_GROUP]
    first = next(iter(shares))
    for group in sorted(labels, key=lambda g: -shares[first].get(g, 0.0)):
        table.add(
            package=group,
            **{f"{label} ms": per.get(group, 0.0) for label, per in shares.items()},
            **{
                f"{label} %": f"{100 * per.get(group, 0.0) / (sum(per.values()) or 1):.0f}%"
                for label, per in shares.items()
            },
        )
    table.add(
        package="total",
        **{f"{label} ms": sum(per.values()) for label, per in shares.items()},
    )
    table.notes.append(
        "opgate serve under cProfile (main thread only, from after a warm-up to the last "
        "call; the event loop's idle wait in epoll left out), driven as in the tables "
        "above: invoke of the invoked tool, then searches of the query mix. A built-in or "
        "standard-library function's own time goes to its callers' packages. Profiling "
        "inflates code made of many small Python calls: read shares, not times. The SDK's "
        "stdio server reads and writes through worker threads (anyio.to_thread), so each "
        "message costs thread hand-offs, counted under anyio."
    )
    return table


def _tables(
    servers: int,
    tools: int,
    runs: int,
    invoked: tuple[str, str],
    measured: dict[str, _Served | str],
    loads: dict[str, str],
    starts: dict[str, list[tuple[float, float, int]]],
    start_servers: int,
    start_load: str,
    mode: str,
) -> list[Table]:
    total = servers * tools
    search = Table(
        f"Search over {servers} stdio upstreams x {tools} tools ({total:,} tools), "
        f"official mcp.Client over stdio (mode {mode})",
        (
            "gateway",
            "protocol",
            "tools/list",
            "runs",
            "items",
            "median ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "÷ opgate",
            "load avg",
        ),
    )
    ours = measured.get("opgate")
    base = ours.search.median_ns if isinstance(ours, _Served) else float("nan")
    for label, served in measured.items():
        if isinstance(served, str):
            search.add(gateway=label, protocol=served)
            continue
        search.add(
            gateway=label,
            protocol=served.protocol,
            **{"tools/list": served.listed},
            runs=served.search.runs,
            items=served.items,
            **_ms(served.search),
            **{"÷ opgate": served.search.median_ns / base, "load avg": loads[label]},
        )
    search.notes.append(
        "One tools/call of the gateway's search per query, each the next of 200 seeded "
        "one- to three-word queries from the served tools' own words. items = mean results "
        "per call: opgate a page of up to 5 (every term matching), FastMCP up to 5 BM25 "
        "hits with full definitions, fastmcp-gateway every tool containing every word "
        "(-1: not counted). tools/list = tools the gateway lists. ÷ opgate = ratio of "
        "medians. The gateways ran one after another (load avg = 1, 5, 15 min after each)."
    )
    server, tool = invoked
    invoke = Table(
        f"Invoke overhead: {server}.{tool} directly on its upstream and through each gateway "
        "(stdio, interleaved)",
        (
            "gateway",
            "path",
            "runs",
            "median ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "overhead median ms",
            "target ms",
            "ok",
        ),
    )
    for label, served in measured.items():
        if isinstance(served, str):
            continue
        direct, through = served.invoke["direct"], served.invoke["gateway"]
        overhead = (through.median_ns - direct.median_ns) / 1e6
        ours_row = label == "opgate"
        invoke.add(gateway=label, path="direct", runs=direct.runs, **_ms(direct))
        invoke.add(
            gateway=label,
            path="through gateway",
            runs=through.runs,
            **_ms(through),
            **{
                "overhead median ms": overhead,
                "target ms": TARGET_OVERHEAD_MS if ours_row else None,
                "ok": overhead <= TARGET_OVERHEAD_MS if ours_row else None,
            },
        )
    invoke.notes.append(
        "direct = the official client connected to its own process of the same upstream; "
        "through = the same tool through the gateway (opgate invoke, FastMCP call_tool, "
        "fastmcp-gateway execute_tool) with {} as arguments; the two alternate in "
        f"{ROUNDS} rounds. overhead = difference of medians. The upstream answers at once, "
        "so the figures are transport, SDK and gateway cost only."
    )
    start = Table(
        f"Time to first tools/list: {start_servers} stdio upstreams starting, from spawning "
        "the gateway (seconds)",
        (
            "gateway",
            "repeats",
            "tools/list",
            "first list median s",
            "first list max s",
            "first search median s",
            "first search max s",
            "÷ opgate",
        ),
    )
    first = starts.get("opgate")
    base_s = statistics.median(s[0] for s in first) if first else float("nan")
    for label, samples in starts.items():
        lists = [s[0] for s in samples]
        searches = [s[1] for s in samples]
        start.add(
            gateway=label,
            repeats=len(samples),
            **{
                "tools/list": samples[0][2],
                "first list median s": statistics.median(lists),
                "first list max s": max(lists),
                "first search median s": statistics.median(searches),
                "first search max s": max(searches),
                "÷ opgate": statistics.median(lists) / base_s,
            },
        )
    start.notes.append(
        "From just before the client spawns the gateway to the answer of its first "
        "tools/list (initialize included), then of its first search. The gateways "
        f"alternate per repeat. load avg after: {start_load}."
    )
    return [search, invoke, start]


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="small and short (about a minute)")
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--tools", type=int, default=40)
    parser.add_argument("--runs", type=int, default=300, help="searches per gateway")
    parser.add_argument("--invoke-runs", type=int, default=1_000, help="invokes per path")
    parser.add_argument("--start-servers", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mode", default="auto", help="the client's mode (auto, legacy)")
    parser.add_argument("--no-compare", action="store_true", help="opgate only")
    parser.add_argument("--profile-calls", type=int, default=500, help="0 skips the profile")
    parser.add_argument("--output", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.servers, args.runs, args.invoke_runs = 10, 60, 200
        args.start_servers, args.repeats, args.profile_calls = 5, 1, 100
    heading = f"# Gateway benchmark\n\n{machine_info()}\n\nLoad average at start: {_load()}\n"
    print(heading, flush=True)
    began = time.perf_counter()
    tables = run(
        args.servers,
        args.tools,
        runs=args.runs,
        invoke_runs=args.invoke_runs,
        start_servers=args.start_servers,
        repeats=args.repeats,
        compare=not args.no_compare,
        slow=not args.quick,
        mode=args.mode,
        profile_calls=args.profile_calls,
    )
    text = "\n\n".join(format_table(table) for table in tables)
    elapsed = f"Total time: {time.perf_counter() - began:.0f} s"
    print(text + "\n\n" + elapsed, flush=True)
    if args.output is not None:
        args.output.write_text(f"{heading}\n{text}\n\n{elapsed}\n", encoding="utf-8")
    return tables


if __name__ == "__main__":
    main()
