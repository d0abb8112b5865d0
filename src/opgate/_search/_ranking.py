"""How search orders its results: the host's choice, made once per registry.

``Registry(..., ranking=...)`` takes

* ``Ranking.RULE`` (the default): the deterministic rule of ``_index`` — every term
  must match as a substring, results tier by the field they match in, ties by name;
* ``Ranking.RELEVANCE``: field-weighted BM25 over stemmed words (``_relevance``), so
  the operation an agent means comes first even when a query word is missing from it;
* a ``Scorer``: the host's own scores (embeddings from a model the host provides, for
  example), called with the query and the candidates (``_scorer``);
* a ``Hybrid``: the relevance ranking and the cosine similarity of a host
  ``Embedder``'s vectors, fused by rank (``_hybrid``, ``_vectors``, ``_fusion``).

Whatever the ranking, the registry keeps the rest of search as it is: the exact
operation name returns that operation alone, an empty query browses by name, the
group filter and discovery scope narrow the candidates, the policy judges each one,
pages fill to their byte budget, and sealed cursors continue them. A cursor binds
the ranking (``method``), so one from another ranking is refused.

Every ranking is a ``Ranker``: the rule's ``SearchIndex``, the ``RelevanceIndex`` and
a scorer's ``ScorerRanker``. The registry reaches them through ``ranked_by`` alone,
which holds the one fallback: a query the ranking does not rank (an empty one; under
relevance, one without a word) goes to the rule, which ranks every query and browses
one without terms by name. Every ranking yields ``(tier, entry index)`` pairs: the
registry seals the last placed pair and turns it back into ``(tier, name)`` for the
next page. The relevance and scorer rankings order by ``(-score, len(name), name)``
— a total order — and resume after the last placed name's own key, so pages never
repeat or skip an operation.
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from .._heap import trim_heap
from ._hybrid import Hybrid
from ._index import IndexEntry, Scope, SearchIndex
from ._scorer import Candidate, Scorer, ScorerRanker

if TYPE_CHECKING:
    from ._index_build import RelevanceBuild, RuleBuild
    from ._relevance import RelevanceEntry, RelevanceIndex

__all__ = [
    "Candidate",
    "Ranker",
    "Ranking",
    "Scorer",
    "begin_index",
    "build_ranker",
    "index_entries",
    "pending_ranker",
    "ranked_by",
    "search_index",
    "start_ranker",
]


class Ranking(enum.Enum):
    """The built-in rankings."""

    #: Substring matching, tiered by field, ties by name (the default).
    RULE = "rule"
    #: Field-weighted BM25 over stemmed words; see ``docs/search.md``.
    RELEVANCE = "relevance"


class Ranker(Protocol):
    """One ordering of search results, as the registry pages through it.

    ``ranks(query)`` says whether the ranking ranks ``query`` itself; ``ranked_by``
    hands any other query to the rule. ``ranked(query, group, after, scope=...)``
    yields ``(tier, entry index)`` for every match of a query it ranks, best first and
    lazily (a page reads only as far as it fills): ``group`` keeps entries whose folded
    group equals ``fold_group(group)`` (empty: no filter), ``after`` is the keyset
    position ``(tier, name)`` of the last placed entry (only entries after it are
    yielded), and ``scope`` (from ``SearchIndex.scope``) keeps only its entries.
    """

    def ranks(self, query: str) -> bool: ...

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]: ...


def ranked_by(
    ranker: Ranker,
    rule: SearchIndex,
    query: str,
    group: str,
    after: tuple[int, str] | None,
    scope: Scope | None,
) -> Iterator[tuple[int, int]]:
    """``ranker``'s matches for ``query``, or the rule's for a query it does not rank:
    the one empty-query fallback of every ranking (the rule ranks every query, and
    browses one without terms by name, so an empty query pages alike under every
    ranking)."""
    if ranker.ranks(query):
        return ranker.ranked(query, group, after, scope=scope)
    return rule.ranked(query, group, after, scope=scope)


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


def begin_index(operations: Sequence[Described]) -> RuleBuild | None:
    """The search index of ``operations`` (in any order) begun in a child process for
    a large catalog (``_index_build``), or ``None``: ``search_index`` takes it."""
    from ._index_build import WORKER_MIN, start_rule

    if len(operations) < WORKER_MIN:
        return None
    return start_rule(index_entries(sorted(operations, key=_name)))


def _name(described: Described) -> str:
    return described.name


def search_index(entries: Sequence[Described], begun: RuleBuild | None = None) -> SearchIndex:
    """The search index over the entries' names, groups, summaries and other texts:
    the one ``begun`` (``begin_index``'s) built if it answered for these texts, else
    built here."""
    texts = index_entries(entries)
    index = None if begun is None else begun.result(texts)
    return SearchIndex(texts) if index is None else index


def start_ranker(ranking: object, entries: Sequence[Described]) -> RelevanceBuild | None:
    """The part of ``ranking``'s index that can be built beside the rule index: the
    relevance index (a ``Hybrid``'s too) of a large catalog, in a child process
    (``_index_build``); ``build_ranker`` takes it. ``None`` when there is none,
    or the relevance extra is missing (``build_ranker`` says so)."""
    if ranking is not Ranking.RELEVANCE and not isinstance(ranking, Hybrid):
        return None
    try:
        _relevance_module()
    except ImportError:
        return None
    from ._index_build import start_relevance

    return start_relevance(index_entries(entries))


def build_ranker(
    ranking: object,
    index: SearchIndex,
    entries: Sequence[Described],
    started: RelevanceBuild | None = None,
) -> tuple[Ranker, str]:
    """The ranker for ``ranking`` over ``entries`` (in ``index``'s order) and the
    cursor method it binds: ``"search"`` for the rule (cursors as before),
    ``"search/relevance"``, ``"search/scorer/" + scorer.name``, or a ``Hybrid``'s
    ``method``. ``started`` is ``start_ranker``'s for the same ranking and entries."""
    if ranking is Ranking.RULE:
        return index, "search"
    if ranking is Ranking.RELEVANCE:
        return _relevance_index(index, entries, started), "search/relevance"
    if isinstance(ranking, Scorer) and not isinstance(ranking, type):
        name = ranking.name
        if not isinstance(name, str) or not name:
            raise TypeError("a Scorer's name must be a non-empty str")
        candidates = tuple(
            Candidate(e.name, e.group, e.summary, e.description, e.examples) for e in entries
        )
        return ScorerRanker(ranking, candidates, index), "search/scorer/" + name
    if isinstance(ranking, Hybrid):
        return _hybrid_ranker(ranking, index, entries, started), ranking.method
    raise TypeError("ranking must be an opgate.Ranking, an opgate.Scorer or an opgate.Hybrid")


def pending_ranker(
    ranking: object, index: SearchIndex, entries: Sequence[Described]
) -> tuple[Ranker, str]:
    """``build_ranker``'s ranker and method, returned before the relevance index of a
    large catalog is built: a child process builds it (``start_ranker``) and the first
    search that reaches the ranker waits for it (or, without an answer, builds it in
    process). What a registry's ``replace(ranking=...)`` takes, having no rule index to
    build beside it."""
    started = start_ranker(ranking, entries)
    if started is None or ranking is not Ranking.RELEVANCE:
        return build_ranker(ranking, index, entries, started)
    return PendingRanker(functools.partial(_relevance_index, index, entries, started)), (
        "search/relevance"
    )


class PendingRanker:
    """A ranker built on first use, once, whichever thread asks first (the others wait
    for it); what its build freed goes back to the system (``trim_heap``), as after a
    registry's."""

    __slots__ = ("_build", "_lock", "_ranker")

    def __init__(self, build: Callable[[], Ranker]) -> None:
        self._build: Callable[[], Ranker] | None = build
        self._ranker: Ranker | None = None
        self._lock = threading.Lock()

    def _built(self) -> Ranker:
        ranker = self._ranker
        if ranker is None:
            with self._lock:
                if self._ranker is None:
                    assert self._build is not None
                    self._ranker = self._build()
                    self._build = None
                    trim_heap()
                ranker = self._ranker
        return ranker

    def ranks(self, query: str) -> bool:
        return self._built().ranks(query)

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        return self._built().ranked(query, group, after, scope=scope)


def _relevance_index(
    index: SearchIndex, entries: Sequence[Described], started: RelevanceBuild | None
) -> RelevanceIndex:
    """The relevance index over ``entries``: the child's (``started``) if it answered,
    else built here."""
    entry_type, index_type = _relevance_module()
    built = None if started is None else started.result(index)
    if built is None:
        built = index_type(list(map(entry_type, index_entries(entries))), index)
    return built


def _hybrid_ranker(
    hybrid: Hybrid,
    index: SearchIndex,
    entries: Sequence[Described],
    started: RelevanceBuild | None,
) -> Ranker:
    """The fused ranker of ``hybrid``: the relevance index, and the vector index built
    by calling the embedder over every operation's text (``_vectors``)."""
    try:
        from ._fusion import HybridRanker
        from ._vectors import VectorIndex, document_text

        _relevance_module()
    except ImportError as exc:
        raise ImportError(HYBRID_EXTRA, name=exc.name) from exc
    lexical = _relevance_index(index, entries, started)
    texts = [document_text(e.name, e.summary, e.description, e.examples) for e in entries]
    vectors = VectorIndex(hybrid.embedder, texts, hybrid.batch)
    return HybridRanker(
        hybrid, lexical, vectors, index, [e.name for e in entries], [e.group for e in entries]
    )


#: What a registry built with ``Ranking.RELEVANCE`` without the extra raises.
RELEVANCE_EXTRA = (
    "Ranking.RELEVANCE needs the optional relevance extra (pystemmer, numpy): "
    "pip install 'opgate[relevance]'"
)


#: What a registry built with a ``Hybrid`` without the extra raises.
HYBRID_EXTRA = (
    "a Hybrid ranking needs the optional relevance extra (pystemmer, numpy): "
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
