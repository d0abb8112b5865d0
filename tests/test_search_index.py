"""Tests of ``opgate._search._index``: the search index and the default rule ranking.

The rule (terms as case-folded substrings, tiered by field, ties by name) against a plain
reference on random catalogs and under tunings that force every planner path; keyset
paging; exact names; the query helpers (``normalize_query``, ``query_terms``,
``has_terms``, ``fold_group``); and cost on a large catalog. Then the rule as a
``Registry`` serves it: tiers then name, every term, browsing, the group filter, and
schemas never indexed. The same rule against a naive one through the registry
(policies, scopes, cursors) is ``test_search_differential.py``.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opgate import SearchPage
from opgate._search import _bitsets, _group_index, _index, _name_index, _postings, _text_index
from opgate._search._index import (
    IndexEntry,
    SearchIndex,
    fold_group,
    has_terms,
    normalize_query,
    query_terms,
)
from registry_support import CATALOG, all_pages, op, registry
from registry_support import names as page_names

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(
    entries: list[IndexEntry], query: str, group: str = "", after: tuple[int, str] | None = None
) -> list[tuple[int, int]]:
    """The rule, written plainly: test every field of every entry."""
    terms = [term.casefold() for term in query.split()]
    wanted = group.casefold()
    found = []
    for index, entry in enumerate(entries):
        if wanted and entry.group.casefold() != wanted:
            continue
        fields = [(0, entry.name), (1, entry.group), (2, entry.summary)]
        fields += [(3, document) for document in entry.documents]
        tier = 0
        for term in terms:
            best = min((t for t, text in fields if term in text.casefold()), default=None)
            if best is None:
                break
            tier = max(tier, best)
        else:
            if after is None or (tier, entry.name) > after:
                found.append((tier, entry.name, index))
    found.sort()
    return [(tier, index) for tier, _, index in found]


# Characters that exercise folding (sharp s, the fi ligature, dotted and dotless i,
# the three Greek sigmas, a combining accent), ASCII symbols and digits (the symbol
# view of pieces), and whitespace of several kinds.
CHARS = list("abAB sSßẞ iIİ\u0131 ﬁf \u03c3\u03c2\u03a3 é\u0301 _.-/( 17\t\u3000\n")
WORD_CHARS = [c for c in CHARS if not c.isspace()]

texts = st.text(alphabet=st.sampled_from(CHARS), max_size=12)
words = st.text(alphabet=st.sampled_from(WORD_CHARS), min_size=1, max_size=6)
groups = st.sampled_from(["", "a", "A", "ab", "ß", "SS", "ﬁ"])
entries = st.builds(
    IndexEntry,
    name=st.text(alphabet=st.sampled_from(CHARS), min_size=1, max_size=10),
    group=groups,
    summary=texts,
    documents=st.lists(texts, max_size=3).map(tuple),
)
catalogs = st.lists(entries, max_size=40, unique_by=lambda entry: entry.name)

# Tunings that make the index's planner take every path (tiny blocks, tiny limits)
# on small catalogs; the default tuning is the first.
TUNINGS: list[dict[str, object]] = [
    {},
    {"_VOCABULARY_BLOCK": 1, "_DENSE_MIN": 0, "_DENSE_FRACTION": 1 << 30, "_READ": 1},
    {"_VOCABULARY_BLOCK": 2, "_VOCABULARY_SCAN_LIMIT": 2, "_INTERSECT_FROM": 0},
    {"_DENSE_MIN": 1 << 30, "_VERIFY_LIMIT": 0, "_READ": 3, "_FILTER_LIMIT": 0},
    {"SPARSE_LIMIT": 0, "_DENSE_MIN": 2, "_DENSE_FRACTION": 4},
    {"_VOCABULARY_SCAN_LIMIT": 0, "_POSITIONS_LIMIT": 1, "_VERIFY_LIMIT": 1 << 30},
    {"SPARSE_LIMIT": 0, "_POSITIONS_LIMIT": 0, "_DENSE_MIN": 1 << 30, "_READ": 2},
    {"_SURVIVORS": (0, 0, 1 << 30, 1 << 30), "_SPLIT_FROM": 0, "_SHORT_PRECOMPUTE": 0},
    {"_SURVIVORS": (0, 0, 2, 1), "_GROUPS_PRECOMPUTE": 0, "_DENSE_MIN": 1},
]


#: The modules whose constants ``TUNINGS`` set: each name is set in every module holding it.
TUNED = (_index, _bitsets, _group_index, _name_index, _postings, _text_index)


@contextmanager
def tuned(tuning: dict[str, object]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in tuning.items():
            holders = [module for module in TUNED if hasattr(module, name)]
            assert holders, f"no module holds {name}"
            for module in holders:
                patch.setattr(module, name, value)
        yield


@st.composite
def catalog_and_query(draw: st.DrawFn) -> tuple[list[IndexEntry], str, str]:
    """A catalog, and a query mostly made of pieces of its own texts (so it matches)."""
    catalog = draw(catalogs)
    sources = [text for e in catalog for text in (e.name, e.group, e.summary, *e.documents)]
    terms = []
    for _ in range(draw(st.integers(0, 3))):
        source = draw(st.sampled_from(sources)) if sources else ""
        if source and draw(st.booleans()):
            start = draw(st.integers(0, len(source) - 1))
            end = draw(st.integers(start + 1, len(source)))
            piece = source[start:end]
            if draw(st.booleans()):
                piece = piece.swapcase()
            terms.append(piece)
        else:
            terms.append(draw(words))
    separator = draw(st.sampled_from([" ", "  ", "\t", "\u3000"]))
    group = draw(st.one_of(groups, st.sampled_from([e.group for e in catalog] or [""])))
    return catalog, separator.join(terms), group


@pytest.mark.parametrize("tuning", TUNINGS)
@FAST
@given(case=catalog_and_query())
def test_ranking_matches_the_plain_rule(
    tuning: dict[str, object], case: tuple[list[IndexEntry], str, str]
) -> None:
    catalog, query, group = case
    with tuned(tuning):
        assert list(SearchIndex(catalog).ranked(query, group)) == reference(catalog, query, group)


@pytest.mark.parametrize("tuning", TUNINGS)
@FAST
@given(case=catalog_and_query())
def test_keyset_continuation_from_every_position_gives_exactly_the_rest(
    tuning: dict[str, object], case: tuple[list[IndexEntry], str, str]
) -> None:
    catalog, query, group = case
    with tuned(tuning):
        index = SearchIndex(catalog)
        expected = reference(catalog, query, group)
        for place, (tier, position) in enumerate(expected):
            after = (tier, catalog[position].name)
            assert list(index.ranked(query, group, after)) == expected[place + 1 :]


@FAST
@given(
    catalog=catalogs,
    query=st.lists(words, max_size=2).map(" ".join),
    tier=st.integers(-1, 5),
    name=st.text(alphabet=st.sampled_from(CHARS), max_size=6),
)
def test_any_keyset_position_skips_everything_up_to_it(
    catalog: list[IndexEntry], query: str, tier: int, name: str
) -> None:
    # Positions need not be in the catalog (names are compared, not looked up).
    got = list(SearchIndex(catalog).ranked(query, after=(tier, name)))
    assert got == reference(catalog, query, after=(tier, name))


@FAST
@given(catalog=catalogs, query=st.text(alphabet=st.sampled_from(CHARS), max_size=8))
def test_entry_indexes_are_positions_in_the_given_sequence(
    catalog: list[IndexEntry], query: str
) -> None:
    for _, position in SearchIndex(catalog).ranked(query):
        assert 0 <= position < len(catalog)
    assert len(SearchIndex(catalog)) == len(catalog)


# --- the rule, by example ------------------------------------------------------------


def names(
    index: SearchIndex, catalog: list[IndexEntry], query: str, group: str = ""
) -> list[tuple[int, str]]:
    return [(tier, catalog[k].name) for tier, k in index.ranked(query, group)]


def test_tier_is_the_worst_over_terms_of_the_best_field() -> None:
    catalog = [
        IndexEntry("alpha.beta", "tools", "Does things", ("long text",)),
        IndexEntry("alpha.other", "beta", "Does beta things", ()),
        IndexEntry("gamma", "tools", "alpha summary", ("beta in the description",)),
        IndexEntry("delta", "alpha", "nothing", ("beta",)),
        IndexEntry("epsilon", "tools", "alphabet", ()),
    ]
    index = SearchIndex(catalog)
    assert names(index, catalog, "alpha beta") == [
        (0, "alpha.beta"),  # both in the name
        (1, "alpha.other"),  # alpha in the name, beta best in the group
        (3, "delta"),  # alpha in the group, beta only in the documentation
        (3, "gamma"),  # alpha in the summary, beta only in the documentation
    ]
    assert names(index, catalog, "ALPHA") == [
        (0, "alpha.beta"),
        (0, "alpha.other"),
        (1, "delta"),
        (2, "epsilon"),
        (2, "gamma"),
    ]


def test_repeated_texts_index_every_entry_holding_them() -> None:
    # Texts that occur more than once are split once at construction and reused: each
    # entry holding one must still be indexed under its own id, in every field.
    shared_summary, shared_doc = "Lists the widgets.", "Returns a page of widget_ids."
    catalog = [
        IndexEntry(f"op{k:02d}", "g", shared_summary if k % 3 else "other", (shared_doc,))
        for k in range(40)
    ] + [IndexEntry("zz", "g", shared_summary, ("", shared_doc))]
    index = SearchIndex(catalog)
    for query in ("widgets", "widget_ids", "page", "lists widget_ids", "other"):
        assert list(index.ranked(query)) == reference(catalog, query), query
    assert len(list(index.ranked("widget_ids"))) == 41


@pytest.mark.parametrize(
    "tuning",
    [{}, {"_SHORT_PRECOMPUTE": 0}, {"_SHORT_PRECOMPUTE": 0, "_DENSE_MIN": 1, "_DENSE_FRACTION": 1}],
)
def test_short_terms_match_short_names_and_the_edges_of_long_ones(
    tuning: dict[str, object],
) -> None:
    # Only names shorter than a trigram are padded; a one- or two-character term must
    # still find the first and last characters of longer names, and whole short names
    # (kept one-character parts are built from the two-character parts holding them).
    catalog = [
        IndexEntry(name, "", "")
        for name in ["x", "q", "xq", "qx", "xqz", "zxq", "abcx", "xabc", "ab.cd", "aax", "xaa"]
    ]
    with tuned(tuning):
        index = SearchIndex(catalog)
    for query in ["x", "q", "z", "xq", "qx", "xa", "cx", "aa", "ax", "b.", ".c", "xqz", "d"]:
        assert list(index.ranked(query)) == reference(catalog, query), query
    assert len(list(index.ranked("x"))) == 9


def test_ties_use_case_sensitive_name_order() -> None:
    catalog = [IndexEntry(n, "", "x") for n in ["b", "a", "B", "A_", "_a"]]
    index = SearchIndex(catalog)
    assert [n for _, n in names(index, catalog, "")] == ["A_", "B", "_a", "a", "b"]
    assert [n for _, n in names(index, catalog, "X")] == ["A_", "B", "_a", "a", "b"]


def test_matching_uses_full_case_folding() -> None:
    catalog = [
        IndexEntry("street", "", "Straße und Weg"),
        IndexEntry("file", "", "ﬁle handling"),
        IndexEntry("greek", "", "ΟΔΥΣΣΕΥΣ"),
        IndexEntry("turkish", "", "İstanbul"),
    ]
    index = SearchIndex(catalog)
    assert names(index, catalog, "STRASSE") == [(2, "street")]
    assert names(index, catalog, "strasse weg") == [(2, "street")]
    assert names(index, catalog, "FILE") == [(0, "file")]
    assert names(index, catalog, "FI") == [(0, "file")]
    assert names(index, catalog, "\u0397ANDLING") == []  # a Greek capital Eta is not an H
    assert names(index, catalog, "handling") == [(2, "file")]
    assert names(index, catalog, "οδυσσευς") == [(2, "greek")]  # final sigmas fold too
    assert names(index, catalog, "odysseus") == []
    assert names(index, catalog, "i\u0307stanbul") == [(2, "turkish")]  # İ folds to i + dot
    assert names(index, catalog, "İSTANBUL") == [(2, "turkish")]
    assert names(index, catalog, "istanbul") == []


def test_a_term_never_spans_two_fields_or_two_documents() -> None:
    catalog = [IndexEntry("ab", "cd", "ef", ("gh", "ij"))]
    index = SearchIndex(catalog)
    for query in ["bc", "de", "fg", "hi"]:
        assert names(index, catalog, query) == [], query
    assert names(index, catalog, "gh ij") == [(3, "ab")]


def test_all_terms_must_match() -> None:
    catalog = [IndexEntry("orders.refund", "orders", "Refund an order")]
    index = SearchIndex(catalog)
    assert names(index, catalog, "refund order") == [(0, "orders.refund")]
    assert names(index, catalog, "refund invoice") == []


def test_empty_query_browses_by_name_and_group_filter_folds_case() -> None:
    catalog = [
        IndexEntry("b.two", "Billing", "x"),
        IndexEntry("a.one", "billing", "x"),
        IndexEntry("c.three", "orders", "x"),
        IndexEntry("d.four", " billing", "x"),
        IndexEntry("e.five", "", "x"),
    ]
    index = SearchIndex(catalog)
    assert names(index, catalog, "   ") == [
        (0, "a.one"),
        (0, "b.two"),
        (0, "c.three"),
        (0, "d.four"),
        (0, "e.five"),
    ]
    assert names(index, catalog, "", "BILLING") == [(0, "a.one"), (0, "b.two")]
    assert names(index, catalog, "x", "billing") == [(2, "a.one"), (2, "b.two")]
    assert names(index, catalog, "", " billing") == [(0, "d.four")]
    assert names(index, catalog, "", "nothing") == []
    assert list(index.ranked("", "", after=(0, "b.two"))) == [(0, 2), (0, 3), (0, 4)]
    assert list(index.ranked("", "", after=(1, ""))) == []


def test_has_terms_says_whether_a_query_has_terms_without_splitting_it() -> None:
    # str.split() drops exactly the characters str.isspace() accepts, for every code point
    chars = list(map(chr, range(sys.maxunicode + 1)))
    assert [has_terms(c) for c in chars] == [bool(query_terms(c)) for c in chars]
    for query in ["", " ", " \t\u3000\n", "a", " a ", "\u2028x", "\x1c\x1d", "..."]:
        assert has_terms(query) == bool(query_terms(query)), repr(query)
    # the rule ranks every query: it browses one without terms itself
    index = SearchIndex([IndexEntry("a", "", "x")])
    assert index.ranks("")
    assert index.ranks("x")


def test_exact_is_case_sensitive_and_names_must_be_unique() -> None:
    catalog = [IndexEntry("Orders.Refund", "", "x"), IndexEntry("orders.refund", "", "y")]
    index = SearchIndex(catalog)
    assert index.exact("Orders.Refund") == 0
    assert index.exact("orders.refund") == 1
    assert index.exact("ORDERS.REFUND") is None
    assert index.exact(" orders.refund") is None
    with pytest.raises(ValueError, match="unique"):
        SearchIndex([IndexEntry("a", "", ""), IndexEntry("a", "g", "s")])


def test_an_empty_index_finds_nothing() -> None:
    index = SearchIndex([])
    assert len(index) == 0
    assert list(index.ranked("")) == []
    assert list(index.ranked("anything", "group")) == []
    assert index.exact("") is None
    assert repr(index) == "SearchIndex(<0 entries>)"


def test_query_helpers() -> None:
    assert normalize_query("  Foo \t bar\u3000Baz\n") == "Foo bar Baz"
    assert normalize_query("") == ""
    assert query_terms(" Foo foo FOO Straße strasse ") == ("foo", "strasse")
    assert query_terms("\u3000") == ()
    assert fold_group("Billing") == "billing"
    assert fold_group(" ẞilling ") == " ssilling "


@FAST
@given(query=st.text(alphabet=st.sampled_from(CHARS), max_size=16))
def test_terms_never_hold_whitespace_and_normalizing_keeps_them(query: str) -> None:
    terms = query_terms(query)
    assert all(term and not any(c.isspace() for c in term) for term in terms)
    assert query_terms(normalize_query(query)) == terms
    assert normalize_query(normalize_query(query)) == normalize_query(query)


# --- scale: correct, and the work grows with the candidates, not the catalog -------------

VERBS = ["create", "get", "list", "update", "delete", "archive", "approve", "cancel"]
RESOURCES = {
    "billing": ["invoices", "credit_notes", "coupons"],
    "orders": ["orders", "returns", "carts"],
    "shipping": ["shipments", "carriers", "labels"],
    "support": ["tickets", "macros", "queues"],
}
WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "for",
    "with",
    "record",
    "account",
    "value",
    "status",
    "field",
    "page",
    "cursor",
    "filter",
    "request",
    "response",
    "scope",
    "owner",
    "team",
    "region",
    "default",
    "pending",
    "webhook",
    "event",
    "history",
    "audit",
    "retry",
    "timeout",
    "schedule",
    "report",
    "summary",
    "detail",
    "label",
    "tag",
    "note",
    "idempotent",
    "safely",
    "cached",
    "refreshed",
    "notifies",
    "sends",
]


def realistic(size: int, seed: int = 11) -> list[IndexEntry]:
    rng = random.Random(seed)
    shapes = [(g, r, v) for g, rs in RESOURCES.items() for r in rs for v in VERBS]
    catalog = []
    for number in range(size):
        group, resource, verb = shapes[number % len(shapes)]
        noun = resource.replace("_", " ")
        description = (
            f"{verb.capitalize()}s {noun} in {group}. "
            + " ".join(rng.choices(WORDS, k=rng.randint(10, 30)))
            + f". See {group}.{resource}.list_{rng.randrange(size)}."
        )
        catalog.append(
            IndexEntry(
                f"{group}.{resource}.{verb}_{number}",
                group.capitalize() if number % 2 else group,
                f"{verb.capitalize()} {noun} (variant {number}).",
                (description, f'{{"{resource}_id": "{rng.randrange(10**6):06d}"}}'),
            )
        )
    rng.shuffle(catalog)
    return catalog


class CountingIndex(SearchIndex):
    """A real index that counts the candidates it checks with the rule itself (those a
    term's inexact or unknown field left in doubt)."""

    __slots__ = ("candidates",)

    def __init__(self, entries: list[IndexEntry]) -> None:
        super().__init__(entries)
        self.candidates = 0

    def _tier_of(self, entry_id: int, terms: tuple[str, ...], limit: int) -> int:
        self.candidates += 1
        return super()._tier_of(entry_id, terms, limit)


@pytest.fixture(scope="module")
def large() -> tuple[list[IndexEntry], CountingIndex]:
    catalog = realistic(20_000)
    return catalog, CountingIndex(catalog)


def candidates(index: CountingIndex, query: str, take: int | None = None) -> int:
    """How many candidates a search checks one by one (for its first ``take`` results)."""
    index.candidates = 0
    list(itertools.islice(index.ranked(query), take))
    return index.candidates


QUERIES = [
    "",
    "invoices",
    "INVOICES create",
    "create_1234",
    "list_77",
    "webhook idempotent",
    "invoices carriers",
    "ap",
    "e",
    "zzyzx",
    "07",
    "billing.coupons",
    '{"tickets_id":',
    ").",
    "Support audit",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("group", ["", "BILLING"])
def test_large_catalog_matches_the_plain_rule(
    large: tuple[list[IndexEntry], CountingIndex], query: str, group: str
) -> None:
    catalog, index = large
    expected = reference(catalog, query, group)
    assert list(index.ranked(query, group)) == expected
    for place in range(0, len(expected), max(1, len(expected) // 5)):
        tier, position = expected[place]
        after = (tier, catalog[position].name)
        assert (
            list(itertools.islice(index.ranked(query, group, after), 7))
            == expected[place + 1 : place + 8]
        )


def test_work_grows_with_candidates_not_the_catalog(
    large: tuple[list[IndexEntry], CountingIndex],
) -> None:
    _, index = large
    # Nothing matches: the fields' bitsets are empty, no entry is checked.
    assert candidates(index, "zzyzx") == 0
    assert candidates(index, "invoices carriers") == 0  # both common, never together
    assert candidates(index, "create_99999") == 0
    # One-piece terms are exact on every field, and so are names of up to three
    # characters or with a rare trigram: no entry is checked, even walking every match
    # (as a restrictive policy does).
    for query in ["webhook", "pending webhook", "list_77", "ap", "ap webhook"]:
        assert candidates(index, query) == 0, query
    # A longer name term made only of common trigrams is a superset on names: its
    # candidates are checked, each at most once, whichever tiers they are read for.
    for query in ["invoices", "create invoices"]:
        assert 0 < candidates(index, query) <= len(reference(index._entries, query)), query
        assert candidates(index, query, take=6) <= 6
    # A term spanning pieces is a superset on text fields: a first page checks few.
    assert candidates(index, "billing.coupons", take=6) <= 12
    assert candidates(index, '{"tickets_id":', take=6) <= 64
    # A term matching nearly everything is unknown on text fields; its first page
    # checks a few entries, not the catalog.
    assert candidates(index, "e", take=6) <= 12


def test_inexact_fields_stay_exact_under_a_group_filter(
    large: tuple[list[IndexEntry], CountingIndex],
) -> None:
    catalog, index = large
    for query in ["webhook", "pending webhook", "audit", "billing.coupons", "e ap"]:
        expected = reference(catalog, query, "SHIPPING")
        assert list(index.ranked(query, "SHIPPING")) == expected


# --- the rule through a Registry -------------------------------------------------------


async def test_ranking_tiers_then_name() -> None:
    reg = registry()
    # name matches (refund in name) first, then summary, then other documentation.
    assert await page_names(reg, Ctx(), "refund", limit=20) == [
        "orders.refund",
        "refunds.report",
        "zeta",
    ]
    # group tier: "orders" matches names orders.* (tier 0) and billing's summary (tier 2)
    assert await page_names(reg, Ctx(), "orders", limit=20) == [
        "orders.list",
        "orders.refund",
        "billing.invoice",
    ]


async def test_all_terms_must_match_case_insensitively() -> None:
    reg = registry()
    assert await page_names(reg, Ctx(), "REFUND money", limit=20) == ["orders.refund"]
    assert await page_names(reg, Ctx(), "refund nothing-like-this", limit=20) == []


async def test_empty_query_browses_by_name() -> None:
    reg = registry(policy=AllowAll())
    assert await all_pages(reg, Ctx(), "") == sorted(o.name for o in CATALOG)


async def test_group_filter_ignores_case() -> None:
    reg = registry()
    assert await page_names(reg, Ctx(), "", group="ORDERS", limit=20) == [
        "orders.list",
        "orders.refund",
    ]


async def test_schemas_are_never_indexed() -> None:
    schema = {"type": "object", "properties": {"xylophone": {"type": "string"}}}
    reg = registry([op("a", input_schema=schema, output_schema=schema)])
    assert await page_names(reg, Ctx(), "xylophone") == []
    page = await reg.search(Ctx(), "")
    assert isinstance(page, SearchPage)
    assert "xylophone" not in repr(page)
