"""A host's own ranking: the ``Scorer`` protocol, what it sees, and its ``Ranker``.

``Registry(..., ranking=scorer)`` ranks by the host's scores (embeddings from a model
the host provides, for example): ``ScorerRanker`` adapts the host's ``Scorer`` to the
``Ranker`` protocol the registry pages through, checking what the scorer returns and
ordering by ``(-score, len(name), name)``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._index import TIER_NAME, Scope, SearchIndex, fold_group, has_terms

__all__ = ["Candidate", "Scorer", "ScorerRanker"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """An operation as a ``Scorer`` sees it: its texts, never its handler or schemas.

    Schemas are excluded from every ranking (spec 003): a host that wants parameter
    names found writes them in the ``examples`` or the ``description``.
    """

    name: str
    group: str
    summary: str
    description: str
    examples: tuple[str, ...]


@runtime_checkable
class Scorer(Protocol):
    """A host's own relevance scores, used by ``Registry(..., ranking=scorer)``.

    ``name`` identifies the scorer (and its version, if scores change between
    versions): cursors are bound to it, so a cursor issued under one scorer is refused
    under another. ``score(query, candidates)`` returns one finite score per candidate,
    in order (a list, tuple or numpy array; a set or mapping, having no order, fails
    the search); a candidate scoring ``0`` or less does not match. It is called for each
    search page with a query that has at least one word (an exact operation name and
    an empty query never reach it) and every operation of the catalog, the same tuple
    each time, so a scorer may key precomputed data (embeddings) by position or name.
    A candidate's score must depend only on the query and that candidate, and be the
    same every time: paging resumes after the last placed operation's score.

    Results are ordered by descending score, then shorter name, then name; the group
    filter, discovery scope, policy, page budget and cursors then apply as for the
    built-in rankings. ``score`` runs inline in ``Registry.search``: keep it fast
    (compute embeddings of the catalog beforehand). An exception from it fails that
    search as an internal error.
    """

    @property
    def name(self) -> str:
        """The scorer's identity, bound into its cursors."""
        ...

    def score(self, query: str, candidates: Sequence[Candidate]) -> Collection[float]:
        """One score per candidate, in order (a list, a tuple, a numpy array, ...)."""
        ...


class ScorerRanker:
    """A host scorer's ranking: scores every candidate per page, orders, filters.

    ``rule`` is the catalog's ``SearchIndex``, read only to turn a cursor's last placed
    name back into its entry index."""

    __slots__ = ("_candidates", "_groups", "_lengths", "_rule", "_scorer")

    def __init__(self, scorer: Scorer, candidates: tuple[Candidate, ...], rule: SearchIndex):
        self._scorer = scorer
        self._candidates = candidates
        self._rule = rule
        self._lengths = [len(c.name) for c in candidates]
        self._groups = [fold_group(c.group) for c in candidates]

    def ranks(self, query: str) -> bool:
        """Whether ``query`` has a word (``has_terms``): the scorer is never called with
        an empty query."""
        return has_terms(query)

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Yield ``(0, entry index)`` for every candidate scoring above 0, by descending
        score, then shorter name, then name; ``Ranker``'s contract otherwise."""
        candidates = self._candidates
        returned = self._scorer.score(query, candidates)
        if isinstance(returned, AbstractSet | Mapping):  # no order to pair scores with
            raise TypeError(
                f"Scorer {self._scorer.name!r} returned a {type(returned).__name__}: "
                "return one score per candidate, in order (a list, tuple or array)"
            )
        if len(returned) != len(candidates):
            raise ValueError(
                f"Scorer {self._scorer.name!r} returned {len(returned)} scores "
                f"for {len(candidates)} candidates"
            )
        scores = [float(value) for value in returned]
        if not all(map(math.isfinite, scores)):
            raise ValueError(f"Scorer {self._scorer.name!r} returned a score that is not finite")
        lengths = self._lengths
        # (-score, name length, entry id): entries are in name order, so this is the
        # documented (-score, len(name), name) order, and a total one.
        keys = [(-score, lengths[i], i) for i, score in enumerate(scores) if score > 0]
        if group:
            folded, groups = fold_group(group), self._groups
            keys = [key for key in keys if groups[key[2]] == folded]
        if scope is not None:
            members = scope.members
            keys = [key for key in keys if key[2] in members]
        if after is not None:
            last = self._rule.exact(after[1])
            if last is None:  # pragma: no cover - cursors carry names of this catalog
                return
            placed = (-scores[last], lengths[last], last)
            keys = [key for key in keys if key > placed]
        # a heap, popped lazily: a page usually needs only the first few
        heapq.heapify(keys)
        while keys:
            yield TIER_NAME, heapq.heappop(keys)[2]
