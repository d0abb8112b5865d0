"""MCP round trips: search and invoke as complete ``tools/call`` requests, official client.

``python benchmarks/bench_mcp.py [--size 10000] [--runs 600] [--fastmcp-runs 15]
[--no-compare] [--profile-calls 300]``

Target (issue 8): an opgate ``search`` round trip <= 2 ms median at 10,000 operations.

Each measured call is one ``await client.call_tool(...)`` of the official MCP SDK's
``mcp.Client`` connected in process, in both protocol eras:

* ``2025-11-25`` (``mode="legacy"``): the initialize handshake, then JSON-RPC messages
  over the SDK's in-memory streams to the server task;
* ``2026-07-28``: the SDK's direct dispatch (no JSON-RPC framing, no server task).

The time covers the client (request building, result parsing, the client's check of
structured content against the tool's output schema), the SDK server (dispatch,
result serialization) and the server's own work. Servers, same synthetic catalog
(``common.synthetic_catalog``), same seeded query mix (``common.query_mix``: one to
three words from the catalog vocabulary; every call takes the next query; page 1):

* **opgate**: ``GatewayServer(Registry(...))``; ``search`` with ``{"query": q}`` (page
  size 5) and ``invoke`` of one operation (``billing.invoices.create_0``: five fields,
  input and output schema, a handler returning a text block and structured content);
* **FastMCP 4 with ``BM25SearchTransform``** (the ``bench`` extra): the same operations as
  FastMCP tools (their own JSON input and output schemas; the invoked one a function
  tool whose pydantic signature carries the same constraints), the catalog hidden
  behind the transform's ``search_tools`` (five results) and ``call_tool`` proxy. The
  official client drives FastMCP's low-level server (``FastMCP._mcp_server``, a
  subclass of the SDK's ``Server``) inside FastMCP's lifespan, which is what
  FastMCP's own in-process transport does.

The variants of one era alternate in rounds (drift on a shared machine hits all of
them), as do the opgate registry calls alone (``registry.search`` / ``registry.invoke``
with the same arguments), whose difference to the round trip is the adapter plus
SDK cost. Every call's wall-clock time and this process's CPU time are both taken:
everything runs in this one thread, so on an idle machine they agree, and on a shared
one the CPU time is the steadier figure. A cProfile run of opgate search round trips
then says where that time goes, as own time by package.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from common import (
    OTHER_GROUP,
    AllowAll,
    SyntheticOperation,
    Table,
    Timing,
    argument_parser,
    own_time_by_group,
    print_heading,
    print_tables,
    query_mix,
    summarize,
    synthetic_catalog,
    to_operations,
)
from opgate import Invocation, Registry, Result, SearchPage, Text, finish
from opgate.mcp import GatewayServer

__all__ = ["ARGUMENTS", "ERAS", "TARGET_SEARCH_US", "main", "run"]

#: The search round-trip target (median, microseconds) at 10,000 operations.
TARGET_SEARCH_US = 2_000.0

#: (label, ``mcp.Client`` mode) of the two protocol eras.
ERAS: tuple[tuple[str, str], ...] = (("2025-11-25", "legacy"), ("2026-07-28", "2026-07-28"))

#: Distinct queries in the mix (calls cycle through them; FastMCP takes the first ones).
QUERIES = 200

#: Rounds the variants of one era alternate in.
ROUNDS = 5

#: The arguments of every invoke (valid for the catalog's ``create`` input schema).
ARGUMENTS: dict[str, Any] = {
    "name": "Consulting, July",
    "amount": 125.5,
    "currency": "EUR",
    "tags": ["consulting", "q3"],
    "metadata": {"po": "PO-1234"},
}

_STRUCTURED = {
    "invoice_id": "inv_00000001",
    "status": "draft",
    "updated_at": "2026-08-01T09:30:00Z",
}


async def create_invoice(invocation: Invocation) -> Any:
    """The opgate handler of the invoked operation (every operation shares it)."""
    arguments = invocation.arguments
    return finish(
        Result(
            [Text(f"created invoice inv_00000001 for {arguments['name']}")], structured=_STRUCTURED
        )
    )


def _invoked(catalog: Sequence[SyntheticOperation]) -> SyntheticOperation:
    operation = catalog[0]
    assert operation.verb == "create", operation.name
    assert operation.output_schema is not None
    return operation


# --- FastMCP ------------------------------------------------------------------------------


class InvoiceOut(BaseModel):
    """The FastMCP tool's structured output (its output schema comes from this model)."""

    invoice_id: str
    status: str
    updated_at: str | None = None


