"""The real-world corpus: APIs.guru's directory and GitHub's description.

Every document imports without an exception (``DocumentError`` aside, for input that
is not OpenAPI 3.0/3.1) and every produced schema compiles (``catalog.registry`` builds
the ``Registry``). The default suite runs a bounded, evenly spread sample; the
``slow`` test runs all of it (``python3 dev.py test -m slow``).
"""

from __future__ import annotations

import pytest

from openapi_corpus import Corpus, ensure_corpus, run_document, sample

#: Documents in the default suite's sample (each at most 1 MB): a few seconds.
SAMPLE = 40


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return ensure_corpus()


def test_a_sample_of_the_directory_imports(corpus: Corpus) -> None:
    paths = sample(corpus.documents()[:-1], SAMPLE)
    assert len(paths) == SAMPLE
    runs = [run_document(path) for path in paths]
    assert sum(run.operations for run in runs) > 200
    assert all(not run.refused for run in runs)


@pytest.mark.slow
def test_the_whole_corpus_imports(corpus: Corpus) -> None:
    documents = corpus.documents()
    assert len(documents) > 2000
    runs = [run_document(path) for path in documents]
    github = runs[-1]
    assert github.operations > 1000
    assert sum(run.operations for run in runs) > 50_000
