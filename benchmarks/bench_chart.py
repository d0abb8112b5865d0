"""Search latency against catalog size, opgate beside the comparison packages, as a chart.

``python benchmarks/bench_chart.py [--sizes 1000 3000 10000 30000] [--runs 200]
[--no-compare] [--real 1 5] [--output docs/search-latency.png]``

For each size, the synthetic catalog (``common.synthetic_catalog``) is registered in
opgate (allow-all policy) and, when installed (the ``bench`` extra), in mcp-lens-py and
fastmcp-gateway, built the way ``bench_registry.py`` builds them. Each is timed on the
three text query shapes of ``bench_registry.QUERIES`` (common term, rare term, two
terms; page 1, five results where the package pages); a point is the median over
those shapes of each shape's median time. The chart (log-log, matplotlib from the
``bench`` extra) is written to ``--output``; the table is printed.

``--real 1 5`` adds opgate's points on the real botocore catalog (``real_catalog.py``:
about 20,000 and 100,000 operations; needs botocore from the ``bench`` extra): the
median, over 200 seeded ``real_queries``, of each query's median page-1 time (the
operations registered without input schemas, which search never reads, so the
registries build in seconds). The comparison packages are not run on it.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from pathlib import Path

import bench_registry
from common import (
    AllowAll,
    Table,
    argument_parser,
    format_table,
    machine_info,
    synthetic_catalog,
    time_async,
)
from common import to_operations as opgate_operations
from opgate import Registry

#: The query shapes plotted (the ones every package can answer).
SHAPES = tuple(q for q in bench_registry.QUERIES if q.kind == "plain" and q.query and not q.group)

DEFAULT_SIZES = (1_000, 3_000, 10_000, 30_000)
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "search-latency.png"


def _opgate_ms(size: int, runs: int) -> float:
    registry = Registry(opgate_operations(synthetic_catalog(size)), AllowAll())

    async def measure() -> list[float]:
        medians = []
        for shape in SHAPES:
            timing = await time_async(lambda q=shape.query: registry.search(None, q), runs=runs)
            medians.append(timing.median_ns / 1e6)
        return medians

    return statistics.median(asyncio.run(measure()))


def _comparison_ms(size: int, which: str) -> float | None:
    catalog = synthetic_catalog(size)
    build = bench_registry._mcp_lens if which == "mcp-lens-py" else bench_registry._gateway
    measure = build(catalog)
    medians = []
    for shape in SHAPES:
        timing = measure(shape, shape.query)
        if isinstance(timing, str):  # not installed
            return None
        medians.append(timing.median_ns / 1e6)
    return statistics.median(medians)


def _real_ms(copies: int, queries: int = 200, repeat: int = 5) -> tuple[int, float]:
    """Catalog size and median page-1 latency (ms) over real queries on the real catalog."""
    import bench_real
    from real_catalog import real_catalog, real_queries

    catalog = real_catalog(copies)
    drawn = real_queries(real_catalog(1), queries)
    registry = Registry(
        bench_real.to_operations(catalog, schemas=False), AllowAll(), limits=bench_real.LIMITS
    )

    async def measure() -> list[float]:
        medians = []
        for query in drawn:
            timing = await time_async(lambda q=query: registry.search(None, q), runs=repeat)
            medians.append(timing.median_ns / 1e6)
        return medians

    return len(catalog), statistics.median(asyncio.run(measure()))


def run(
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    runs: int = 200,
    compare: bool = True,
    real: Sequence[int] = (),
) -> Table:
    """Median search latency (ms) per package and catalog size."""
    table = Table(
        "Search latency against catalog size (synthetic catalog, page 1, median over query shapes)",
        ("catalog", "opgate ms", "mcp-lens-py ms", "fastmcp-gateway ms", "opgate real ms"),
    )
    for size in sizes:
        row: dict[str, float | int | None] = {"catalog": size, "opgate ms": _opgate_ms(size, runs)}
        if compare:
            row["mcp-lens-py ms"] = _comparison_ms(size, "mcp-lens-py")
            row["fastmcp-gateway ms"] = _comparison_ms(size, "fastmcp-gateway")
        table.add(**row)
    for copies in real:
        size, milliseconds = _real_ms(copies)
        table.add(catalog=size, **{"opgate real ms": milliseconds})
    return table


def plot(table: Table, output: Path) -> Path | None:
    """Write the chart as PNG; ``None`` when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=110)
    for column, marker, label in (
        ("opgate ms", "o", "opgate"),
        ("mcp-lens-py ms", "s", "mcp-lens-py"),
        ("fastmcp-gateway ms", "^", "fastmcp-gateway"),
        ("opgate real ms", "D", "opgate, real botocore catalog (median over 200 queries)"),
    ):
        points = [(r["catalog"], r.get(column)) for r in table.rows if r.get(column) is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            axes.plot(xs, ys, marker=marker, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("operations in the catalog")
    axes.set_ylabel("search, page 1, median (ms)")
    axes.set_title("Search latency against catalog size (log-log)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output)
    plt.close(figure)
    return output


def main(argv: Sequence[str] | None = None) -> Table:
    parser = argument_parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-compare", action="store_true")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--real", type=int, nargs="*", default=[], help="copies of the real catalog to add"
    )
    args = parser.parse_args(argv)
    print(f"{machine_info()}\n", flush=True)
    table = run(args.sizes, runs=args.runs, compare=not args.no_compare, real=args.real)
    print(format_table(table), flush=True)
    written = plot(table, args.output)
    print(f"chart: {written or 'matplotlib not installed'}")
    return table


if __name__ == "__main__":
    main()