async def fastmcp_create_invoice(
    name: Annotated[str, Field(min_length=1, max_length=200)],
    currency: Literal["EUR", "USD", "GBP", "JPY", "CHF", "SEK"],
    amount: Annotated[float, Field(ge=0, multiple_of=0.01)] | None = None,
    tags: Annotated[list[Annotated[str, Field(max_length=32)]], Field(max_length=10)] | None = None,
    metadata: Annotated[dict[str, Annotated[str, Field(max_length=500)]], Field(max_length=20)]
    | None = None,
) -> InvoiceOut:
    """The invoked operation as a FastMCP function tool (arguments checked by pydantic)."""
    return InvoiceOut(**_STRUCTURED)


@dataclass(slots=True)
class _FastMCP:
    server: Any
    build_s: float


def _fastmcp(catalog: Sequence[SyntheticOperation]) -> _FastMCP | str:
    """FastMCP serving ``catalog`` behind ``BM25SearchTransform``, or why not."""
    try:
        from fastmcp import FastMCP
        from fastmcp.server.transforms.search import BM25SearchTransform
        from fastmcp.tools.base import Tool, ToolResult
    except ImportError:
        return "not installed"

    class CatalogTool(Tool):  # type: ignore[misc, unused-ignore]
        """A catalog operation with its own JSON schemas (never called here)."""

        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            return ToolResult(content=[], structured_content=dict(_STRUCTURED))

    invoked = _invoked(catalog)
    begin = time.perf_counter()
    server = FastMCP("bench")
    server.add_transform(BM25SearchTransform(max_results=5))
    provider = server._local_provider
    for operation in catalog[1:]:
        tool = CatalogTool(
            name=operation.name,
            description=f"{operation.summary}\n\n{operation.description}",
            parameters=operation.input_schema,
            output_schema=operation.output_schema,
        )
        # ``add_tool`` compares each new tool with every registered one (version
        # mixing, schema-cache seeding): quadratic, minutes at 10,000. Storing the
        # tool under its key leaves the state ``add_tool`` leaves for unique,
        # unversioned names once a transform is installed.
        provider._components[tool.key] = tool
    server.add_tool(
        Tool.from_function(
            fastmcp_create_invoice,
            name=invoked.name,
            description=f"{invoked.summary}\n\n{invoked.description}",
        )
    )
    return _FastMCP(server, time.perf_counter() - begin)


# --- measurement --------------------------------------------------------------------------

Call = Callable[[int], Awaitable[Any]]


@dataclass(slots=True)
class _Variant:
    """One measured call: ``call(i)`` runs the i-th call; ``items`` reads its result."""

    call: Call
    runs: int
    items: Callable[[Any], int] | None = None


@dataclass(frozen=True, slots=True)
class _Measured:
    wall: Timing
    cpu: Timing  # process CPU time of the same calls
    items: float  # mean item count of the results (-1 when not counted)


