"""Posting lists: which entries (or blocks of texts) hold each key, and what a
lookup of them says about one term.

A posting list maps a key (a name trigram, a piece of text) to the ascending ids
holding it. One listed for many entries (in at least ``1/_DENSE_FRACTION`` of the
catalog) is stored as a bitset, built once; the others as ascending id arrays,
turned into bits per query (``split_dense``, ``dense_positions``, ``Postings``). A
``GramIndex`` lists, per trigram, the blocks of padded texts holding it.

A lookup's answer for one term in one field is a ``Field``: a bitset that is a
superset of the term's matches, *exact* when it is the match set itself, or
*unknown* when listing it would cost too much (more than ``SPARSE_LIMIT`` sparse
ids): such a term is common, so testing it directly on the candidates the other
terms leave is cheap.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain, repeat

from ._bitsets import bitset_of

__all__ = [
    "GRAM",
    "NO_IDS",
    "SEPARATOR",
    "SPARSE_LIMIT",
    "Blocks",
    "Field",
    "GramIndex",
    "Postings",
    "append_all",
    "block_texts",
    "consume",
    "dense_positions",
    "restore_slots",
    "split_dense",
]

#: The gram length: trigrams make a term's rarest gram selective.
GRAM = 3

#: Joins an entry's documents, a block's fields and the texts of a gram block. It is
#: whitespace, so no term (which never holds whitespace) matches across two texts
#: and no gram of a term spans two texts.
SEPARATOR = "\n"

#: A posting list (of a name trigram, or of a piece in one field) holding at least
#: one id in this many of the catalog's, and at least ``_DENSE_MIN`` ids, is kept as
#: a bitset; the others as id arrays (a bitset costs one bit per entry of the
#: catalog, an id four bytes).
_DENSE_FRACTION = 128
_DENSE_MIN = 32

#: A field of a term whose sparse postings hold more ids than this is unknown:
#: setting their bits would cost more than testing the term on candidates.
SPARSE_LIMIT = 2048

#: Ascending numbers of blocks (or ids) in a posting list.
Blocks = Sequence[int]

#: The posting list of a key held nowhere.
NO_IDS: list[int] = []


def restore_slots(instance: object, state: object) -> None:
    """The index classes' ``__setstate__`` (a rule index comes back from its child as a
    pickle, ``_index_build``): ``state`` as ``object.__getstate__`` gives it, ``(None,
    {slot: value})``, sets only ``instance``'s own class's slots. Being a method, it
    also stops a pickle's BUILD on the class object itself (called unbound, it lacks
    an argument), which the unpickler would otherwise turn into ``setattr`` on the
    class, process-wide."""
    if not isinstance(state, tuple) or len(state) != 2 or state[0] is not None:
        raise TypeError("an index's pickled state is (None, its slots)")
    slots: tuple[str, ...] = getattr(type(instance), "__slots__", ())
    values = state[1]
    if type(values) is not dict:
        raise TypeError("an index's pickled state is (None, its slots)")
    for key, value in values.items():
        if type(key) is not str or key not in slots:
            raise TypeError(f"{key!r} is not a slot of {type(instance).__name__}")
        object.__setattr__(instance, key, value)


class Field:
    """Where one term may match in one field: ``bits`` is a superset of its matches
    (``None``: unknown, every entry), ``exact`` says it is the match set itself."""

    __slots__ = ("bits", "exact")

    def __init__(self, bits: int | None, exact: bool) -> None:
        self.bits = bits
        self.exact = exact and bits is not None


def consume(iterator: Iterable[object]) -> None:
    """Run an iterator of side effects at C speed."""
    deque(iterator, maxlen=0)


def append_all(lists: defaultdict[str, list[int]], keys: Iterable[str], number: int) -> None:
    """Append ``number`` to the list of every key.

    Lists, not arrays, while building: ``list.append`` stores a reference, where
    ``array.append`` parses its argument (at real 20 k, 9 % of the build's
    instructions)."""
    consume(map(list.append, map(lists.__getitem__, keys), repeat(number)))


def block_texts(texts: Sequence[str], size: int) -> list[str]:
    """The texts joined by blocks of ``size``, each block padded with the separator."""
    return [
        SEPARATOR + SEPARATOR.join(texts[first : first + size]) + SEPARATOR
        for first in range(0, len(texts), size)
    ]


class GramIndex:
    """Which blocks hold each trigram, over padded block texts.

    Padding makes every substring of one to three characters of any text lie
    inside some trigram of its block; a longer substring's trigrams all occur in
    its block.
    """

    __slots__ = ("_shorter", "_trigrams")
    __setstate__ = restore_slots  # a pickle sets only these slots

    def __init__(self, blocks: Iterable[str]) -> None:
        lists: defaultdict[str, list[int]] = defaultdict(list)
        for number, text in enumerate(blocks):
            append_all(lists, {text[k : k + GRAM] for k in range(len(text) - GRAM + 1)}, number)
        self._trigrams: dict[str, list[int]] = dict(lists)
        shorter: defaultdict[str, list[list[int]]] = defaultdict(list)
        for gram, numbers in self._trigrams.items():
            for part in {gram[0], gram[1], gram[2], gram[:2], gram[1:]}:
                shorter[part].append(numbers)
        self._shorter: dict[str, list[list[int]]] = dict(shorter)

    def rarest(self, term: str) -> list[Blocks]:
        """Block lists whose union holds every block with a text containing ``term``:
        every trigram containing a short term, or the rarest trigram of a longer one."""
        lists = self.all(term)
        if len(term) < GRAM or not lists:
            return lists
        return [min(lists, key=len)]

    def all(self, term: str) -> list[Blocks]:
        """Every trigram list containing a short term (a block holding the term is in
        one of them), or every trigram list of a longer term (it is in all of them;
        none if some trigram occurs nowhere)."""
        if len(term) < GRAM:
            return list(self._shorter.get(term, ()))
        lists: list[Blocks] = []
        for k in range(len(term) - GRAM + 1):
            numbers = self._trigrams.get(term[k : k + GRAM])
            if numbers is None:
                return []
            lists.append(numbers)
        return lists


class Postings:
    """Per vocabulary position, the ascending entry ids whose field holds that piece;
    empty for the positions in ``dense`` (kept as bitsets instead, never listed)."""

    __slots__ = ("_flat", "_offsets")
    __setstate__ = restore_slots  # a pickle sets only these slots

    def __init__(
        self, vocabulary: Sequence[bytes], lists: dict[bytes, list[int]], dense: Iterable[int]
    ) -> None:
        in_order = list(map(lists.get, vocabulary, repeat(NO_IDS)))
        for position in dense:
            in_order[position] = NO_IDS
        # Read through a memoryview: a slice is a view, not a copy of its references.
        # (An array made from a list takes its fast path; from an iterator, a parse
        # per item.)
        self._flat = memoryview(array("i", list(chain.from_iterable(in_order))))
        self._offsets = array("i", accumulate(map(len, in_order), initial=0))

    def get(self, position: int) -> Blocks:
        return self._flat[self._offsets[position] : self._offsets[position + 1]]

    def count(self, position: int) -> int:
        return self._offsets[position + 1] - self._offsets[position]


def _is_dense(count: int, size: int) -> bool:
    return count >= _DENSE_MIN and count * _DENSE_FRACTION >= size


def split_dense(
    lists: dict[str, list[int]], size: int
) -> tuple[dict[str, int], dict[str, array[int]]]:
    """The posting lists long enough to be bitsets, as bitsets, and the others."""
    dense = {key: bitset_of([ids], size) for key, ids in lists.items() if _is_dense(len(ids), size)}
    sparse = {key: array("i", ids) for key, ids in lists.items() if key not in dense}
    return dense, sparse


def dense_positions(
    vocabulary: Sequence[bytes], lists: dict[bytes, list[int]], size: int
) -> dict[int, int]:
    """By vocabulary position (``vocabulary`` is sorted), the bitsets of the posting
    lists long enough to be."""
    return {
        bisect_left(vocabulary, piece): bitset_of([ids], size)
        for piece, ids in lists.items()
        if _is_dense(len(ids), size)
    }
