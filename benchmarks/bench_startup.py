"""Cold start and ranking memory (issue 25) on the real catalog.

``python benchmarks/bench_startup.py [--source botocore] [--runs 3] [--no-compare]
[--memory-only | --start-only]``

**Memory.** Each row runs in a fresh subprocess: it builds the catalog's ``Operation``
objects, imports the ranking's modules, collects garbage, then measures
``Registry(operations, AllowAll(), limits=bench_real.LIMITS, ranking=...)``: the RSS
added (``VmRSS`` after the constructor and a ``gc.collect()``, minus before) and the
CPU seconds. The row "relevance index alone" builds a rule registry first and
measures only what ``registry.replace(ranking=Ranking.RELEVANCE)`` adds to it (as
``opgate serve --ranking relevance`` does). Each row ends with one search, which waits
for an index a child process builds; the CPU seconds include the child's. A second child per row
repeats it under ``tracemalloc`` (one frame) for the Python heap the build retains and
its peak: deterministic figures, where RSS also holds what the C allocator keeps of the
build's freed memory.

**Cold start.** From spawning the server to the answer of its first ``tools/list``,
through the official ``mcp.Client`` over stdio (``mode="legacy"``: ``initialize``, then
``tools/list``): ``opgate serve startup_apps:registry`` under the rule and with
``--ranking relevance``, and ``fastmcp run startup_apps.py:mcp`` (FastMCP's server of
the same catalog behind ``BM25SearchTransform``, ``startup_apps.py``), then to the
answer of one search sent right after the listing (FastMCP builds its BM25 index on the
first search). A build remembers the patterns it proved to compile
(``$OPGATE_CACHE_DIR``): the opgate rows start with the memory a first, untimed build of
the catalog left in this run's own directory, and the row "first start" with an empty
one each time, as the very first start of a catalog on a machine would. The variants
alternate, ``--runs`` rounds; the table gives each one's median and best wall seconds
and the load average of the run.

Targets (issue 25): at the real 20 k catalog the relevance registry adds <= 100 MiB; cold
start to the first ``tools/list`` <= FastMCP's in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import (
    Table,
    argument_parser,
    bench_environment,
    format_table,
    print_heading,
    rss_bytes,
    run_probe,
)

__all__ = ["main", "memory_table", "start_table"]

#: The memory rows: label, ranking, and whether only the relevance index is measured.
MEMORY_ROWS = (
    ("rule", "rule", False),
    ("relevance", "relevance", False),
    ("relevance index alone", "relevance", True),
)

#: The first search after the listing (opgate's ``search``, FastMCP's ``search_tools``).
QUERY = "list buckets"

#: How long one server may take to answer its first ``tools/list``.
START_TIMEOUT = 300


def _probe(ranking: str, alone: bool, source: str, trace: bool) -> dict[str, float]:
    """Run in a child: the RSS and CPU (or traced bytes) a registry's construction adds."""
    from bench_real import LIMITS, catalog_for, to_operations
    from common import AllowAll
    from opgate import Ranking, Registry

    operations = to_operations(catalog_for(source, 1))
    chosen = Ranking(ranking)
    if chosen is Ranking.RELEVANCE:
        import opgate._search._relevance  # noqa: F401  (numpy, pystemmer: not the build's)
    base = Registry(operations, AllowAll(), limits=LIMITS) if alone else None
    gc.collect()
    if trace:
        tracemalloc.start(1)
    before = rss_bytes()
    cpu = _cpu_seconds()
    if base is not None:
        built: Any = base.replace(ranking=chosen)
    else:
        built = Registry(operations, AllowAll(), limits=LIMITS, ranking=chosen)
    # replace() may return before a child has built the index: the first search takes it
    asyncio.run(built.search(None, "list buckets"))
    cpu = _cpu_seconds() - cpu
    gc.collect()
    result = {"rss": float(rss_bytes() - before), "cpu": cpu}
    if trace:
        current, peak = tracemalloc.get_traced_memory()
        result.update(traced=float(current), peak=float(peak))
    del built
    return result


def _cpu_seconds() -> float:
    """The CPU seconds of this process and of its children waited for (a build's)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


def memory_table(source: str) -> Table:
    """One fresh child per row and measure (RSS, then traced)."""
    table = Table(
        f"Registry memory by ranking ({source}, fresh subprocess per figure)",
        ("registry", "RSS added MiB", "CPU s", "traced retained MiB", "traced peak MiB"),
    )
    mib = 2**20
    for label, ranking, alone in MEMORY_ROWS:
        flags = ["--alone"] if alone else []
        plain = run_probe(__file__, "--memory-probe", ranking, "--source", source, *flags)
        traced = run_probe(
            __file__, "--memory-probe", ranking, "--source", source, "--trace", *flags
        )
        table.add(
            **{
                "registry": label,
                "RSS added MiB": plain["rss"] / mib,
                "CPU s": plain["cpu"],
                "traced retained MiB": traced["traced"] / mib,
                "traced peak MiB": traced["peak"] / mib,
            }
        )
    table.notes.append(
        "RSS: VmRSS after construction and gc.collect() minus before; traced: tracemalloc "
        "(Python allocations only) in a second child, retained after gc.collect() and peak"
    )
    return table


#: The environment variable of the patterns a build remembers (``opgate._proven_patterns``).
CACHE_ENV = "OPGATE_CACHE_DIR"


def _commands(compare: bool) -> dict[str, tuple[list[str], str | None]]:
    """Each row's command and its pattern memory: ``"remembered"``, ``"empty"`` or none."""
    serve = [sys.executable, "-m", "opgate", "serve", "startup_apps:registry"]
    commands: dict[str, tuple[list[str], str | None]] = {
        "opgate serve (rule)": (serve, "remembered"),
        "opgate serve (rule), first start": (serve, "empty"),
        "opgate serve --ranking relevance": ([*serve, "--ranking", "relevance"], "remembered"),
    }
    if compare:
        fastmcp = Path(sys.executable).with_name("fastmcp")
        if fastmcp.exists():
            fastmcp_run = [
                str(fastmcp),
                "run",
                "startup_apps.py:mcp",
                "--no-banner",
                "--log-level",
                "WARNING",
            ]
            commands["fastmcp run (BM25SearchTransform)"] = (fastmcp_run, None)
    return commands


