"""Search index build benchmark (issue 10, item 4): ``SearchIndex(...)`` alone, real catalog.

``python benchmarks/bench_index_build.py [--copies 1 5] [--repeat 5] [--profile | --instructions]``

Builds the rule-mode search index over ``real_catalog(copies)`` (about 20,000 AWS
operations, or 100,000 as five renamed copies of the services) exactly as
``Registry`` feeds it (name, group, summary, description and source), with no
schemas and no registry around it, and reports the process CPU time
(``time.process_time``: on a shared machine the comparable figure) of each build:
best and median of ``--repeat`` builds, garbage collected before each and built
with the collector paused (as ``Registry`` builds it).

``--profile`` instead prints a cProfile (own time, top 25) of one build per size.

``--instructions`` instead counts the instructions of one build per size under
``valgrind --tool=callgrind`` (the entries are pickled, and a child process that only
loads them is counted too and subtracted): a figure that does not move with the
machine's load, for before/after comparisons on a shared machine (about two minutes
per size at 20 k; run the base with ``PYTHONPATH=<base checkout>/src``).

Target (the index's share of item 4's ``Registry(...)`` <= 3 s): <= 0.4 s at real
20 k, proportionally at 100 k.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pickle
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from bench_real import REAL, catalog_for
from common import Table, argument_parser, format_table, machine_info
from opgate._collector import paused_collector
from opgate._search._index import IndexEntry, SearchIndex


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
        with paused_collector():
            started = time.process_time()
            SearchIndex(entries)
            samples.append(time.process_time() - started)
    return samples


def _callgrind(path: str, build: bool) -> int:
    """Instructions of a child that loads the pickled entries (and builds the index)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--child", path] + (["--build"] if build else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def build_instructions(entries: Sequence[IndexEntry]) -> int:
    """Instructions of one build under callgrind: a loading child's count subtracted."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "entries.pickle")
        with open(path, "wb") as file:
            fields = [(e.name, e.group, e.summary, e.documents) for e in entries]
            pickle.dump(fields, file)
        return _callgrind(path, build=True) - _callgrind(path, build=False)


def _child(path: str, build: bool) -> None:
    with open(path, "rb") as file:
        entries = [IndexEntry(*fields) for fields in pickle.load(file)]
    if build:
        with paused_collector():
            SearchIndex(entries)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--source", default=REAL, help='"botocore" or "synthetic:N"')
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.build)
        return
    print("# Search index build\n")
    print(machine_info())
    print()
    table = Table(
        "Search index build, process CPU seconds", ("entries", "best s", "median s", "builds")
    )
    table.notes.append(f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for copies in args.copies:
        entries = entries_for(copies, args.source)
        if args.instructions:
            count = build_instructions(entries)
            print(f"{len(entries):,} entries: {count / 1e9:.3f} G instructions (callgrind)")
            continue
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