async def _measure(variants: dict[str, _Variant], rounds: int) -> dict[str, _Measured]:
    """Per variant: wall-clock and CPU timings of its calls, and their mean item count."""
    clock = time.perf_counter_ns
    cpu_clock = time.process_time_ns
    walls: dict[str, list[int]] = {label: [] for label in variants}
    cpus: dict[str, list[int]] = {label: [] for label in variants}
    counts: dict[str, list[int]] = {label: [] for label in variants}
    for variant in variants.values():  # warm-up (FastMCP builds its BM25 index here)
        for index in range(min(variant.runs // 10 + 1, 20)):
            await variant.call(index)
    for round_number in range(rounds):
        gc.collect()
        for label, variant in variants.items():
            per_round = max(1, variant.runs // rounds)
            for step in range(per_round):
                index = round_number * per_round + step
                cpu_begin = cpu_clock()
                begin = clock()
                result = await variant.call(index)
                end = clock()
                cpus[label].append(cpu_clock() - cpu_begin)
                walls[label].append(end - begin)
                if variant.items is not None:
                    counts[label].append(variant.items(result))
    return {
        label: _Measured(
            summarize(walls[label]),
            summarize(cpus[label]),
            statistics.fmean(counts[label]) if counts[label] else -1,
        )
        for label in variants
    }


def _checked(result: Any) -> Any:
    if result.is_error:
        raise RuntimeError(f"the call failed: {result.content}")
    return result


def _opgate_items(result: Any) -> int:
    return len(_checked(result).structured_content["items"])


def _fastmcp_items(result: Any) -> int:
    return len(_checked(result).structured_content["result"])


def _invoke_items(result: Any) -> int:
    return len(_checked(result).content)


@asynccontextmanager
async def _connect(server: Any, mode: str) -> AsyncIterator[Any]:
    from mcp import Client

    async with Client(server, mode=mode) as client:
        yield client


# --- profile ------------------------------------------------------------------------------

#: Own-time groups of the profile, first match wins: (label, fragments of the file path,
#: or of the name of a built-in function).
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("opgate.mcp adapter", ("/opgate/mcp/",)),
    ("opgate registry (search, policy, cursor)", ("/opgate/", "cryptography")),
    ("mcp SDK client (session, results)", ("/mcp/client/",)),
    ("mcp SDK server (runner, dispatch)", ("/mcp/server/",)),
    ("mcp SDK shared (dispatchers, streams, types)", ("/mcp/shared/", "/mcp_types/", "/mcp/")),
    ("jsonschema (the client's output-schema check)", ("jsonschema", "referencing", "rpds")),
    ("pydantic (models, validation, dumps)", ("/pydantic/", "pydantic_core")),
    ("opentelemetry (SDK spans)", ("/opentelemetry/",)),
    ("anyio, asyncio (tasks, streams, event loop)", ("/anyio/", "/asyncio/", "sniffio")),
)


async def _profile(server: GatewayServer, queries: Sequence[str], calls: int) -> dict[str, float]:
    """Per era: own time by package, in percent of the profiled total."""
    shares: dict[str, float] = {}
    for era, mode in ERAS:
        async with _connect(server.sdk_server, mode) as client:
            for query in queries[:20]:
                await client.call_tool("search", {"query": query})
            profiler = cProfile.Profile()
            profiler.enable()
            for index in range(calls):
                await client.call_tool("search", {"query": queries[index % len(queries)]})
            profiler.disable()
        stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        own = own_time_by_group(stats, _GROUPS)
        total = sum(own.values()) or 1.0
        for label, seconds in own.items():
            shares[f"{label}|{era}"] = 100 * seconds / total
    return shares


# --- the benchmark ------------------------------------------------------------------------


def run(
    size: int = 10_000,
    *,
    runs: int = 600,
    fastmcp_runs: int = 15,
    compare: bool = True,
    profile_calls: int = 300,
) -> list[Table]:
    """Measure the round trips; return the round-trip, overhead and profile tables."""
    catalog = synthetic_catalog(size)
    invoked = _invoked(catalog)
    registry = Registry(to_operations(catalog, create_invoice), AllowAll())
    server = GatewayServer(registry)
    queries = query_mix(QUERIES)
    fastmcp: _FastMCP | str = "comparison skipped"
    if compare:
        fastmcp = _fastmcp(catalog)
    del catalog

    trips = Table(
        f"MCP round trips at {size:,} operations (per-call times, official mcp.Client in process)",
        (
            "call",
            "era",
            "server",
            "runs",
            "items",
            "median ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "CPU median ms",
            "FastMCP ÷ opgate",
            "target ms",
            "ok",
        ),
    )
    overhead = Table(
        "opgate: the registry call alone and the complete round trip (medians)",
        (
            "call",
            "era",
            "registry µs",
            "round trip µs",
            "adapter + SDK µs",
            "registry share",
            "CPU: registry µs",
            "CPU: round trip µs",
            "CPU: adapter + SDK µs",
        ),
    )
    measured: dict[str, dict[str, _Measured]] = {}
    asyncio.run(
        _run_eras(server, registry, invoked.name, queries, fastmcp, runs, fastmcp_runs, measured)
    )

    for era, _mode in ERAS:
        results = measured[era]
        for call in ("search", "invoke"):
            ours = results[f"opgate {call}"]
            mine = ours.wall
            target = TARGET_SEARCH_US / 1_000 if call == "search" else None
            trips.add(
                call=call,
                era=era,
                server="opgate",
                runs=mine.runs,
                items=ours.items,
                **_millis(ours),
                **{
                    "target ms": target,
                    "ok": None if target is None else mine.median_ns <= TARGET_SEARCH_US * 1_000,
                },
            )
            label = "FastMCP BM25" if call == "search" else "FastMCP call_tool"
            if isinstance(fastmcp, str):
                trips.add(call=call, era=era, server=label, **{"median ms": fastmcp})
            else:
                theirs = results[f"fastmcp {call}"]
                trips.add(
                    call=call,
                    era=era,
                    server=label,
                    runs=theirs.wall.runs,
                    items=theirs.items,
                    **_millis(theirs),
                    **{"FastMCP ÷ opgate": theirs.wall.median_ns / mine.median_ns},
                )
            alone = results[f"registry {call}"]
            overhead.add(
                call=call,
                era=era,
                **{
                    "registry µs": alone.wall.median_us,
                    "round trip µs": mine.median_us,
                    "adapter + SDK µs": mine.median_us - alone.wall.median_us,
                    "registry share": f"{100 * alone.wall.median_ns / mine.median_ns:.0f}%",
                    "CPU: registry µs": alone.cpu.median_us,
                    "CPU: round trip µs": ours.cpu.median_us,
                    "CPU: adapter + SDK µs": ours.cpu.median_us - alone.cpu.median_us,
                },
            )
    trips.notes.append(
        "items = mean results per search page (opgate: page of up to 5 matching every term; "
        "FastMCP: up to 5 BM25 hits, full tool definitions) or content blocks per invoke. "
        "p99 of fewer than 100 runs is the maximum. FastMCP ÷ opgate = ratio of wall-clock "
        "medians, same era, same run. CPU = this process's CPU time for the same calls "
        "(everything runs in it): on a shared machine, wall-clock time also counts the "
        "time other processes held the core."
    )
    if isinstance(fastmcp, _FastMCP):
        trips.notes.append(
            f"FastMCP catalog built in {fastmcp.build_s:.1f} s (tool objects stored directly: "
            "its add_tool is quadratic); its BM25 index is built by the first search "
            "(warm-up, not timed) and the catalog rehashed on every search."
        )
    overhead.notes.append(
        "registry = await registry.search(ctx, query) / registry.invoke(ctx, name, arguments) "
        "alone, interleaved with the round trips; adapter + SDK = round trip - registry "
        "(opgate.mcp argument checks and result building, SDK client and server, transport)."
    )
    tables = [trips, overhead]
    if profile_calls:
        shares = asyncio.run(_profile(server, queries, profile_calls))
        profile = Table(
            f"Where an opgate search round trip spends its time (cProfile, {profile_calls} calls "
            "per era, own time by package)",
            ("package", *(f"{era} %" for era, _ in ERAS)),
        )
        labels = [label for label, _ in _GROUPS] + [OTHER_GROUP]
        ordered = sorted(labels, key=lambda label: -shares.get(f"{label}|{ERAS[0][0]}", 0.0))
        for label in ordered:
            profile.add(
                package=label,
                **{f"{era} %": shares.get(f"{label}|{era}", 0.0) for era, _ in ERAS},
            )
        profile.notes.append(
            "cProfile's own time per function, summed by the package of its file; a built-in "
            "or standard-library function's own time goes to the packages of its callers "
            "(asyncio and contextvars count as the event loop). Profiling inflates code made "
            "of many small Python calls, so read shares, not times."
        )
        tables.append(profile)
    return tables


def _millis(measured: _Measured) -> dict[str, float]:
    wall = measured.wall
    return {
        "median ms": wall.median_ns / 1e6,
        "p90 ms": wall.p90_ns / 1e6,
        "p99 ms": wall.p99_ns / 1e6,
        "max ms": wall.max_ns / 1e6,
        "CPU median ms": measured.cpu.median_ns / 1e6,
    }


async def _run_eras(
    server: GatewayServer,
    registry: Registry,
    invoked: str,
    queries: Sequence[str],
    fastmcp: _FastMCP | str,
    runs: int,
    fastmcp_runs: int,
    measured: dict[str, dict[str, _Measured]],
) -> None:
    count = len(queries)
    invoke_arguments = {"name": invoked, "arguments": ARGUMENTS}
    page = await registry.search(None, queries[0])
    assert isinstance(page, SearchPage), page
    for era, mode in ERAS:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(_connect(server.sdk_server, mode))

            async def opgate_search(index: int, client: Any = client) -> Any:
                return await client.call_tool("search", {"query": queries[index % count]})

            async def opgate_invoke(index: int, client: Any = client) -> Any:
                return await client.call_tool("invoke", invoke_arguments)

            async def registry_search(index: int) -> Any:
                return await registry.search(None, queries[index % count])

            async def registry_invoke(index: int) -> Any:
                return await registry.invoke(None, invoked, ARGUMENTS)

            variants = {
                "opgate search": _Variant(opgate_search, runs, _opgate_items),
                "registry search": _Variant(registry_search, runs),
                "opgate invoke": _Variant(opgate_invoke, runs, _invoke_items),
                "registry invoke": _Variant(registry_invoke, runs),
            }
            if isinstance(fastmcp, _FastMCP):
                await stack.enter_async_context(fastmcp.server._lifespan_manager())
                other = await stack.enter_async_context(_connect(fastmcp.server._mcp_server, mode))

                async def fastmcp_search(index: int, other: Any = other) -> Any:
                    return await other.call_tool("search_tools", {"query": queries[index % count]})

                async def fastmcp_invoke(index: int, other: Any = other) -> Any:
                    return await other.call_tool("call_tool", invoke_arguments)

                variants["fastmcp search"] = _Variant(fastmcp_search, fastmcp_runs, _fastmcp_items)
                variants["fastmcp invoke"] = _Variant(fastmcp_invoke, fastmcp_runs, _invoke_items)
            measured[era] = await _measure(variants, ROUNDS)


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=600, help="opgate calls per variant and era")
    parser.add_argument("--fastmcp-runs", type=int, default=15, help="FastMCP calls likewise")
    parser.add_argument("--no-compare", action="store_true", help="skip FastMCP")
    parser.add_argument("--profile-calls", type=int, default=300, help="0 skips the profile")
    args = parser.parse_args(argv)
    print_heading("MCP round-trip benchmark")
    tables = run(
        args.size,
        runs=args.runs,
        fastmcp_runs=args.fastmcp_runs,
        compare=not args.no_compare,
        profile_calls=args.profile_calls,
    )
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
