"""The hybrid ranking's public parts: the host's ``Embedder`` and the ``Hybrid`` choice.

``Registry(..., ranking=Hybrid(embedder))`` ranks by the lexical relevance ranking
(``_relevance``) and by the cosine similarity of the host's embeddings (``_vectors``),
fused by rank (``_fusion``). This module holds only what the API names and needs no
numpy: the vector index and the fusion are imported when a registry is built with a
``Hybrid``, and need the ``relevance`` extra.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._failures import ConfigurationError

__all__ = ["BATCH", "DEPTH", "RRF_K", "Embedder", "Hybrid"]

#: Reciprocal-rank fusion's constant (Cormack, Clarke and Büttcher, "Reciprocal Rank
#: Fusion outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009): an
#: operation at rank ``r`` (1-based) of a ranking adds ``1 / (RRF_K + r)``.
RRF_K = 60

#: How many operations of each ranking take part in the fusion.
DEPTH = 100

#: Texts per ``Embedder.embed`` call while the catalog is embedded.
BATCH = 64

#: The largest ``depth`` and ``batch`` a ``Hybrid`` takes.
_MOST = 100_000


@runtime_checkable
class Embedder(Protocol):
    """A host's embedding model, as ``Hybrid`` calls it.

    ``name`` identifies the model (and its version): cursors are bound to it, so a
    cursor issued under one embedder is refused under another. ``embed(texts)``
    returns one vector per text, in order, all of one dimension: a 2-D numpy array of
    shape ``(len(texts), dimension)`` or a sequence of equal-length sequences of
    finite floats. Vectors are compared by cosine similarity (opgate normalizes them).

    It is called synchronously: at construction, over the catalog's texts in batches
    of ``Hybrid.batch``; then once per distinct query (one text, remembered for later
    pages and repeats), inline in ``Registry.search`` — so it must be fast and local
    (a model in the process, not a network service), may be called from several
    threads at once, and must return the same vector for the same text every time.
    """

    @property
    def name(self) -> str:
        """The model's identity, bound into the hybrid ranking's cursors."""
        ...

    def embed(self, texts: Sequence[str]) -> Collection[Sequence[float]]:
        """One vector per text, in order (a 2-D array, or a list of lists)."""
        ...


@dataclass(frozen=True, slots=True)
class Hybrid:
    """The hybrid ranking: ``Registry(..., ranking=Hybrid(embedder))``.

    The lexical relevance ranking and the embedder's cosine similarity each rank the
    operations the query's group filter and the principal's discovery scope admit; the
    first ``depth`` of each take part, and an operation's fused score is the sum, over
    the two rankings, of ``1 / (k + rank)`` (reciprocal-rank fusion; ``rank`` from 1).
    ``batch`` is how many texts one ``embed`` call gets while the catalog is embedded.
    See ``docs/search.md``, "The hybrid ranking".
    """

    embedder: Embedder
    k: int = RRF_K
    depth: int = DEPTH
    batch: int = BATCH

    def __post_init__(self) -> None:
        for label, value, least in (("k", self.k, 0), ("depth", self.depth, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value:
                raise ConfigurationError(f"Hybrid {label} must be an int of at least {least}")
        for label, value in (("depth", self.depth), ("batch", self.batch)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MOST:
                raise ConfigurationError(f"Hybrid {label} must be an int from 1 to {_MOST}")
        name = getattr(self.embedder, "name", None)
        if not isinstance(name, str) or not name:
            raise ConfigurationError("a Hybrid embedder's name must be a non-empty str")
        if not callable(getattr(self.embedder, "embed", None)):
            raise ConfigurationError(
                f"Hybrid embedder {name!r} must have an embed(texts) method returning vectors"
            )

    @property
    def method(self) -> str:
        """The cursor method of this ranking: every parameter that changes the order."""
        return f"search/hybrid/{self.embedder.name}/k={self.k}/depth={self.depth}"
