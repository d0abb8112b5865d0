"""How search orders its results: the host's choice, made once per registry.

``Registry(..., ranking=...)`` takes

* ``Ranking.RULE`` (the default): the deterministic rule of ``_index`` — every term
  must match as a substring, results tier by the field they match in, ties by name;
* ``Ranking.RELEVANCE``: field-weighted BM25 over stemmed words (``_relevance``), so
  the operation an agent means comes first even when a query word is missing from it;
* a ``Scorer``: the host's own scores (embeddings from a model the host provides, for
  example), called with the query and the candidates.

Whatever the ranking, the registry keeps the rest of search as it is: the exact
operation name returns that operation alone, an empty query browses by name, the
group filter and discovery scope narrow the candidates, the policy judges each one,
pages fill to their byte budget, and sealed cursors continue them. A cursor binds
the ranking (``method``), so one from another ranking is refused.

Every ranking yields ``(tier, entry index)`` pairs from ``ranked(query, group, after,
scope=...)`` (``SearchIndex.ranked``'s contract): the registry seals the last placed
pair and turns it back into ``(tier, name)`` for the next page. The relevance and
scorer rankings order by ``(-score, len(name), name)`` — a total order — and resume
after the last placed name's own key, so pages never repeat or skip an operation.
"""

from __future__ import annotations

import enum
import heapq
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._index import TIER_NAME, IndexEntry, Scope, SearchIndex, fold_group, query_terms

if TYPE_CHECKING:
    from ._relevance import RelevanceEntry, RelevanceIndex

__all__ = [
    "Candidate",
    "Ranker",
    "Ranking",
    "Scorer",
    "build_ranker",
    "index_entries",
    "search_index",
]


class Ranking(enum.Enum):
    """The built-in rankings."""

    #: Substring matching, tiered by field, ties by name (the default).
    RULE = "rule"
    #: Field-weighted BM25 over stemmed words; see ``docs/search.md``.
    RELEVANCE = "relevance"


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


class Ranker(Protocol):
    """What the registry pages through: ``SearchIndex.ranked``'s contract."""

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]: ...


class Described(Protocol):
    """A registered operation's texts, as the registry keeps them."""

    @property
    def name(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def examples(self) -> tuple[str, ...]: ...
    @property
    def source(self) -> str: ...


def index_entries(entries: Sequence[Described]) -> list[IndexEntry]:
    """What the indexes read of the registered operations: name, group, summary, and
    the description, examples and source as documentation (never the schemas)."""
    return [
        IndexEntry(e.name, e.group, e.summary, (e.description, *e.examples, e.source))
        for e in entries
    ]


def search_index(entries: Sequence[Described]) -> SearchIndex:
    """The search index over the entries' names, groups, summaries and other texts."""
    return SearchIndex(index_entries(entries))


def build_ranker(
    ranking: object, index: SearchIndex, entries: Sequence[Described]
) -> tuple[Ranker, str]:
    """The ranker for ``ranking`` over ``entries`` (in ``index``'s order) and the
    cursor method it binds: ``"search"`` for the rule (cursors as before),
    ``"search/relevance"``, or ``"search/scorer/" + scorer.name``."""
    if ranking is Ranking.RULE:
        return index, "search"
    if ranking is Ranking.RELEVANCE:
        entry_type, index_type = _relevance_module()
        relevance = index_type(list(map(entry_type, index_entries(entries))), index)
        return relevance, "search/relevance"
    if isinstance(ranking, Scorer) and not isinstance(ranking, type):
        name = ranking.name
        if not isinstance(name, str) or not name:
            raise TypeError("a Scorer's name must be a non-empty str")
        candidates = tuple(
            Candidate(e.name, e.group, e.summary, e.description, e.examples) for e in entries
        )
        return _Scored(ranking, candidates, index), "search/scorer/" + name
    raise TypeError("ranking must be an opgate.Ranking or an opgate.Scorer")


#: What a registry built with ``Ranking.RELEVANCE`` without the extra raises.
RELEVANCE_EXTRA = (
    "Ranking.RELEVANCE needs the optional relevance extra (pystemmer, numpy): "
    "pip install 'opgate[relevance]'"
)


def _relevance_module() -> tuple[type[RelevanceEntry], type[RelevanceIndex]]:
    """``_relevance``'s index types, imported on first use: pystemmer and numpy are the
    ``relevance`` extra, so a registry under the rule or a ``Scorer`` never needs them."""
    try:
        from ._relevance import RelevanceEntry, RelevanceIndex
    except ImportError as exc:
        raise ImportError(RELEVANCE_EXTRA, name=exc.name) from exc
    return RelevanceEntry, RelevanceIndex


class _Scored:
    """A host scorer's ranking: scores every candidate per page, orders, filters."""

    __slots__ = ("_candidates", "_groups", "_lengths", "_rule", "_scorer")

    def __init__(self, scorer: Scorer, candidates: tuple[Candidate, ...], rule: SearchIndex):
        self._scorer = scorer
        self._candidates = candidates
        self._rule = rule
        self._lengths = [len(c.name) for c in candidates]
        self._groups = [fold_group(c.group) for c in candidates]

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        if not query_terms(query):
            return self._rule.ranked(query, group, after, scope=scope)
        return self._ranked(query, group, after, scope)

    def _ranked(
        self, query: str, group: str, after: tuple[int, str] | None, scope: Scope | None
    ) -> Iterator[tuple[int, int]]:
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
