"""Construction benchmark (issue 10, item 4): ``Registry(...)`` time and memory, real catalog.

``python benchmarks/bench_construction.py [--copies 1 5] [--source botocore] [--profile N]``

Each row runs in a fresh subprocess: it builds ``real_catalog(copies)`` (about 20,000
AWS operations, or 100,000 as five renamed copies of the services) as ``Operation``
objects, collects garbage, then measures ``Registry(operations, AllowAll(),
limits=Limits(definition_bytes=512 KiB))``: wall seconds, CPU seconds of the process
(``time.process_time``: on a shared machine the comparable figure) and the RSS added
(after the constructor and a ``gc.collect()``, minus before). It then times, on that
registry, the first invoke of ``ec2.RunInstances`` (its validator compiled on first
use), ``inspect`` of it, and the warm invoke of ``s3.ListBuckets`` (median of 2,000
calls, ``{}`` arguments, an async handler returning one text block).

``--profile N`` instead prints a cProfile (own time, top 25) of constructing a
registry of the first N operations, in this process.

Targets: real 20 k ``Registry(...)`` <= 3 s and RSS added <= 150 MB; real 100 k
<= 15 s and <= 750 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

from bench_real import LIMITS, REAL, catalog_for
from common import (
    AllowAll,
    Table,
    argument_parser,
    print_heading,
    print_tables,
    rss_bytes,
    run_probe,
)
from opgate import Operation, Registry

_FIRST = "ec2.RunInstances"
_WARM = "s3.ListBuckets"


async def _answer(invocation: Any) -> Any:
    return "ok"


def _operations(copies: int, source: str) -> list[Operation]:
    return [
        Operation(
            op.name,
            op.summary,
            _answer,
            description=op.description,
            group=op.group,
            input_schema=op.input_schema,
        )
        for op in catalog_for(source, copies)
    ]


def _timed_parts() -> dict[str, float]:
    """CPU seconds spent in ``SchemaCompiler.compile`` and in the revision, by wrapping
    them (in the child only: the schema work and revision columns)."""
    from opgate import _catalog, _schema

    spent = {"schema": 0.0, "revision": 0.0}
    compile_schema = _schema.SchemaCompiler.compile
    names = vars(_catalog)  # the name the catalog calls (imported from _keys)
    revision = names["definitions_revision"]

    def timed_compile(*args: Any, **kwargs: Any) -> Any:
        begin = time.process_time()
        try:
            return compile_schema(*args, **kwargs)
        finally:
            spent["schema"] += time.process_time() - begin

    def timed_revision(*args: Any, **kwargs: Any) -> Any:
        begin = time.process_time()
        try:
            return revision(*args, **kwargs)
        finally:
            spent["revision"] += time.process_time() - begin

    _schema.SchemaCompiler.compile = timed_compile  # type: ignore[method-assign]
    names["definitions_revision"] = timed_revision
    return spent


def _probe(copies: int, source: str) -> dict[str, float]:
    """Run in a child: construction time, CPU, RSS added and invoke latencies."""
    operations = _operations(copies, source)
    spent = _timed_parts()
    gc.collect()
    before = rss_bytes()
    cpu = time.process_time()
    begin = time.perf_counter()
    registry = Registry(operations, AllowAll(), limits=LIMITS)
    seconds = time.perf_counter() - begin
    cpu = time.process_time() - cpu
    gc.collect()
    rss = rss_bytes() - before
    result: dict[str, float] = {
        "entries": len(registry),
        "seconds": seconds,
        "cpu": cpu,
        "rss": rss,
        "schema_cpu": spent["schema"],
        "revision_cpu": spent["revision"],
    }
    names = {operation.name for operation in operations}
    if _FIRST in names and _WARM in names:
        result.update(asyncio.run(_invokes(registry)))
    return result


async def _invokes(registry: Registry) -> dict[str, float]:
    begin = time.perf_counter()
    first = await registry.invoke(None, _FIRST, "{}")
    first_ms = (time.perf_counter() - begin) * 1e3
    begin = time.perf_counter()
    await registry.inspect(None, _FIRST)
    inspect_ms = (time.perf_counter() - begin) * 1e3
    del first
    for _ in range(200):
        await registry.invoke(None, _WARM, "{}")
    samples = []
    for _ in range(2000):
        begin = time.perf_counter_ns()
        await registry.invoke(None, _WARM, "{}")
        samples.append(time.perf_counter_ns() - begin)
    return {
        "first_ms": first_ms,
        "inspect_ms": inspect_ms,
        "warm_us": statistics.median(samples) / 1e3,
    }


def _row(copies: int, source: str) -> dict[str, float]:
    return run_probe(__file__, "--probe", str(copies), "--source", source)


def run(copies: Sequence[int] = (1, 5), *, source: str = REAL) -> list[Table]:
    """One fresh subprocess per catalog size; return the table."""
    table = Table(
        "Registry(...) construction on the real catalog (fresh subprocess each)",
        (
            "catalog",
            "wall s",
            "CPU s",
            "schema CPU s",
            "revision CPU s",
            "RSS added MB",
            "target s",
            "target MB",
            "first invoke ms",
            "inspect ms",
            "warm invoke µs",
        ),
    )
    for count in copies:
        probe = _row(count, source)
        table.add(
            **{
                "catalog": int(probe["entries"]),
                "wall s": probe["seconds"],
                "CPU s": probe["cpu"],
                "schema CPU s": probe["schema_cpu"],
                "revision CPU s": probe["revision_cpu"],
                "RSS added MB": probe["rss"] / 1e6,
                "target s": 3.0 if count == 1 else 15.0 * count / 5,
                "target MB": 150.0 if count == 1 else 750.0 * count / 5,
                "first invoke ms": probe.get("first_ms"),
                "inspect ms": probe.get("inspect_ms"),
                "warm invoke µs": probe.get("warm_us"),
            }
        )
    table.notes.append(
        f"first invoke: {_FIRST} with {{}} (a validation failure: its validator is "
        f"compiled on first use); warm invoke: {_WARM}, median of 2,000 calls; "
        "schema / revision CPU: time inside SchemaCompiler.compile / definitions_revision"
    )
    return [table]


def _profile(count: int, source: str) -> None:
    import cProfile
    import pstats

    operations = _operations(1, source)[:count]
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    Registry(operations, AllowAll(), limits=LIMITS)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--source", default=REAL, help='"botocore" or "synthetic:N"')
    parser.add_argument("--profile", type=int, help="profile constructing N operations")
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(_probe(args.probe, args.source)))
        return []
    if args.profile:
        _profile(args.profile, args.source)
        return []
    print_heading("Construction benchmark")
    tables = run(args.copies, source=args.source)
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
