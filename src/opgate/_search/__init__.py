"""Search: everything ``Registry.search`` does, and the discovery checks inspect and
invoke share with it.

The modules, in the order a request meets them:

* ``_request``: the checks of a request's query, group, limit and cursor;
* ``_discovery``: the steps that ask the policy about catalog entries: the exact-name
  page, the ranked page filled to its byte budget (search's hot path), and the
  exact-name admission inspect and invoke start with;
* ``_cursor``: sealed search cursors and what they are bound to;
* ``_ranking``: the host's choice of ranking (``Ranking``), the one ``Ranker``
  protocol every ranking implements, ``ranked_by`` (the registry's one way into a
  ranking, holding the empty-query fallback) and how a registry builds its index and
  ranker;
* ``_index``: the search index and the default rule ranking (substring terms,
  tiered by field, ties by name), with exact names, discovery scopes and browsing;
  ``_bitsets`` holds the sets of entry ids it combines, ``_postings`` its posting
  lists, ``_name_index`` and ``_group_index`` its name and group fields,
  ``_text_index`` its summary and documentation fields;
* ``_relevance`` (with ``_tokens`` and ``_thesaurus``): the BM25F relevance
  ranking, imported only when a registry asks for it: numpy and pystemmer are the
  ``relevance`` extra;
* ``_scorer``: a host's own ``Scorer``, what it sees (``Candidate``) and the
  ``ScorerRanker`` that adapts it to ``Ranker``;
* ``_hybrid`` (with ``_vectors`` and ``_fusion``): the hybrid ranking, a host
  ``Embedder``'s vectors beside the relevance ranking, fused by rank; ``_vectors`` and
  ``_fusion`` are imported only when a registry asks for it (numpy).

Only what the rest of the core uses is exported here.
"""

from ._cursor import CursorBinding, CursorError, CursorSealer
from ._discovery import (
    GroupMembers,
    discoverable,
    discoverable_groups,
    exact_page,
    group_members,
    operation_spec,
    ranked_page,
)
from ._hybrid import Embedder, Hybrid
from ._index import SearchIndex, fold_group, normalize_query
from ._ranking import (
    Ranker,
    Ranking,
    begin_index,
    build_ranker,
    pending_ranker,
    search_index,
    start_ranker,
)
from ._request import search_problem
from ._scorer import Candidate, Scorer

__all__ = [
    "Candidate",
    "CursorBinding",
    "CursorError",
    "CursorSealer",
    "Embedder",
    "GroupMembers",
    "Hybrid",
    "Ranker",
    "Ranking",
    "Scorer",
    "SearchIndex",
    "begin_index",
    "build_ranker",
    "discoverable",
    "discoverable_groups",
    "exact_page",
    "fold_group",
    "group_members",
    "normalize_query",
    "operation_spec",
    "pending_ranker",
    "ranked_page",
    "search_index",
    "search_problem",
    "start_ranker",
]
