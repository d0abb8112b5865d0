"""Run every benchmark and print all tables (Markdown): ``python3 dev.py bench [--quick]``.

Directly: ``.venv/bin/python benchmarks/run_all.py [--quick] [--no-compare] [--output FILE]``.
The full run (10,000 and 100,000 synthetic operations, comparisons included, then the
real botocore catalog at 20,000 and 100,000 operations: ``bench_real.py``, which needs
``botocore`` from the ``bench`` extra) takes several minutes on two cores; ``--quick``
measures 10,000 synthetic operations only, with fewer runs. The gateway benchmark
(``bench_gateway.py``: 50 stdio upstreams of botocore tools behind opgate serve,
FastMCP's proxy and fastmcp-gateway) runs 10 upstreams with ``--quick``.
MCP round trips are always measured at 10,000 operations (FastMCP's round trips
take about a second each, so they get few runs).
``--output`` also writes the tables to a file. Results depend on the machine and on
whatever else runs on it: compare numbers from one run only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_adversarial_json
import bench_construction
import bench_gateway
import bench_interaction
import bench_invoke
import bench_mcp
import bench_mcp_floor
import bench_openapi
import bench_real
import bench_registry
from common import Table, argument_parser, format_table, machine_info, print_tables


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 operations, fewer runs")
    parser.add_argument("--no-compare", action="store_true", help="skip the comparison packages")
    parser.add_argument("--output", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    compare = not args.no_compare
    began = time.perf_counter()
    heading = f"Machine: {machine_info()}"
    print(heading + "\n", flush=True)
    sections: list[tuple[str, list[Table]]] = []

    def section(title: str, tables: list[Table]) -> None:
        print(f"## {title}\n", flush=True)
        print_tables(tables)
        sections.append((title, tables))

    if args.quick:
        section(
            "Registry",
            bench_registry.run((10_000,), runs=100, compare=compare, memory_size=10_000),
        )
        section("Invoke", bench_invoke.run(runs=5_000, compare=compare))
        section("Interaction", bench_interaction.run(runs=1_000, pending=10_000))
        section(
            "MCP round trips",
            bench_mcp.run(10_000, runs=300, fastmcp_runs=5, compare=compare, profile_calls=200),
        )
        section(
            "The SDK's floor",
            bench_mcp_floor.run("synthetic:10000", calls=100, clients=(1, 8, 32), seconds=3),
        )
        section("OpenAPI", bench_openapi.run(runs=3))
        section("Adversarial JSON", bench_adversarial_json.run(runs=20))
        section(
            "Gateway over stdio upstreams",
            bench_gateway.run(
                10,
                40,
                runs=60,
                invoke_runs=200,
                start_servers=5,
                repeats=1,
                compare=compare,
                slow=False,
                profile_calls=100,
            ),
        )
    else:
        section("Registry", bench_registry.run((10_000, 100_000), runs=300, compare=compare))
        section("Invoke", bench_invoke.run(runs=20_000, compare=compare))
        section("Interaction", bench_interaction.run(runs=5_000, pending=10_000))
        section(
            "MCP round trips",
            bench_mcp.run(10_000, runs=1_000, fastmcp_runs=15, compare=compare, profile_calls=500),
        )
        section(
            "The SDK's floor",
            bench_mcp_floor.run("synthetic:10000", calls=300, clients=(1, 8, 32), seconds=10),
        )
        section("OpenAPI", bench_openapi.run(runs=5))
        section("Adversarial JSON", bench_adversarial_json.run(runs=100))
        section("Real catalog (botocore)", bench_real.run((1, 5), queries=400, repeat=3))
        section("Real catalog construction (botocore)", bench_construction.run((1, 5)))
        section("Gateway over stdio upstreams", bench_gateway.run(compare=compare))
    elapsed = time.perf_counter() - began
    print(f"Total time: {elapsed:.0f} s", flush=True)
    if args.output is not None:
        parts = [heading, ""]
        for title, tables in sections:
            parts += [f"## {title}", ""] + [format_table(t) + "\n" for t in tables]
        parts.append(f"Total time: {elapsed:.0f} s")
        args.output.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return [table for _, tables in sections for table in tables]


if __name__ == "__main__":
    main()
