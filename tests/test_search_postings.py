"""Tests of ``opgate._search._postings``: posting lists, dense or sparse, the gram index
over blocks of texts, and the ``Field`` a lookup gives.

The gram index never misses a block holding a term (short terms through every trigram
containing them, longer ones through each of their trigrams); dense posting lists
become bitsets by the documented rule and the others stay listed, in order; an unknown
field is never exact. How the search index uses them is ``test_search_index.py``.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._search import _postings
from opgate._search._bitsets import bitset_of
from opgate._search._postings import (
    GRAM,
    SEPARATOR,
    Field,
    GramIndex,
    Postings,
    append_all,
    block_texts,
    dense_positions,
    split_dense,
)

FAST = settings(max_examples=150, deadline=None)
texts = st.lists(st.text(alphabet="abcß_. ", max_size=8), max_size=12)
terms = st.text(alphabet="abcß_.", min_size=1, max_size=5)


@FAST
@given(texts=texts, size=st.integers(1, 4), term=terms)
def test_the_gram_index_never_misses_a_block_holding_a_term(
    texts: list[str], size: int, term: str
) -> None:
    blocks = block_texts(texts, size)
    grams = GramIndex(blocks)
    holding = {number for number, text in enumerate(blocks) if term in text}
    every, rarest = grams.all(term), grams.rarest(term)
    if len(term) < GRAM:  # in one of the lists containing the term
        assert holding <= set().union(*every)
        assert rarest == every
    else:  # in every list of the term's trigrams
        assert all(holding <= set(numbers) for numbers in every)
        assert holding <= set().union(*rarest)
        assert len(rarest) <= 1
    assert all(list(numbers) == sorted(set(numbers)) for numbers in every)


def test_block_texts_pad_and_join_each_block_with_the_separator() -> None:
    assert block_texts(["ab", "c", "d"], 2) == [f"{SEPARATOR}ab{SEPARATOR}c{SEPARATOR}", "\nd\n"]
    assert block_texts([], 2) == []


def test_append_all_appends_the_number_once_per_key() -> None:
    lists: defaultdict[str, list[int]] = defaultdict(list)
    append_all(lists, {"a", "b"}, 3)
    append_all(lists, ["a"], 5)
    assert dict(lists) == {"a": [3, 5], "b": [3]}


id_lists = st.dictionaries(
    st.text(alphabet="abc", min_size=1, max_size=3),
    st.sets(st.integers(0, 99), min_size=1, max_size=60).map(sorted),
    max_size=8,
)


@pytest.mark.parametrize(("dense_min", "fraction"), [(32, 128), (1, 4), (0, 1 << 30), (1 << 30, 1)])
@FAST
@given(lists=id_lists)
def test_long_posting_lists_become_bitsets_and_the_others_stay_listed(
    dense_min: int, fraction: int, lists: dict[str, list[int]]
) -> None:
    size = 100
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_postings, "_DENSE_MIN", dense_min)
        patch.setattr(_postings, "_DENSE_FRACTION", fraction)
        dense, sparse = split_dense(lists, size)
        vocabulary = sorted(key.encode() for key in lists)
        encoded = {key.encode(): ids for key, ids in lists.items()}
        by_position = dense_positions(vocabulary, encoded, size)
    wanted = {
        key for key, ids in lists.items() if len(ids) >= dense_min and len(ids) * fraction >= size
    }
    assert set(dense) == wanted
    assert set(sparse) == lists.keys() - wanted
    assert all(dense[key] == bitset_of([lists[key]], size) for key in dense)
    assert all(list(sparse[key]) == lists[key] for key in sparse)
    assert {vocabulary[position].decode() for position in by_position} == wanted
    assert all(
        bits == bitset_of([encoded[vocabulary[position]]], size)
        for position, bits in by_position.items()
    )
    postings = Postings(vocabulary, encoded, by_position)
    for position, piece in enumerate(vocabulary):
        listed = [] if position in by_position else encoded[piece]
        assert list(postings.get(position)) == listed
        assert postings.count(position) == len(listed)


def test_an_unknown_field_is_never_exact() -> None:
    assert not Field(None, True).exact
    assert Field(0, True).exact
    assert not Field(5, False).exact
