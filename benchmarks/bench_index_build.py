"""Search index build benchmark (issue 10, item 4): ``SearchIndex(...)`` alone, real catalog.

``python benchmarks/bench_index_build.py [--copies 1 5] [--repeat 5] [--profile]``

Builds the rule-mode search index over ``real_catalog(copies)`` (about 20,000 AWS
operations, or 100,000 as five renamed copies of the services) exactly as
``Registry`` feeds it (name, group, summary, description and source), with no
schemas and no registry around it, and reports the process CPU time
(``time.process_time``: on a shared machine the comparable figure) of each build:
best and median of ``--repeat`` builds, garbage collected before each.

``--profile`` instead prints a cProfile (own time, top 25) of one build per size.

Target (the index's share of item 4's ``Registry(...)`` <= 3 s): <= 0.4 s at real
20 k, proportionally at 100 k.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import time
from collections.abc import Sequence

from bench_real import REAL, catalog_for
from common import Table, format_table, machine_info
from opgate._search import IndexEntry, SearchIndex


def entries_for(copies: int, source: str = REAL) -> list[IndexEntry]:
    """The index entries ``Registry`` would build for the catalog (no examples)."""
    return [
        IndexEntry(op.name, op.group, op.summary, (op.description, ""))
        for op in catalog_for(source, copies)
    ]


def build_seconds(entries: Sequence[IndexEntry], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        SearchIndex(entries)
        samples.append(time.process_time() - started)
    return samples


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--source", default=REAL, help='"botocore" or "synthetic:N"')
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    print("# Search index build\n")
    print(machine_info())
    print()
    table = Table(
        "Search index build, process CPU seconds", ("entries", "best s", "median s", "builds")
    )
    table.notes.append(f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for copies in args.copies:
        entries = entries_for(copies, args.source)
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            SearchIndex(entries)
            profile.disable()
            print(f"## cProfile, {len(entries):,} entries\n")
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
            continue
        samples = build_seconds(entries, args.repeat)
        table.rows.append(
            {
                "entries": f"{len(entries):,}",
                "best s": f"{min(samples):.3f}",
                "median s": f"{statistics.median(samples):.3f}",
                "builds": len(samples),
            }
        )
    if table.rows:
        print(format_table(table))


if __name__ == "__main__":
    main()
