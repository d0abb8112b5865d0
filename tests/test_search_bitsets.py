"""Tests of ``opgate._search._bitsets``: sets of entry ids as bitsets and ascending ids.

Each helper against plain Python sets and lists on random ids, and ``ones_from`` under
every read width (the search index's tunings set it as low as one bit). How the index
combines them is ``test_search_index.py``.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._search import _bitsets
from opgate._search._bitsets import bitset_of, id_count, id_runs, ones_from, tail, union

SIZE = 600
id_sets = st.sets(st.integers(0, SIZE - 1), max_size=80)
starts = st.integers(0, SIZE + 10)
FAST = settings(max_examples=200, deadline=None)


def plain(bitset: int) -> set[int]:
    return {k for k in range(bitset.bit_length()) if bitset >> k & 1}


@FAST
@given(lists=st.lists(id_sets, max_size=4))
def test_bitset_of_sets_the_bits_of_every_list(lists: list[set[int]]) -> None:
    bitset = bitset_of([sorted(ids) for ids in lists], SIZE)
    assert plain(bitset) == set().union(*lists)
    assert id_count([sorted(ids) for ids in lists]) == sum(map(len, lists))


@FAST
@given(sets=st.lists(id_sets, max_size=4))
def test_union_is_the_union_of_the_sets(sets: list[set[int]]) -> None:
    assert plain(union(bitset_of([sorted(ids)], SIZE) for ids in sets)) == set().union(*sets)
    assert union([]) == 0


@pytest.mark.parametrize("read", [1, 3, 8, 256])
@FAST
@given(ids=id_sets, start=starts)
def test_ones_from_reads_the_set_bits_from_start_ascending(
    read: int, ids: set[int], start: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_bitsets, "_READ", read)
        found = list(ones_from(bitset_of([sorted(ids)], SIZE), start))
    assert found == sorted(k for k in ids if k >= start)


@FAST
@given(ids=id_sets, start=starts)
def test_tail_reads_the_ascending_ids_from_start(ids: set[int], start: int) -> None:
    ascending = sorted(ids)
    assert list(tail(ascending, start)) == [k for k in ascending if k >= start]


@FAST
@given(ids=id_sets)
def test_id_runs_are_the_maximal_runs_of_consecutive_ids(ids: set[int]) -> None:
    runs = id_runs(sorted(ids))
    assert [k for first, length in runs for k in range(first, first + length)] == sorted(ids)
    assert all(length > 0 for _, length in runs)
    # Maximal: a run never starts right after the previous one ends.
    assert all(a + n < b for (a, n), (b, _) in pairwise(runs))


def test_id_runs_of_nothing_and_of_id_zero() -> None:
    assert id_runs([]) == []
    assert id_runs([0, 1, 2, 5]) == [(0, 3), (5, 1)]
