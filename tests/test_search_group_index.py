"""Tests of ``opgate._search._group_index``: the distinct folded groups and their entries.

A group's bitset is its entries, whether built from runs of ids or listed; a term's
group field is exactly the entries of the groups holding it, with short parts kept as
bitsets or not. How the index filters and ranks with it is ``test_search_index.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._search import _group_index
from opgate._search._bitsets import ones_from
from opgate._search._group_index import GroupIndex

FAST = settings(max_examples=150, deadline=None)
groups = st.lists(st.sampled_from(["", "a", "ab", "ba", "ß", "ss", "b.c", "abc"]), max_size=60)
terms = st.text(alphabet="abcß.s", min_size=1, max_size=3)


@pytest.mark.parametrize("precompute", [16, 0])
@FAST
@given(folded=groups, term=terms)
def test_a_terms_group_field_is_the_entries_of_the_groups_holding_it(
    precompute: int, folded: list[str], term: str
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_group_index, "_GROUPS_PRECOMPUTE", precompute)
        index = GroupIndex(folded)
    field = index.field(term)
    assert field.exact
    assert list(ones_from(field.bits or 0, 0)) == [k for k, g in enumerate(folded) if term in g]
    for group in set(folded):
        assert list(index.ids[group]) == [k for k, g in enumerate(folded) if g == group]
        assert list(ones_from(index.bits(group), 0)) == list(index.ids[group])


def test_runs_and_scattered_groups_give_the_same_bitsets() -> None:
    folded = ["a"] * 5 + ["b", "a", "b", "a", "b"]
    index = GroupIndex(folded)
    assert list(ones_from(index.bits("a"), 0)) == [0, 1, 2, 3, 4, 6, 8]
    assert list(ones_from(index.bits("b"), 0)) == [5, 7, 9]
    assert index.field("z").bits == 0
