"""Real-catalog benchmark (issue 10): search latency distributions over the botocore catalog.

``python benchmarks/bench_real.py [--copies 1 5] [--queries 400] [--repeat 3]``

Builds ``real_catalog(copies)`` (``real_catalog.py``: about 20,000 AWS operations, or
100,000 with five renamed copies), registers it (``Limits(definition_bytes=512 KiB)``:
sixteen AWS input schemas exceed the 64 KiB default), draws seeded queries from the
catalog's own vocabulary (``real_queries``) and times, per query, the median of
``repeat`` calls (cold: the registry keeps no result cache), reporting the
distribution over queries — median, p90, p99, max — for: page 1, page 2 (through the
cursor), page 1 under a policy admitting 1%, page 1 with a group filter (the group of
a random operation), and an empty search by a guest who may see two operations, with
and without the ``discovery_scope`` hook. Construction time and the registry's RSS
are measured in a fresh subprocess.

Targets (issue 10), real 20 k: page 1 median <= 0.15 ms, p90 <= 0.4 ms, max <= 1 ms;
real 100 k: p90 <= 2 ms, max <= 5 ms; guest empty search with the hook <= 1 ms at
100 k; construction <= 3 s / <= 15 s, RSS added <= 150 MB / <= 750 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from common import (
    AllowAll,
    OnePercent,
    Table,
    argument_parser,
    print_heading,
    print_tables,
    rss_bytes,
    run_probe,
    synthetic_catalog,
)
from opgate import DiscoveryScope, Failure, FailureCode, Limits, Operation, Registry, SearchPage
from real_catalog import RealOperation, real_catalog, real_queries

#: The botocore catalog; ``"synthetic:N"`` selects an N-operation synthetic catalog
#: (renamed copies like the real one) so the harness runs without botocore.
REAL = "botocore"

LIMITS = Limits(definition_bytes=512 * 1024)
_DENIED = Failure(FailureCode.UNAVAILABLE)


async def _handler(invocation: Any) -> Any:  # never called by this benchmark
    raise NotImplementedError


def to_operations(catalog: Sequence[RealOperation], *, schemas: bool = True) -> list[Operation]:
    """The catalog as operations; without ``schemas`` every input schema is the default
    (search never reads schemas, and such a registry builds in seconds)."""
    return [
        Operation(
            op.name,
            op.summary,
            _handler,
            description=op.description,
            group=op.group,
            **({"input_schema": op.input_schema} if schemas else {}),
        )
        for op in catalog
    ]


class Guest:
    """May discover exactly two operations; ``hook`` adds ``discovery_scope``."""

    def __init__(self, names: tuple[str, str], *, hook: bool) -> None:
        self.names = frozenset(names)
        self.hook = hook

    def scope_key(self, ctx: Any) -> str:
        return "guest"

    def authorize(self, ctx: Any, request: Any) -> Failure | None:
        return None if request.name in self.names else _DENIED

    def __getattr__(self, name: str) -> Any:
        if name == "discovery_scope" and self.hook:
            return lambda ctx: DiscoveryScope(prefixes=tuple(sorted(self.names)))
        raise AttributeError(name)


def _distribution(samples: list[int]) -> dict[str, float]:
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "median ms": statistics.median(ordered) / 1e6,
        "p90 ms": ordered[min(n - 1, n * 9 // 10)] / 1e6,
        "p99 ms": ordered[min(n - 1, n * 99 // 100)] / 1e6,
        "max ms": ordered[-1] / 1e6,
    }


#: The clock of the search timings: ``time.perf_counter_ns`` (wall) or, with ``--cpu``,
#: ``time.thread_time_ns`` (this thread's CPU time: steadier on a shared machine).
CLOCK: Callable[[], int] = time.perf_counter_ns


async def _per_call(fn: Callable[[], Awaitable[object]], repeat: int) -> int:
    times = []
    clock = CLOCK
    for _ in range(repeat):
        begin = clock()
        await fn()
        times.append(clock() - begin)
    return sorted(times)[len(times) // 2]


async def _measure(
    registry: Registry, queries: list[str], groups: list[str], repeat: int
) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"page 1": [], "page 2": [], "group filter": []}
    gc.collect()
    for query, group in zip(queries, groups, strict=True):
        first = await registry.search(None, query)
        assert isinstance(first, SearchPage), first
        found["page 1"].append(await _per_call(lambda q=query: registry.search(None, q), repeat))
        if first.next_cursor is not None:
            cursor = first.next_cursor
            found["page 2"].append(
                await _per_call(
                    lambda q=query, c=cursor: registry.search(None, q, cursor=c), repeat
                )
            )
        found["group filter"].append(
            await _per_call(lambda q=query, g=group: registry.search(None, q, group=g), repeat)
        )
    return found


def catalog_for(source: str, copies: int) -> list[RealOperation]:
    """``copies`` of the catalog named by ``source`` (``REAL`` or ``"synthetic:N"``)."""
    if source == REAL:
        return real_catalog(copies)
    kind, _, size = source.partition(":")
    if kind != "synthetic" or not size.isdigit():
        raise ValueError(f"unknown catalog source {source!r}")
    base = [
        RealOperation(op.name, op.group, op.summary, op.description, op.input_schema)
        for op in synthetic_catalog(int(size))
    ]
    catalog = list(base)
    for copy in range(2, copies + 1):
        catalog.extend(
            RealOperation(
                f"{op.group}-r{copy}{op.name[len(op.group) :]}",
                f"{op.group}-r{copy}",
                op.summary,
                op.description,
                op.input_schema,
            )
            for op in base
        )
    return catalog


def _build_probe(copies: int, source: str = REAL) -> dict[str, float]:
    """Run in a child: construction time and RSS added by the registry."""
    catalog = catalog_for(source, copies)
    operations = to_operations(catalog)
    del catalog
    gc.collect()
    before = rss_bytes()
    begin = time.perf_counter()
    registry = Registry(operations, AllowAll(), limits=LIMITS)
    seconds = time.perf_counter() - begin
    gc.collect()
    return {"entries": len(registry), "seconds": seconds, "rss": rss_bytes() - before}


def _build_row(copies: int, source: str) -> dict[str, float]:
    return run_probe(__file__, "--build-probe", str(copies), "--source", source)


def run(
    copies: Sequence[int] = (1, 5),
    *,
    queries: int = 400,
    repeat: int = 3,
    source: str = REAL,
    guest_runs: tuple[int, int] = (5, 50),
    build: bool = True,
    schemas: bool = True,
) -> list[Table]:
    table = Table(
        "Real catalog: construction (fresh subprocess)",
        ("catalog", "Registry() s", "RSS added MB", "target s", "target MB"),
    )
    search = Table(
        "Real catalog: search latency over seeded queries (median of per-query medians)",
        ("catalog", "scenario", "queries", "median ms", "p90 ms", "p99 ms", "max ms"),
    )
    base = catalog_for(source, 1)
    drawn = real_queries(base, queries)
    for count in copies:
        catalog = catalog_for(source, count)
        if build:
            probe = _build_row(count, source)
            table.add(
                **{
                    "catalog": int(probe["entries"]),
                    "Registry() s": probe["seconds"],
                    "RSS added MB": probe["rss"] / 1e6,
                    "target s": 3.0 if count == 1 else 15.0,
                    "target MB": 150.0 if count == 1 else 750.0,
                }
            )
        operations = to_operations(catalog, schemas=schemas)
        rng = random.Random(count)
        groups = [rng.choice(catalog).group for _ in drawn]
        allow = Registry(operations, AllowAll(), limits=LIMITS)
        results = asyncio.run(_measure(allow, drawn, groups, repeat))
        del allow
        few = Registry(operations, OnePercent(), limits=LIMITS)
        results["1% policy, page 1"] = asyncio.run(_measure(few, drawn, groups, repeat))["page 1"]
        del few
        pair = (catalog[len(catalog) // 3].name, catalog[2 * len(catalog) // 3].name)
        for hook in (False, True):
            guest = Registry(operations, Guest(pair, hook=hook), limits=LIMITS)
            label = "guest sees 2, empty search, " + ("with hook" if hook else "no hook")
            runs = guest_runs[hook]
            results[label] = [
                asyncio.run(_per_call(lambda r=guest: r.search(None, ""), runs)) for _ in range(3)
            ]
            del guest
        for scenario, samples in results.items():
            search.add(
                catalog=len(catalog),
                scenario=scenario,
                queries=len(samples),
                **_distribution(samples),
            )
        del operations, catalog
        gc.collect()
    return [table, search] if build else [search]


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", default=REAL, help='"botocore" or "synthetic:N"')
    parser.add_argument("--build-probe", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--search-only",
        action="store_true",
        help="skip the construction probe and register the operations without their "
        "input schemas (search never reads them): registries build in seconds",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="time searches in thread CPU time, not wall time"
    )
    args = parser.parse_args(argv)
    if args.build_probe:
        print(json.dumps(_build_probe(args.build_probe, args.source)))
        return []
    global CLOCK
    if args.cpu:
        CLOCK = time.thread_time_ns
    clock = "thread CPU time" if args.cpu else "wall time"
    try:
        with open("/proc/loadavg", encoding="utf-8") as loadavg:
            clock += f"; load average at start {' '.join(loadavg.read().split()[:3])}"
    except OSError:
        pass
    print_heading("Real-catalog benchmark", f"search timed in {clock}")
    tables = run(
        args.copies,
        queries=args.queries,
        repeat=args.repeat,
        source=args.source,
        build=not args.search_only,
        schemas=not args.search_only,
    )
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