def _remember_patterns(env: dict[str, str]) -> None:
    """One untimed build of the catalog, leaving its proven patterns in ``env``'s memory."""
    subprocess.run(
        [sys.executable, "-c", "import startup_apps; startup_apps.registry()"],
        cwd=Path(__file__).resolve().parent,
        env=env,
        check=True,
    )


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (Linux ``/proc``), children first."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


async def _first_list(command: list[str], env: dict[str, str]) -> tuple[float, float, int, float]:
    """Seconds from spawning ``command`` to its first ``tools/list`` answer and to the
    answer of the search that follows it (``QUERY``); the tools listed; the server's
    resident memory then (MiB, every process it started included)."""
    import anyio
    from mcp import Client, StdioServerParameters

    parameters = StdioServerParameters(
        command=command[0], args=command[1:], cwd=str(Path(__file__).resolve().parent), env=env
    )
    with anyio.fail_after(START_TIMEOUT):
        begin = time.perf_counter()
        async with Client(parameters, mode="legacy") as client:
            listed = await client.list_tools()
            seconds = time.perf_counter() - begin
            names = {tool.name for tool in listed.tools}
            search = "search" if "search" in names else "search_tools"
            found = await client.call_tool(search, {"query": QUERY})
            searched = time.perf_counter() - begin
            if found.is_error:
                raise RuntimeError(f"{command[0]}: the first search failed: {found.content}")
            resident = sum(_status_kib(pid, "VmRSS") for pid in _descendants(os.getpid()))
    return seconds, searched, len(listed.tools), resident / 1024


def start_table(source: str, runs: int, *, compare: bool = True) -> Table:
    """Every variant's cold start, alternated over ``runs`` rounds."""
    commands = _commands(compare)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    searches: dict[str, list[float]] = {name: [] for name in commands}
    resident: dict[str, list[float]] = {name: [] for name in commands}
    tools: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="opgate-bench-memory-") as folder:
        remembered = {**bench_environment(source), CACHE_ENV: str(Path(folder) / "kept")}
        _remember_patterns(remembered)
        load = os.getloadavg()
        for _ in range(runs):
            for name, (command, memory) in commands.items():
                env = remembered
                if memory == "empty":
                    env = {**remembered, CACHE_ENV: tempfile.mkdtemp(dir=folder)}
                seconds, searched, count, mib = asyncio.run(_first_list(command, env))
                samples[name].append(seconds)
                searches[name].append(searched)
                resident[name].append(mib)
                tools[name] = count
    table = Table(
        f"Cold start to the first tools/list over stdio ({source})",
        (
            "server",
            "median s",
            "best s",
            "first search median s",
            "server RSS MiB",
            "runs",
            "tools listed",
        ),
    )
    for name, found in samples.items():
        table.add(
            server=name,
            **{
                "median s": statistics.median(found),
                "best s": min(found),
                "first search median s": statistics.median(searches[name]),
                "server RSS MiB": statistics.median(resident[name]),
            },
            runs=len(found),
            **{"tools listed": tools[name]},
        )
    end = os.getloadavg()
    table.notes.append(
        f"load average {load[0]:.2f} at start, {end[0]:.2f} at end; variants alternate per "
        "round; wall time from spawn (interpreter, imports, catalog load, construction) to "
        f"the tools/list answer; first search: to the answer of a search for {QUERY!r} "
        "sent after it; server RSS: VmRSS of the server's processes after that search, "
        "median; opgate rows start with the patterns an untimed build proved remembered, "
        "'first start' with none"
    )
    return table


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--source", default="botocore", help='"botocore" or "synthetic:N"')
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-compare", action="store_true", help="skip fastmcp run")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--start-only", action="store_true")
    parser.add_argument("--memory-probe", help=argparse.SUPPRESS)
    parser.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        print(json.dumps(_probe(args.memory_probe, args.alone, args.source, args.trace)))
        return []
    print_heading("Cold start and ranking memory")
    tables = []
    if not args.start_only:
        tables.append(memory_table(args.source))
        print(format_table(tables[-1]), end="\n\n", flush=True)
    if not args.memory_only:
        tables.append(start_table(args.source, args.runs, compare=not args.no_compare))
        print(format_table(tables[-1]), end="\n\n", flush=True)
    return tables


if __name__ == "__main__":
    main()
