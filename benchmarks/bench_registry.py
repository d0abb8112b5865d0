"""Registry benchmark: construction, search, inspect and memory over large synthetic catalogs.

``python benchmarks/bench_registry.py [--sizes 10000 100000] [--runs 300] [--no-compare]``

Targets (issue "Registry, policy, search and inspect over catalogs of 100,000
operations"): search median <= 0.5 ms at 10,000 operations and <= 2 ms at 100,000,
for every query shape and both policies (allow-all, and one admitting 1% of the
operations); construction <= 1 s at 10,000 and <= 10 s at 100,000 (every schema
compiled). Memory: the RSS growth of a 100,000-operation registry, measured in a
fresh subprocess so earlier allocations cannot hide it.

Comparisons, measured in the same run at the smallest size with the allow-all
catalog: mcp-lens-py's ``CapabilityRegistry.search_capabilities`` (its default
scorer, top 5) and ``get_capability_schema``, and fastmcp-gateway's
``ToolRegistry.search`` (the keyword search behind its ``discover_tools`` meta-tool;
it returns every match, deep-copied) and ``lookup``. Both are plain in-process
Python; neither needs a network. When a comparison package is
not installed its cells say so (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from common import (
    AllowAll,
    OnePercent,
    SyntheticOperation,
    Table,
    Timing,
    admitted,
    argument_parser,
    print_heading,
    print_tables,
    rss_bytes,
    run_probe,
    synthetic_catalog,
    time_async,
    time_sync,
    to_operations,
)
from opgate import Failed, Registry, SearchPage

__all__ = ["QUERIES", "main", "run"]

#: Search targets (median microseconds) by catalog size; sizes in between use the larger.
SEARCH_TARGET_US = {10_000: 500.0, 100_000: 2_000.0}
#: Construction targets (seconds) by catalog size.
BUILD_TARGET_S = {10_000: 1.0, 100_000: 10.0}
#: Timed constructions per size (the median is reported).
BUILD_RUNS = 3
#: Timed runs of each comparison search (they scan the whole catalog on every call).
COMPARISON_RUNS = 15


@dataclass(frozen=True, slots=True)
class Query:
    """One query shape: a label, the query text, a group filter, and how it is run."""

    label: str
    query: str = ""
    group: str = ""
    kind: str = "plain"  # "plain", "exact" (an operation name), "page2" or "inspect"


#: The query shapes every size and policy is measured with.
QUERIES: tuple[Query, ...] = (
    Query("common term", "pending"),
    Query("rare term", "chargeback"),
    Query("two terms", "refund webhook"),
    Query("empty browse", ""),
    Query("group filter", "archive", "shipping"),
    Query("exact name", kind="exact"),
    Query("second page (cursor)", "pending", kind="page2"),
    Query("inspect (by name)", kind="inspect"),
)


def _target(table: dict[int, float], size: int) -> float:
    for limit in sorted(table):
        if size <= limit:
            return table[limit]
    return table[max(table)]


def _exact_name(catalog: Sequence[SyntheticOperation], policy: object) -> str:
    middle = len(catalog) // 2
    if isinstance(policy, OnePercent):
        for op in [*catalog[middle:], *catalog[:middle]]:
            if admitted(op.name):
                return op.name
    return catalog[middle].name


async def _search_rows(
    registry: Registry,
    policy: object,
    catalog: Sequence[SyntheticOperation],
    policy_label: str,
    runs: int,
    comparisons: dict[str, Callable[[Query, str], Timing | str]],
    table: Table,
) -> None:
    size = len(catalog)
    target = _target(SEARCH_TARGET_US, size)
    exact = _exact_name(catalog, policy)
    for shape in QUERIES:
        query = exact if shape.kind in ("exact", "inspect") else shape.query
        cursor: str | None = None
        if shape.kind == "page2":
            first = await registry.search(None, query, group=shape.group)
            assert isinstance(first, SearchPage), first
            cursor = first.next_cursor

        async def call(query: str = query, group: str = shape.group, cursor: Any = cursor) -> Any:
            return await registry.search(None, query, group=group, cursor=cursor)

        async def look(name: str = query) -> Any:
            return await registry.inspect(None, name)

        measured = look if shape.kind == "inspect" else call
        answer = await measured()
        if isinstance(answer, Failed):
            raise RuntimeError(f"{shape.label!r} failed: {answer.failure}")
        timing = await time_async(measured, runs=runs)
        row: dict[str, Any] = {
            "catalog": size,
            "policy": policy_label,
            "query": shape.label,
            "items": len(answer.items) if isinstance(answer, SearchPage) else 1,
            "median µs": timing.median_us,
            "p90 µs": timing.p90_ns / 1e3,
            "target µs": target,
            "ok": timing.median_us <= target,
        }
        for label, measure in comparisons.items():
            other = measure(shape, query)
            if isinstance(other, Timing):
                row[f"{label} µs"] = other.median_us
                row[f"{label} ratio"] = other.median_ns / timing.median_ns
            else:
                row[f"{label} µs"] = other
        table.add(**row)


# --- comparisons ----------------------------------------------------------------------------


def _mcp_lens(catalog: Sequence[SyntheticOperation]) -> Callable[[Query, str], Timing | str]:
    try:
        from mcp_lens.registry import (  # type: ignore[import-untyped, unused-ignore]
            Capability,
            CapabilityRegistry,
        )
    except ImportError:
        return lambda shape, query: "not installed"

    async def executor(**arguments: Any) -> Any:
        return arguments

    registry = CapabilityRegistry()
    registry.register_many(
        [
            Capability(
                key=op.name,
                description=f"{op.summary} {op.description}",
                input_schema=op.input_schema,
                executor=executor,
                tags=(op.group,),
            )
            for op in catalog
        ]
    )

    def measure(shape: Query, query: str) -> Timing | str:
        if shape.kind == "inspect":
            return time_sync(lambda: registry.get_capability_schema(query), runs=1_000)
        if shape.kind == "page2":
            return "no paging"
        if shape.group:
            return "no group filter"
        if not query:
            return "returns nothing"
        return time_sync(
            lambda: registry.search_capabilities(query, 5), runs=COMPARISON_RUNS, warmup=2
        )

    return measure


def _gateway(catalog: Sequence[SyntheticOperation]) -> Callable[[Query, str], Timing | str]:
    try:
        from fastmcp_gateway.registry import ToolEntry, ToolRegistry
    except ImportError:
        return lambda shape, query: "not installed"

    registry = ToolRegistry()
    for op in catalog:
        # Its names must be Python identifiers: dots become underscores.
        registry.register_tool(
            ToolEntry(
                name=op.name.replace(".", "_"),
                domain=op.group,
                group=op.resource,
                description=f"{op.summary} {op.description}",
                input_schema=op.input_schema,
                upstream_url="http://127.0.0.1:9/mcp",  # stored only; never contacted
            )
        )

    def measure(shape: Query, query: str) -> Timing | str:
        if shape.kind == "page2":
            return "no paging"
        if shape.group:
            return "no group filter"
        if not query:
            return "lists domains"
        text = query.replace(".", "_") if shape.kind in ("exact", "inspect") else query
        if shape.kind == "inspect":
            return time_sync(lambda: registry.lookup(text), runs=1_000)
        return time_sync(lambda: registry.search(text), runs=COMPARISON_RUNS, warmup=2)

    return measure


# --- memory (in a fresh subprocess) ----------------------------------------------------------


def _memory_probe(size: int) -> dict[str, float]:
    """Run in a child: RSS growth of the catalog and of the registry, then traced bytes."""
    gc.collect()
    base = rss_bytes()
    operations = to_operations(synthetic_catalog(size))
    gc.collect()
    with_operations = rss_bytes()
    registry = Registry(operations, AllowAll())
    gc.collect()
    with_registry = rss_bytes()
    del registry
    gc.collect()
    tracemalloc.start()
    registry = Registry(operations, AllowAll())
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "operations_rss": with_operations - base,
        "registry_rss": with_registry - with_operations,
        "registry_traced": traced,
        "entries": len(registry),
    }


def _memory_row(size: int) -> dict[str, float]:
    return run_probe(__file__, "--memory-probe", str(size))


# --- the benchmark ---------------------------------------------------------------------------


def run(
    sizes: Sequence[int] = (10_000, 100_000),
    *,
    runs: int = 300,
    compare: bool = True,
    memory_size: int | None = 100_000,
) -> list[Table]:
    """Measure construction, search and memory; return the three tables."""
    build = Table(
        "Registry construction",
        (
            "catalog",
            "distinct schemas",
            "Operation objects s",
            "Registry() s",
            "runs",
            "target s",
            "ok",
        ),
    )
    search = Table(
        "Search and inspect (median of per-call times; page size 5)",
        (
            "catalog",
            "policy",
            "query",
            "items",
            "median µs",
            "p90 µs",
            "target µs",
            "ok",
            "mcp-lens µs",
            "mcp-lens ratio",
            "gateway µs",
            "gateway ratio",
        ),
    )
    search.notes.append(
        "ratio = the comparison's median divided by opgate's median for the same query "
        "(above 1: opgate is faster)."
    )
    for size in sizes:
        catalog = synthetic_catalog(size)
        begin = time.perf_counter()
        operations = to_operations(catalog)
        make_ops = time.perf_counter() - begin
        everyone = AllowAll()
        builds = []
        for _ in range(BUILD_RUNS):
            gc.collect()
            begin = time.perf_counter()
            allow_all = Registry(operations, everyone)
            builds.append(time.perf_counter() - begin)
            if len(builds) < BUILD_RUNS:
                del allow_all
        construct = statistics.median(builds)
        distinct = len(
            {json.dumps(op.input_schema, sort_keys=True) for op in catalog}
            | {json.dumps(op.output_schema, sort_keys=True) for op in catalog}
        )
        target = _target(BUILD_TARGET_S, size)
        build.add(
            **{
                "catalog": size,
                "distinct schemas": distinct,
                "Operation objects s": make_ops,
                "Registry() s": construct,
                "runs": BUILD_RUNS,
                "target s": target,
                "ok": construct <= target,
            }
        )
        few = OnePercent()
        one_percent = Registry(operations, few)
        comparisons: dict[str, Callable[[Query, str], Timing | str]] = {}
        if compare and size == min(sizes):
            comparisons = {"mcp-lens": _mcp_lens(catalog), "gateway": _gateway(catalog)}
        asyncio.run(
            _search_rows(allow_all, everyone, catalog, "allow all", runs, comparisons, search)
        )
        asyncio.run(_search_rows(one_percent, few, catalog, "1%", runs, {}, search))
        del allow_all, one_percent, operations, catalog, comparisons
        gc.collect()
    tables = [build, search]
    if memory_size:
        probe = _memory_row(memory_size)
        memory = Table(
            "Resident memory (fresh subprocess)",
            (
                "catalog",
                "definitions RSS MiB",
                "registry RSS MiB",
                "registry traced MiB",
                "registry RSS KiB/op",
            ),
        )
        memory.add(
            **{
                "catalog": int(probe["entries"]),
                "definitions RSS MiB": probe["operations_rss"] / 2**20,
                "registry RSS MiB": probe["registry_rss"] / 2**20,
                "registry traced MiB": probe["registry_traced"] / 2**20,
                "registry RSS KiB/op": probe["registry_rss"] / probe["entries"] / 1024,
            }
        )
        memory.notes.append(
            "definitions = the caller's Operation objects with their texts and schema dicts; "
            "registry RSS = growth from building the Registry on top of them; traced = the "
            "Python allocations the registry keeps (tracemalloc, a second build)."
        )
        tables.append(memory)
    return tables


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--no-compare", action="store_true", help="skip the comparison packages")
    parser.add_argument("--memory-size", type=int, default=100_000, help="0 skips memory")
    parser.add_argument("--memory-probe", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        print(json.dumps(_memory_probe(args.memory_probe)))
        return []
    print_heading("Registry benchmark")
    tables = run(
        args.sizes, runs=args.runs, compare=not args.no_compare, memory_size=args.memory_size
    )
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
