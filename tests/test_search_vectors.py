"""Tests of ``opgate._search._vectors``: the hybrid ranking's vector index.

The catalog embedded in batches at construction into a normalized float32 matrix; every
kind of bad embedder output a ``ConfigurationError`` naming the embedder, the texts and
what is wrong; query vectors remembered (a bounded cache) and query failures as
``EmbedderFailure``; what the embedder reads of an operation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from opgate import ConfigurationError, Hybrid, Registry
from opgate._search import _vectors
from opgate._search._vectors import EmbedderFailure, VectorIndex, document_text
from search_support import HashedWords, catalog, names, op

from conftest import AllowAll


class Returning:
    """An embedder returning ``make(texts, call number)``."""

    name = "returning"

    def __init__(self, make: Any) -> None:
        self._make = make
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return self._make(texts, self.calls)


def _ones(texts: Sequence[str], dimension: int = 3) -> list[list[float]]:
    return [[1.0] * dimension for _ in texts]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda texts, _: _ones(texts)[1:], "returned 4 vectors for 5 texts"),
        (lambda texts, _: [1.0] * len(texts), "array of 1 dimensions"),
        (lambda texts, _: np.ones((len(texts), 2, 2)), "array of 3 dimensions"),
        (lambda texts, _: [[1.0], [1.0, 2.0], *_ones(texts[2:], 1)], "not a matrix of numbers"),
        (lambda texts, _: [["a", "b"] for _ in texts], "not real numbers"),
        (lambda texts, _: np.ones((len(texts), 2), dtype=complex), "complex128 values"),
        (lambda texts, _: np.zeros((len(texts), 0)), "vectors of dimension 0"),
        (lambda texts, _: [[1.0, math.nan], *_ones(texts[1:], 2)], "not finite"),
        (lambda texts, _: [[math.inf, 1.0], *_ones(texts[1:], 2)], "not finite"),
        (lambda texts, n: _ones(texts, 3 if n == 1 else 4), "dimension 4 after vectors of 3"),
        (lambda texts, _: None, "returned object values, not real numbers"),
    ],
)
def test_a_bad_embedder_is_a_configuration_error(make: Any, message: str) -> None:
    operations = [op(f"g.op{i}", "Does a thing.") for i in range(8)]
    with pytest.raises(ConfigurationError) as raised:
        Registry(operations, AllowAll(), ranking=Hybrid(Returning(make), batch=5))
    text = str(raised.value)
    assert re.search(re.escape(message), text), text
    assert "Hybrid embedder 'returning'" in text
    assert "embedding the catalog (texts " in text


def test_an_embedder_that_raises_is_a_configuration_error_naming_it() -> None:
    def fail(texts: Sequence[str], call: int) -> Any:
        if call == 2:
            raise RuntimeError("model not loaded")
        return _ones(texts)

    with pytest.raises(ConfigurationError) as raised:
        Registry(catalog(12), AllowAll(), ranking=Hybrid(Returning(fail), batch=5))
    assert str(raised.value) == (
        "Hybrid embedder 'returning' raised RuntimeError embedding the catalog "
        "(texts 5-9 of 12): model not loaded"
    )
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_the_catalog_is_embedded_in_batches_into_unit_float32_rows() -> None:
    embedder = HashedWords()
    texts = [f"word{i} other" for i in range(10)] + [""]
    index = VectorIndex(embedder, texts, 4)
    assert embedder.calls == [4, 4, 3]
    matrix = index._matrix
    assert matrix.dtype == np.float32
    assert matrix.flags.c_contiguous
    assert matrix.shape == (11, 64)
    norms = np.linalg.norm(matrix, axis=1)
    assert np.allclose(norms[:10], 1.0, atol=1e-6)
    assert norms[10] == 0.0  # a text without words: a zero vector stays zero
    assert index.dimension == 64
    assert len(index) == 11


def test_huge_and_integer_vectors_normalize() -> None:
    index = VectorIndex(
        Returning(lambda texts, _: [[1e300, 1e300], [3, 4]][: len(texts)]), ["a", "b"], 8
    )
    assert np.allclose(index._matrix, [[math.sqrt(0.5)] * 2, [0.6, 0.8]], atol=1e-6)


def test_query_vectors_are_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_vectors, "QUERY_CACHE", 2)
    embedder = HashedWords()
    index = VectorIndex(embedder, ["alpha", "beta"], 8)
    embedder.calls.clear()
    first = index.query_vector("alpha")
    assert index.query_vector("alpha") is first
    assert embedder.calls == [1]
    index.query_vector("beta")
    index.query_vector("alpha")  # most recently used again
    index.query_vector("gamma")  # evicts beta, the least recently used
    assert len(index._cache) == 2
    assert list(index._cache) == ["alpha", "gamma"]
    assert embedder.calls == [1, 1, 1]
    assert not first.flags.writeable  # shared between searches: never changed in place
    assert float(index.similarities(first)[0]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda texts, n: _ones(texts) if n == 1 else 1 / 0, "raised ZeroDivisionError"),
        (lambda texts, n: _ones(texts) if n == 1 else [[1.0, 2.0]], "dimension 2 after"),
        (lambda texts, n: _ones(texts) if n == 1 else [[math.nan] * 3], "not finite"),
        (lambda texts, n: _ones(texts) if n == 1 else np.ones((0, 3)), "0 vectors for 1 texts"),
    ],
)
def test_a_query_the_embedder_fails_on_is_an_embedder_failure(make: Any, message: str) -> None:
    index = VectorIndex(Returning(make), ["a", "b"], 8)
    with pytest.raises(EmbedderFailure, match=re.escape(message)):
        index.query_vector("a query")
    assert not index._cache


def test_an_empty_catalog_has_no_similarities() -> None:
    index = VectorIndex(HashedWords(), [], 8)
    assert len(index.similarities(index.query_vector("anything"))) == 0


@pytest.mark.anyio
async def test_an_empty_catalog_under_a_hybrid_finds_nothing() -> None:
    reg = Registry([], AllowAll(), ranking=Hybrid(HashedWords()))
    assert await names(reg, "anything") == []


def test_what_the_embedder_reads_of_an_operation() -> None:
    assert document_text("s.Put", "Stores.", "", ("put a file", "")) == "s.Put\nStores.\nput a file"
    seen: list[str] = []

    class Recording(HashedWords):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            seen.extend(texts)
            return super().embed(texts)

    schema = {"type": "object", "properties": {"zanzibar": {"type": "string"}}}
    operation = op("s.upload", "Stores a file.", description="Long.", input_schema=schema)
    Registry([operation], AllowAll(), ranking=Hybrid(Recording()))
    assert seen == ["s.upload\nStores a file.\nLong."]  # never the schema
