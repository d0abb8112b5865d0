"""The vector index of the hybrid ranking: the catalog embedded once, queries on demand.

``VectorIndex(embedder, texts, batch)`` calls the host's ``Embedder`` over the catalog's
texts (``document_text`` of each operation) in batches at construction, checks every
batch (a 2-D array of real, finite numbers, one row per text, one dimension
throughout) and keeps the rows as one C-contiguous float32 matrix of unit vectors (a
zero vector stays zero: it is similar to nothing). Whatever is wrong is a
``ConfigurationError`` naming the embedder, the batch and the rule.

``similarities(query)`` is the cosine similarity of the query's vector with every row
(one matrix-vector product, single-threaded). The query's vector comes from ``query_vector``, which
remembers the last ``QUERY_CACHE`` distinct queries' vectors, so a cursor's next page
and a repeated query do not call the embedder again; a query the embedder fails on
(it raises, or returns something that is not one finite vector of the dimension)
raises ``EmbedderFailure``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .._failures import ConfigurationError
from ._hybrid import Embedder

__all__ = ["QUERY_CACHE", "EmbedderFailure", "VectorIndex", "document_text"]

#: Distinct queries whose vectors are remembered (least recently used first out): at
#: 384 dimensions, 1.5 MiB.
QUERY_CACHE = 1024

_Matrix = npt.NDArray[np.float32]


class EmbedderFailure(Exception):
    """The embedder could not embed a query: it raised, or returned a bad vector."""


def document_text(name: str, summary: str, description: str, examples: Sequence[str]) -> str:
    """What the embedder reads of an operation: its name, summary, description and
    examples, a line each (never its schemas, as in every ranking)."""
    return "\n".join(text for text in (name, summary, description, *examples) if text)


def _rows(returned: object, count: int, dimension: int | None) -> npt.NDArray[np.float64]:
    """``returned`` as a float64 matrix of ``count`` rows of ``dimension`` columns (any
    dimension if ``None``); ``ValueError`` saying what it is instead."""
    try:
        array = np.asarray(returned)
    except (TypeError, ValueError):
        raise ValueError(
            "returned something that is not a matrix of numbers (ragged rows?)"
        ) from None
    if array.dtype.kind not in "fiu":
        raise ValueError(f"returned {array.dtype} values, not real numbers")
    if array.ndim != 2:
        raise ValueError(f"returned an array of {array.ndim} dimensions, not one row per text")
    if array.shape[0] != count:
        raise ValueError(f"returned {array.shape[0]} vectors for {count} texts")
    if array.shape[1] == 0:
        raise ValueError("returned vectors of dimension 0")
    if dimension is not None and array.shape[1] != dimension:
        raise ValueError(
            f"returned vectors of dimension {array.shape[1]} after vectors of {dimension}"
        )
    rows = array.astype(np.float64)
    if not np.isfinite(rows).all():
        raise ValueError("returned a value that is not finite (NaN or infinity)")
    return rows


def _unit(rows: npt.NDArray[np.float64]) -> _Matrix:
    """The rows scaled to unit length (a zero row stays zero), as float32."""
    # scaled by the largest magnitude first, so the norm of huge values cannot overflow
    scale = np.abs(rows).max(axis=1, keepdims=True)
    scale[scale == 0] = 1.0
    rows = rows / scale
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(rows / norms, dtype=np.float32)


class VectorIndex:
    """The catalog's unit vectors under one embedder, and its remembered queries."""

    __slots__ = ("_cache", "_dimension", "_embedder", "_lock", "_matrix", "_name")

    def __init__(self, embedder: Embedder, texts: Sequence[str], batch: int) -> None:
        self._embedder = embedder
        self._name = name = embedder.name
        parts: list[_Matrix] = []
        dimension: int | None = None
        for first in range(0, len(texts), batch):
            chunk = list(texts[first : first + batch])
            where = f"texts {first}-{first + len(chunk) - 1} of {len(texts)}"
            try:
                returned = embedder.embed(chunk)
            except Exception as exc:
                raise ConfigurationError(
                    f"Hybrid embedder {name!r} raised {type(exc).__name__} embedding the "
                    f"catalog ({where}): {exc}"
                ) from exc
            try:
                rows = _rows(returned, len(chunk), dimension)
            except ValueError as exc:
                raise ConfigurationError(
                    f"Hybrid embedder {name!r} {exc} embedding the catalog ({where}); "
                    "embed(texts) must return one finite vector per text, all of one dimension"
                ) from None
            dimension = rows.shape[1]
            parts.append(_unit(rows))
        self._matrix: _Matrix = (
            np.ascontiguousarray(np.concatenate(parts))
            if parts
            else np.zeros((0, 1), dtype=np.float32)
        )
        self._dimension = dimension  # None: an empty catalog, any query dimension
        self._cache: OrderedDict[str, _Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._matrix)

    def __repr__(self) -> str:
        return f"VectorIndex(<{len(self._matrix)} vectors of {self.dimension}, {self._name!r}>)"

    @property
    def dimension(self) -> int:
        return int(self._matrix.shape[1])

    def query_vector(self, query: str) -> _Matrix:
        """The query's unit vector (remembered), or ``EmbedderFailure``."""
        with self._lock:
            found = self._cache.get(query)
            if found is not None:
                self._cache.move_to_end(query)
                return found
        # the embedder runs outside the lock: two threads may embed one query at once
        try:
            returned = self._embedder.embed([query])
        except Exception as exc:
            raise EmbedderFailure(
                f"Hybrid embedder {self._name!r} raised {type(exc).__name__} embedding a query"
            ) from exc
        try:
            vector: _Matrix = _unit(_rows(returned, 1, self._dimension))[0]
        except ValueError as exc:
            raise EmbedderFailure(
                f"Hybrid embedder {self._name!r} {exc} embedding a query"
            ) from None
        vector.flags.writeable = False
        with self._lock:
            self._cache[query] = vector
            self._cache.move_to_end(query)
            while len(self._cache) > QUERY_CACHE:
                self._cache.popitem(last=False)
        return vector

    def similarities(self, vector: _Matrix) -> _Matrix:
        """The cosine similarity of ``vector`` (a unit vector) with every operation's."""
        if not len(self._matrix):
            return np.zeros(0, dtype=np.float32)
        # einsum's own loops, not BLAS: one thread whatever the host's BLAS does (a
        # threaded gemv on a busy machine took 20-80 ms instead of about 1 ms at
        # 20,000 x 256), and the same sums whatever its thread count
        found: _Matrix = np.einsum("ij,j->i", self._matrix, vector)
        return found
