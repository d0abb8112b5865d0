"""OpenAPI import: GitHub's description (~1,000 operations) from bytes to a ready Registry.

Target (issue 13): construction of GitHub's whole API takes at most 1 s beyond
parsing — ``build_catalog`` on the parsed document (names, schemas, handlers) plus
``catalog.registry(policy)`` (every schema compiled, the search index built).

Phases, each the median of ``runs`` runs:

* parse: ``load_document(path)`` (reading the file and ``json.loads`` with exact numbers);
* plan: ``build_catalog(document.data, ...)``;
* registry: ``catalog.registry(policy)``;
* beyond parsing: plan + registry, measured together, as wall-clock time and as the
  process's CPU time (``time.process_time``): on a machine shared with other work the
  wall-clock time includes waiting for a core, the CPU time does not. ``ok`` compares
  the CPU time with the target.

The document comes from the test corpus cache (``tests/openapi_corpus.py``; installed
on first use); ``--document PATH`` measures another one.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import AllowAll, Table, argument_parser, print_heading, print_tables
from opgate.openapi import build_catalog, load_document

__all__ = ["TARGET_SECONDS", "github_document", "run"]

#: Plan + registry for GitHub's description, in seconds (issue 13).
TARGET_SECONDS = 1.0
BASE_URL = "https://api.github.com"


def github_document() -> Path:
    """GitHub's description from the corpus cache (installing it when missing)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from openapi_corpus import ensure_corpus

    return ensure_corpus().github


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def run(document: Path | None = None, *, runs: int = 5) -> list[Table]:
    """Measure the phases for ``document`` (GitHub's by default); return the table."""
    path = document if document is not None else github_document()
    parse: list[float] = []
    plan: list[float] = []
    registry: list[float] = []
    beyond: list[float] = []
    beyond_cpu: list[float] = []
    operations = skipped = 0
    for _ in range(runs):
        began = time.perf_counter()
        loaded = load_document(path)
        parsed = time.perf_counter()
        cpu = time.process_time()
        catalog = build_catalog(loaded.data, base_url=BASE_URL)
        planned = time.perf_counter()
        built = catalog.registry(AllowAll())
        done = time.perf_counter()
        beyond_cpu.append(time.process_time() - cpu)
        parse.append(parsed - began)
        plan.append(planned - parsed)
        registry.append(done - planned)
        beyond.append(done - parsed)
        operations, skipped = len(built), len(catalog.report.skipped)
    table = Table(
        "OpenAPI import (median of runs)",
        (
            "document",
            "operations",
            "skipped",
            "parse s",
            "plan s",
            "registry s",
            "beyond parsing s",
            "beyond parsing CPU s",
            "target s",
            "ok",
        ),
    )
    seconds = _median(beyond_cpu)
    table.add(
        document=path.name,
        operations=operations,
        skipped=skipped,
        **{
            "parse s": round(_median(parse), 3),
            "plan s": round(_median(plan), 3),
            "registry s": round(_median(registry), 3),
            "beyond parsing s": round(_median(beyond), 3),
            "beyond parsing CPU s": round(seconds, 3),
            "target s": TARGET_SECONDS,
            "ok": seconds <= TARGET_SECONDS,
        },
    )
    table.notes.append(
        "beyond parsing = build_catalog on the parsed document + catalog.registry(policy); "
        f"{runs} runs; ok compares the CPU time with the target"
    )
    return [table]


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--document", type=Path, help="another OpenAPI document")
    args = parser.parse_args(argv)
    print_heading("OpenAPI benchmark")
    tables = run(args.document, runs=args.runs)
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
