"""The group field of the search index: the distinct folded groups and their entries.

A term's group field is the union of the distinct folded groups holding it, found
with one substring search over the groups joined; a group's entries are usually runs
of consecutive ids (names start with their group), so its bitset is a union of runs.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from itertools import accumulate

from ._bitsets import bitset_of, id_runs, union
from ._postings import SEPARATOR, Field, restore_slots

__all__ = ["GroupIndex"]

#: A one- or two-character part of more groups than this gets its own bitset.
_GROUPS_PRECOMPUTE = 16

_new_ids: Callable[[], array[int]] = partial(array, "i")


class GroupIndex:
    """Where a term may match among the folded groups (one per entry id), built once.

    ``ids`` maps each distinct folded group to its ascending entry ids.
    """

    __slots__ = ("_joined", "_list", "_runs", "_short", "_size", "_starts", "ids")
    __setstate__ = restore_slots  # a pickle sets only these slots

    def __init__(self, groups: Sequence[str]) -> None:
        self._size = len(groups)
        group_ids: defaultdict[str, array[int]] = defaultdict(_new_ids)
        for entry_id, group in enumerate(groups):
            group_ids[group].append(entry_id)
        self.ids: dict[str, array[int]] = dict(group_ids)
        # The distinct groups joined, and where each starts: a term's groups are found
        # with a substring search, not a test of every group.
        self._list = list(self.ids)
        self._joined = SEPARATOR.join(self._list)
        self._starts = array("i", accumulate((len(g) + 1 for g in self._list), initial=0))
        # Groups are usually runs of consecutive ids (names start with their group).
        self._runs: dict[str, list[tuple[int, int]]] = {
            group: id_runs(ids) for group, ids in self.ids.items()
        }
        # A one- or two-character part found in many groups is kept as a bitset.
        holders: defaultdict[str, list[str]] = defaultdict(list)
        for group in self._list:
            for part in {group[k : k + width] for width in (1, 2) for k in range(len(group))}:
                holders[part].append(group)
        # Each group's bitset is made once, not once per part it holds.
        group_bits = {group: self.bits(group) for group in self._list}
        self._short: dict[str, int] = {
            part: union(map(group_bits.__getitem__, groups))
            for part, groups in holders.items()
            if len(groups) > _GROUPS_PRECOMPUTE
        }

    def bits(self, group: str) -> int:
        """The bitset of a distinct folded group's entries."""
        runs = self._runs[group]
        if 4 * len(runs) > len(self.ids[group]):
            return bitset_of([self.ids[group]], self._size)
        return union(((1 << length) - 1) << first for first, length in runs)

    def field(self, term: str) -> Field:
        """The group field of a folded term (always exact)."""
        known = self._short.get(term)
        if known is not None:
            return Field(known, True)
        joined = self._joined
        at = joined.find(term)
        if at < 0:
            return Field(0, True)
        groups, starts, bits = self._list, self._starts, 0
        while at >= 0:  # each group holding the term once
            number = bisect_right(starts, at) - 1
            bits |= self.bits(groups[number])
            at = joined.find(term, starts[number + 1]) if number + 1 < len(starts) else -1
        return Field(bits, True)
