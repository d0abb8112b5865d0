"""The hybrid ranking: the lexical relevance ranking and the vector index, fused by rank.

For a query, each of the two rankings orders the operations the group filter and the
principal's discovery scope admit (so operations outside the scope never move a rank):

* lexical: ``RelevanceIndex.scores`` — the operations sharing a stemmed term with the
  query, by descending BM25F score;
* vectors: ``VectorIndex.similarities`` — the operations whose cosine similarity with
  the query's vector is above 0, by descending similarity;

each with ties by shorter name, then name: a total order. The first ``depth`` of each
take part; an operation's fused score is ``1 / (k + lexical rank) + 1 / (k + vector
rank)`` (ranks from 1, a term only for a ranking it is among the first ``depth`` of),
summed in that order so the float is the same on every call. Results are ordered by
descending fused score, then shorter name, then name, and a cursor resumes strictly
after the last placed operation's ``(fused score, name length, name)``: the fused
order is a function of the query, the filters and the two indexes, so every page of a
cursor chain reads the same order.

When the embedder fails on a query's first page (``EmbedderFailure``), that search is
answered by the lexical ranking alone, at tier ``LEXICAL`` — the tier is sealed in the
cursor, so the chain's later pages continue the lexical order whatever the embedder
does then. A later page of a fused chain whose query vector cannot be had (the
embedder fails on it again after it left the query cache) raises ``EmbedderFailure``,
which fails that search as ``internal``: continuing in another order could repeat or
skip operations.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from ._hybrid import Hybrid
from ._index import TIER_NAME, Scope, SearchIndex, fold_group, has_terms
from ._relevance import RelevanceIndex
from ._vectors import EmbedderFailure, VectorIndex

__all__ = ["FUSED", "LEXICAL", "HybridRanker"]

#: The tier of fused results, and of results of the lexical ranking alone (an embedder
#: failure on a first page), as cursors carry them.
FUSED = TIER_NAME
LEXICAL = 1

_Ints = npt.NDArray[np.int64]
_Floats = npt.NDArray[np.float64]


class HybridRanker:
    """The fused ranking over one catalog (entries in name order)."""

    __slots__ = (
        "_depth",
        "_group_codes",
        "_groups",
        "_k",
        "_lengths",
        "_lexical",
        "_rule",
        "_vectors",
    )

    def __init__(
        self,
        hybrid: Hybrid,
        lexical: RelevanceIndex,
        vectors: VectorIndex,
        rule: SearchIndex,
        names: Sequence[str],
        groups: Sequence[str],
    ) -> None:
        self._k, self._depth = hybrid.k, hybrid.depth
        self._lexical, self._vectors, self._rule = lexical, vectors, rule
        self._lengths = np.array([len(name) for name in names], dtype=np.int64)
        codes: dict[str, int] = {}
        self._group_codes = np.array(
            [codes.setdefault(fold_group(group), len(codes)) for group in groups], dtype=np.int64
        )
        self._groups = codes

    def __repr__(self) -> str:
        return f"HybridRanker(<{len(self._lengths)} entries, k={self._k}, depth={self._depth}>)"

    def ranks(self, query: str) -> bool:
        """Whether ``query`` has a term (``has_terms``): an empty query browses."""
        return has_terms(query)

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Yield ``(tier, entry index)`` best first; ``Ranker``'s contract (``after``
        holds the last placed tier and name)."""
        if after is not None and after[0] == LEXICAL:
            return self._lexical_only(query, group, after, scope)
        try:
            vector = self._vectors.query_vector(query)
        except EmbedderFailure:
            if after is not None:
                raise
            return self._lexical_only(query, group, None, scope)
        return self._fused(query, vector, group, after, scope)

    def _lexical_only(
        self, query: str, group: str, after: tuple[int, str] | None, scope: Scope | None
    ) -> Iterator[tuple[int, int]]:
        resume = None if after is None else (TIER_NAME, after[1])
        for _, entry in self._lexical.ranked(query, group, resume, scope=scope):
            yield LEXICAL, entry

    def _fused(
        self,
        query: str,
        vector: npt.NDArray[np.float32],
        group: str,
        after: tuple[int, str] | None,
        scope: Scope | None,
    ) -> Iterator[tuple[int, int]]:
        count = len(self._lengths)
        admitted: npt.NDArray[np.bool_] | None = None
        if group:
            code = self._groups.get(fold_group(group))
            if code is None:
                return
            admitted = self._group_codes == code
        if scope is not None:
            member = np.zeros(count, dtype=bool)
            member[list(scope.members)] = True
            admitted = member if admitted is None else admitted & member
        last: int | None = None
        if after is not None:
            last = self._rule.exact(after[1])
            if last is None:  # pragma: no cover - cursors carry names of this catalog
                return
            if admitted is not None:
                # the last placed operation may have left the scope since (a revoked
                # grant): it still ranks, so paging resumes after it
                admitted[last] = True
        found, scores = self._lexical.scores(query)
        if admitted is not None:
            keep = admitted[found]
            found, scores = found[keep], scores[keep]
        lexical = self._first(found, scores)
        similar = self._vectors.similarities(vector)
        close = similar > 0
        if admitted is not None:
            close &= admitted
        nearest = np.flatnonzero(close)
        vectors = self._first(nearest, similar[nearest].astype(np.float64))
        k = float(self._k)
        fused = np.zeros(count)
        fused[lexical] += 1.0 / (k + np.arange(1, len(lexical) + 1))
        fused[vectors] += 1.0 / (k + np.arange(1, len(vectors) + 1))
        ids = np.flatnonzero(fused > 0)
        values, lengths = fused[ids], self._lengths[ids]
        if last is not None:
            bound, size = fused[last], self._lengths[last]
            keep = (values < bound) | (
                (values == bound) & ((lengths > size) | ((lengths == size) & (ids > last)))
            )
            ids, values, lengths = ids[keep], values[keep], lengths[keep]
        for entry in ids[np.lexsort((ids, lengths, -values))].tolist():
            yield FUSED, entry

    def _first(self, ids: _Ints, scores: _Floats) -> _Ints:
        """The first ``depth`` of ``ids`` by descending score, shorter name, name."""
        depth = self._depth
        if len(ids) > depth:
            floor = np.partition(scores, len(scores) - depth)[len(scores) - depth]
            head = scores >= floor
            ids, scores = ids[head], scores[head]
        order = np.lexsort((ids, self._lengths[ids], -scores))
        return ids[order[:depth]]
