"""Sets of entry ids, as the search index holds and combines them.

A set of entries is a Python ``int`` used as a bitset (bit ``i`` for id ``i``):
union, intersection and difference of whole sets run at C speed (about a
microsecond at 20,000 entries), and a page reads the lowest set bits from its start
id on (``ones_from``). Sets too small to be worth a bitset are ascending sequences
of ids (``Ids``): ``bitset_of`` turns them into bits, ``tail`` reads them from a
start id on and ``id_runs`` finds their runs of consecutive ids.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from functools import reduce
from operator import or_

__all__ = ["Ids", "bitset_of", "id_count", "id_runs", "ones_from", "tail", "union"]

#: Ascending entry ids.
Ids = Sequence[int]

#: Bits read at once from a bitset (``ones_from``).
_READ = 256

_BIT = tuple(1 << k for k in range(8))


def bitset_of(lists: Iterable[Ids], size: int) -> int:
    """The bitset of the ids in ``lists`` (each id below ``size``)."""
    buffer = bytearray((size + 7) >> 3)
    bit = _BIT
    for ids in lists:
        for entry_id in ids:
            buffer[entry_id >> 3] |= bit[entry_id & 7]
    return int.from_bytes(buffer, "little")


def union(bitsets: Iterable[int]) -> int:
    """The union of ``bitsets`` (``0`` for none)."""
    return reduce(or_, bitsets, 0)


def ones_from(bitset: int, start: int) -> Iterator[int]:
    """The set bits ``>= start`` of ``bitset``, ascending.

    Skips to the lowest set bit with one shift of the whole set, then reads the next
    ``_READ`` bits as a small integer, so a sparse set costs a few whole-set
    operations per id and a dense one a few per ``_READ`` ids.
    """
    rest = bitset >> start
    base = start
    while rest:
        skip = (rest & -rest).bit_length() - 1
        rest >>= skip
        base += skip
        chunk = rest & ((1 << _READ) - 1)
        rest >>= _READ
        while chunk:
            low = chunk & -chunk
            yield base + low.bit_length() - 1
            chunk ^= low
        base += _READ


def id_runs(ids: Ids) -> list[tuple[int, int]]:
    """The ascending ids as runs of consecutive ids: ``(first, length)`` pairs."""
    runs: list[tuple[int, int]] = []
    first = previous = -2
    for entry_id in ids:
        if entry_id != previous + 1:
            if previous >= 0:
                runs.append((first, previous - first + 1))
            first = entry_id
        previous = entry_id
    if previous >= 0:
        runs.append((first, previous - first + 1))
    return runs


def id_count(lists: Iterable[Ids]) -> int:
    """How many ids ``lists`` hold in all."""
    return sum(map(len, lists))


def tail(ascending: Ids, start: int) -> Iterator[int]:
    """The items ``>= start`` of an ascending sequence, lazily."""
    return map(ascending.__getitem__, range(bisect_left(ascending, start), len(ascending)))
