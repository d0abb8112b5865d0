"""Tests of ``opgate._search._name_index``: the trigram index over the folded names.

A term's name field holds every name containing it, and only those when exact, for
terms of every length (padded short names, short parts kept as bitsets, rare and
common trigrams, small intersections tested name by name), under tunings that force
each path. How the index ranks with it is ``test_search_index.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._search import _name_index, _postings
from opgate._search._bitsets import ones_from
from opgate._search._name_index import NameIndex

FAST = settings(max_examples=120, deadline=None)
ALPHABET = list("abß_.\u03c3")
names = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=7), max_size=40, unique=True)
terms = st.text(alphabet=ALPHABET, min_size=1, max_size=5)

TUNINGS: list[dict[str, object]] = [
    {},
    {"_DENSE_MIN": 0, "_DENSE_FRACTION": 1 << 30, "_VERIFY_LIMIT": 1 << 30},
    {"_DENSE_MIN": 1 << 30, "_SHORT_PRECOMPUTE": 0},
    {"SPARSE_LIMIT": 0, "_DENSE_MIN": 2, "_DENSE_FRACTION": 4, "_VERIFY_LIMIT": 0},
]


@pytest.mark.parametrize("tuning", TUNINGS)
@FAST
@given(folded=names, term=terms)
def test_a_terms_name_field_holds_every_name_containing_it(
    tuning: dict[str, object], folded: list[str], term: str
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in tuning.items():
            for module in (_postings, _name_index):
                if hasattr(module, name):
                    patch.setattr(module, name, value)
        field = NameIndex(sorted(folded)).field(term)
    holding = [k for k, name in enumerate(sorted(folded)) if term in name]
    if field.bits is None:
        assert not field.exact
        return
    found = list(ones_from(field.bits, 0))
    assert set(holding) <= set(found)
    if field.exact:
        assert found == holding


def test_short_and_long_terms_on_a_small_catalog() -> None:
    index = NameIndex(["a", "ab", "abc", "abcd", "xbcy"])
    assert list(ones_from(index.field("b").bits or 0, 0)) == [1, 2, 3, 4]
    field = index.field("bcd")
    assert field.exact
    assert list(ones_from(field.bits or 0, 0)) == [3]
    field = index.field("abcd")
    assert field.exact
    assert list(ones_from(field.bits or 0, 0)) == [3]
    assert index.field("zz").bits == 0
